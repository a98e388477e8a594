"""Benchmark: weighted-sum fusion (``ops.fusion.wsum``, ``max`` and ``minmax`` norms) with the
per-query extremes of ``backend.scatter_extreme`` against the plain ``numpy.maximum.at`` /
``minimum.at`` of the code before it, in one process, same bits checked. ``--keys`` forces the
float64-as-uint64-keys path that CuPy takes (its float64 ``scatter_max`` rounds through float32)
on the host too, to show what that path costs.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_fusion.py [--queries 10000] [--rows 200]
        [--repeat 5] [--keys]

Rows: ``--queries`` queries of ``--rows`` candidate rows each (the fuse stage's shape at k=100 with
two channels), random values with 10 % nulls (NaN) per channel, queries in shuffled row order.
The last line gives the ratio new ÷ old of the median seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline

from pipeline.core import backend  # noqa: E402
from pipeline.ops import fusion  # noqa: E402


def plain(out, index, values, how: str) -> None:
    """The host path before the uint64 keys: ``numpy.maximum.at`` / ``minimum.at``."""
    (np.maximum if how == "max" else np.minimum).at(out, index, values)


def channels(rng, n_rows: int) -> dict:
    """Two channels of float64 values with 10 % nulls and 1-based ranks."""
    out = {}
    for name in ("dense", "lexical"):
        value = rng.standard_normal(n_rows)
        has = rng.random(n_rows) > 0.1
        value = np.where(has, value, 0.0)
        rank = np.where(has, rng.integers(1, 101, n_rows).astype(np.float64), 0.0)
        out[name] = fusion.Channel(value, has, rank, has)
    return out


def timed(fn, repeat: int) -> tuple[float, np.ndarray]:
    """Median seconds of ``repeat`` calls and the last result."""
    times, got = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10000)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keys", action="store_true", help="the uint64-keys path on the host too")
    a = ap.parse_args()
    if a.keys:
        backend.rounds_float64_scatter = lambda out: True
    rng = np.random.default_rng(0)
    n_rows = a.queries * a.rows
    query = rng.permutation(np.repeat(np.arange(a.queries), a.rows))
    chans = channels(rng, n_rows)
    weights = {"dense": 0.7, "lexical": 0.3}
    print(f"wsum fusion, {a.queries:,} queries x {a.rows} rows = {n_rows:,} rows, 2 channels")
    print(f"{'norm':<8} {'path':<32} {'median s':>9} {'rows/s':>12} {'same bits':>9}")
    ratios = []
    new_label = "scatter_extreme " + ("(uint64 keys)" if a.keys else "(host path)")
    for norm in ("max", "minmax"):
        norms = dict.fromkeys(chans, norm)
        run = lambda: fusion.wsum(query, chans, weights, norms, a.queries)  # noqa: E731
        run()  # warm: imports, first-touch allocations
        new_s, new = timed(run, a.repeat)
        kept = backend.scatter_extreme
        fusion.scatter_extreme = plain
        try:
            old_s, old = timed(run, a.repeat)
        finally:
            fusion.scatter_extreme = kept
        same = new.tobytes() == old.tobytes()
        for label, s in (("numpy .at (replaced)", old_s), (new_label, new_s)):
            print(f"{norm:<8} {label:<32} {s:>9.3f} {n_rows / s:>12,.0f} {str(same):>9}")
        ratios.append(new_s / old_s)
        if not same:
            sys.exit(f"{norm}: the two paths give other bits")
    print(f"ratio new / old: max norm {ratios[0]:.2f}x, minmax norm {ratios[1]:.2f}x")


if __name__ == "__main__":
    main()
