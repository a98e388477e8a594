"""Benchmark BME's novelty path (NMF gate + topic novelty + FISTA residual): batched torch vs a
per-query numpy loop.

Synthetic problems: random unit d-dim query and basis embeddings, basis size m uniform in [2, 24],
k = min(15, m). The batched path groups problems by m (no padding waste) and runs chunks of --chunk.
The loop is timed on --loop-n queries and extrapolated per query to all of them (printed as such).
The last line is ``speedup vs per-query loop: <ratio>``.

    .venv/bin/python scripts/bench_novelty.py [--n 10000] [--loop-n 300] [--chunk 1024] [--device cpu]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from pipeline.ops.fista import fista_batched, fista_reference
from pipeline.ops.nmf import nmf_batched, nmf_reference, novelty_batched, novelty_reference, prepare_basis


def make_problems(n: int, d: int, seed: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{m: (E (n_m, m, d), q (n_m, d))} float32 unit rows, m uniform in [2, 24]."""
    rng = np.random.default_rng(seed)
    ms = rng.integers(2, 25, size=n)
    out = {}
    for m in np.unique(ms):
        E = rng.standard_normal((int((ms == m).sum()), int(m), d)).astype(np.float32)
        q = rng.standard_normal((len(E), d)).astype(np.float32)
        out[int(m)] = (E / np.linalg.norm(E, axis=-1, keepdims=True), q / np.linalg.norm(q, axis=-1, keepdims=True))
    return out


def run_batched(problems, chunk: int, device: str, dtype: torch.dtype) -> tuple[dict, dict[str, float]]:
    """Full path per bucket/chunk → ({m: (novelty, residual_norm)}, seconds per stage)."""
    secs, res = {"nmf": 0.0, "novelty": 0.0, "fista": 0.0}, {}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for m, (E_all, q_all) in problems.items():
        nov_parts, rn_parts = [], []
        for s in range(0, len(E_all), chunk):
            E = torch.as_tensor(E_all[s: s + chunk]).to(device, dtype)
            q = torch.as_tensor(q_all[s: s + chunk]).to(device, dtype)
            mv = torch.full((len(E),), m, device=device)
            t0 = time.perf_counter()
            V, qv = prepare_basis(E, q=q, m=mv)
            _, H, _ = nmf_batched(V, mv)
            sync(); t1 = time.perf_counter()
            nov = novelty_batched(H, mv.clamp(max=15), qv)["novelty"]
            sync(); t2 = time.perf_counter()
            _, r = fista_batched(E, mv, q)
            sync(); t3 = time.perf_counter()
            secs["nmf"] += t1 - t0; secs["novelty"] += t2 - t1; secs["fista"] += t3 - t2
            nov_parts.append(nov.cpu().double().numpy())
            rn_parts.append(torch.linalg.vector_norm(r, dim=-1).cpu().double().numpy())
        res[m] = (np.concatenate(nov_parts), np.concatenate(rn_parts))
    return res, secs


def run_loop(items) -> tuple[list[tuple[float, float]], float]:
    """Per-query numpy reference (float64) over [(E (m, d), q (d,))] → [(novelty, ‖r‖)], seconds."""
    out, t0 = [], time.perf_counter()
    for E, q in items:
        E, q = E.astype(np.float64), q.astype(np.float64)
        V = np.abs(E / np.linalg.norm(E, axis=1, keepdims=True))
        _, H, _, _ = nmf_reference(V, min(15, len(E)))
        nov = novelty_reference(H, np.abs(q))["novelty"]
        _, r = fista_reference(E, q)
        out.append((nov, float(np.linalg.norm(r))))
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--loop-n", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    problems = make_problems(a.n, a.d, a.seed)
    run_batched({2: tuple(x[:8] for x in problems[2])}, a.chunk, a.device, getattr(torch, a.dtype))  # warm-up
    res, secs = run_batched(problems, a.chunk, a.device, getattr(torch, a.dtype))
    t_batch = sum(secs.values())
    # Loop subset: the first queries of every bucket, round-robin, so its m mix matches the full set.
    order = [(m, j) for j in range(max(len(E) for E, _ in problems.values()))
             for m, (E, _) in problems.items() if j < len(E)][: a.loop_n]
    loop, t_loop_sub = run_loop([(problems[m][0][j], problems[m][1][j]) for m, j in order])
    per_q = t_loop_sub / len(order)
    t_loop = per_q * a.n
    nov_diff = max(abs(res[m][0][j] - lo[0]) for (m, j), lo in zip(order, loop))
    rn_diff = max(abs(res[m][1][j] - lo[1]) for (m, j), lo in zip(order, loop))
    gate = np.mean([(res[m][0][j] >= 0.4) == (lo[0] >= 0.4) and (res[m][1][j] > 0.3) == (lo[1] > 0.3)
                    for (m, j), lo in zip(order, loop)])
    nov_all = np.concatenate([v[0] for v in res.values()])
    print(f"queries={a.n} d={a.d} m~U[2,24] k=min(15,m) device={a.device} dtype={a.dtype} "
          f"threads={torch.get_num_threads()} chunk={a.chunk} (grouped by m)")
    print(f"{'path':<34}{'seconds':>10}{'ms/query':>10}")
    print(f"{'batched torch, total':<34}{t_batch:>10.2f}{1e3 * t_batch / a.n:>10.3f}")
    for name, s in secs.items():
        print(f"{'  ' + name:<34}{s:>10.2f}{1e3 * s / a.n:>10.3f}")
    print(f"{'per-query numpy loop, timed':<34}{t_loop_sub:>10.2f}{1e3 * per_q:>10.3f}   (on {len(order)} queries)")
    print(f"{'per-query numpy loop, extrapolated':<34}{t_loop:>10.2f}{1e3 * per_q:>10.3f}   (x {a.n} queries)")
    print(f"agreement on the timed subset: max |Δnovelty| {nov_diff:.2e}, max |Δ‖r‖| {rn_diff:.2e}, "
          f"both gates equal {100 * gate:.1f}%")
    print(f"novelty over all queries: median {np.median(nov_all):.3f}, share >= 0.4 (gate open) "
          f"{100 * np.mean(nov_all >= 0.4):.1f}%")
    print(f"speedup vs per-query loop: {t_loop / t_batch:.1f}")


if __name__ == "__main__":
    main()
