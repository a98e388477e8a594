"""Batched DPP greedy selection vs the same function called once per query (B=1) in a Python loop.

Both main rows use --dtype (float32, what the select stage uses by default); the other dtype's batched
time is shown for reference only (not in the ratio). The script checks both give the same picks.

Usage: python scripts/bench/bench_select.py [--B 10000] [--P 60] [--d 384] [--k 8] [--device cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import torch

from pipeline.ops.dpp import dpp_greedy


def _time(fn, device: str) -> float:
    """Seconds for one call of ``fn``, synchronising CUDA around it."""
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=10000)
    ap.add_argument("--P", type=int, default=60)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)

    g = torch.Generator().manual_seed(a.seed)
    quality = torch.rand(a.B, a.P, generator=g).to(a.device)  # quality: (B, P)
    emb = torch.randn(a.B, a.P, a.d, generator=g).to(a.device)  # emb: (B, P, d)
    dt = getattr(torch, a.dtype)
    other = torch.float64 if dt == torch.float32 else torch.float32
    dpp_greedy(quality[:4], emb[:4], a.k, dtype=dt)  # warm-up

    out: dict[str, torch.Tensor] = {}
    batched = _time(
        lambda: out.__setitem__("batched", dpp_greedy(quality, emb, a.k, dtype=dt)[0]), a.device
    )
    batched_other = _time(lambda: dpp_greedy(quality, emb, a.k, dtype=other), a.device)
    loop = _time(
        lambda: out.__setitem__(
            "loop",
            torch.cat(
                [
                    dpp_greedy(quality[b : b + 1], emb[b : b + 1], a.k, dtype=dt)[0]
                    for b in range(a.B)
                ]
            ),
        ),
        a.device,
    )
    if not torch.equal(out["batched"], out["loop"]):
        raise SystemExit("batched and per-query selections differ")

    print(f"B={a.B} P={a.P} d={a.d} k={a.k} device={a.device} threads={torch.get_num_threads()}")
    print(f"{'method':<24}{'seconds':>10}{'queries/s':>12}")
    rows = (
        (f"batched {a.dtype}", batched),
        (f"batched {str(other)[6:]}", batched_other),
        (f"per-query loop {a.dtype}", loop),
    )
    for name, sec in rows:
        print(f"{name:<24}{sec:>10.3f}{a.B / sec:>12.0f}")
    print(f"speedup vs per-query loop: {loop / batched:.1f}")


if __name__ == "__main__":
    main()
