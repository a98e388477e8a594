"""Benchmark: the dense rescore (``dense.pair_scores`` → ``ops.pairdot``) against numpy's
``einsum``, which it replaced, in one process.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_pair_scores.py [--nodes 100000] [--queries 10000]
        [--hits 108] [--devices cpu,cuda]

The pairs are ``exact_top``'s: each query with ``--hits`` nodes (k + RESCORE_EXTRA at k = 100) of
random unit 384-d vectors. Rows: the old rescore (``einsum`` per block of 2,048 pairs on the
process's cores), ``pair_dots`` on the host (numpy, the same blocks and threads) and on each torch
device in ``--devices`` (vectors resident there, as a torch index holds them; the upload of the
node vectors is not timed, the pairs' indices and the scores' transfer are). Each side runs
``--repeat`` times; the table gives the median seconds, pairs/s, the max |error| against a float64
dot, and whether the side's bits equal the host ``pair_dots``' (the einsum row says how many pairs
it rounds differently).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline

from pipeline.ops import pairdot  # noqa: E402


def einsum_scores(xq, xb, qi, di, block: int = 2048) -> np.ndarray:
    """The rescore before ``ops.pairdot``: numpy's einsum per block, blocks over threads."""
    out = np.empty(len(qi), np.float32)

    def one(s: int) -> None:
        out[s : s + block] = np.einsum("ij,ij->i", xq[qi[s : s + block]], xb[di[s : s + block]])

    starts = range(0, len(qi), block)
    with ThreadPoolExecutor(min(len(starts), len(os.sched_getaffinity(0)))) as pool:
        list(pool.map(one, starts))
    return out


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--hits", type=int, default=108)
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    g = np.random.default_rng(0)
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    xb, xq = unit(g.standard_normal((a.nodes, 384))), unit(g.standard_normal((a.queries, 384)))
    qi = np.repeat(np.arange(a.queries), a.hits)
    di = g.integers(0, a.nodes, len(qi))
    exact = np.einsum("ij,ij->i", xq[qi].astype(np.float64), xb[di].astype(np.float64))
    host, t_host = timed(lambda: pairdot.pair_dots(xq, xb, qi, di), a.repeat)
    rows = []
    old, t_old = timed(lambda: einsum_scores(xq, xb, qi, di), a.repeat)
    rows.append(("einsum (before)", "cpu", t_old, old))
    rows.append(("pair_dots, numpy", "cpu", t_host, host))
    for dev in a.devices.split(","):
        import torch

        if dev == "cuda" and not torch.cuda.is_available():
            rows.append(("pair_dots, torch", dev, None, None))
            continue
        tb = torch.from_numpy(xb).to(dev)
        got, t = timed(lambda tb=tb: pairdot.pair_dots(xq, tb, qi, di), a.repeat)
        rows.append(("pair_dots, torch", dev, t, got))
    print(f"{len(qi):,} pairs ({a.queries:,} queries x {a.hits} hits, {a.nodes:,} nodes, 384-d)")
    print("| rescore | device | seconds | pairs/s | max abs error | bits of host pair_dots |")
    print("|---|---|---:|---:|---:|---|")
    for name, dev, t, out in rows:
        if out is None:
            print(f"| {name} | {dev} | - | - | - | no GPU |")
            continue
        same = int((out == host).sum())
        bits = "yes" if same == len(host) else f"{len(host) - same:,} pairs differ"
        err = float(np.abs(out - exact).max())
        print(f"| {name} | {dev} | {t:.3f} | {len(qi) / t:,.0f} | {err:.1e} | {bits} |")


if __name__ == "__main__":
    main()
