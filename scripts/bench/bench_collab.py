"""Benchmark: ItemCF and Swing (pipeline.ops.collab, sparse products over all teams at once)
against a plain Python loop (dicts of sets, the usual per-basket / per-pair loops).

    python scripts/bench/bench_collab.py --rows 100000 1000000 --loop-max 100000

Synthetic log: 1 000 rows per team, 60 pages and 50 sessions per team (basket = session), pages
drawn from 6 planted clusters. Prints, per size, each side's median wall seconds and median CPU
seconds (``time.process_time``) over --repeat runs (the batched side's first, cold run is printed
too), the batched/loop ratios of both (loop only up to --loop-max rows) and the max
|batched − loop| difference. On a shared machine the CPU ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline

from pipeline.ops import collab  # noqa: E402


def make_log(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(team, basket, item) rows: sessions work one planted cluster of 10 pages, mostly."""
    g = np.random.default_rng(seed)
    team = np.arange(rows) // 1000
    basket = g.integers(0, 50, rows)
    cluster = basket % 6
    item = np.where(
        g.random(rows) < 0.8, cluster * 10 + g.integers(0, 10, rows), g.integers(0, 60, rows)
    )
    return team, basket, item


def loop_both(team, basket, item, alpha=1.0):
    """ItemCF and Swing by plain loops: dicts of sets, pairs enumerated in Python."""
    items = defaultdict(set)
    for t, b, i in zip(team.tolist(), basket.tolist(), item.tolist(), strict=True):
        items[t, b].add(i)
    users = defaultdict(set)
    for (t, b), its in items.items():
        for i in its:
            users[t, i].add(b)
    co = defaultdict(float)
    for (t, _b), its in items.items():
        for i, j in itertools.permutations(its, 2):
            co[t, i, j] += 1.0
    icf = {k: v / math.sqrt(len(users[k[0], k[1]]) * len(users[k[0], k[2]])) for k, v in co.items()}
    sw = defaultdict(float)
    by_team = defaultdict(list)
    for t, b in items:
        by_team[t].append(b)
    for t, bs in by_team.items():
        for u, v in itertools.combinations(sorted(bs), 2):
            both = items[t, u] & items[t, v]
            if len(both) < 2:
                continue
            k = 1.0 / (alpha + len(both))
            for i, j in itertools.permutations(both, 2):
                sw[t, i, j] += k
    return icf, dict(sw)


def batched_both(team, basket, item, alpha=1.0):
    """ItemCF and Swing matrices plus the item code → (team, item) labels."""
    b, nb = collab.codes(team, basket)
    i, ni = collab.codes(team, item)
    r = collab.incidence(b, i, (nb, ni))
    return collab.itemcf(r), collab.swing(r, alpha=alpha), (team, item, i)


def _max_diff(m, ref, labels) -> float:
    team, item, code = labels
    lab = np.empty((code.max() + 1, 2), dtype=np.int64)
    lab[code] = np.stack([team, item], axis=1)
    c = m.tocoo()
    got = {
        (int(lab[a, 0]), int(lab[a, 1]), int(lab[b, 1])): v
        for a, b, v in zip(c.row, c.col, c.data, strict=True)
    }
    keys = set(got) | set(ref)
    return max(abs(got.get(k, 0.0) - ref.get(k, 0.0)) for k in keys)


def _timed(fn, log, repeat: int):
    """(result of the last run, [(wall s, CPU s)] of each of ``repeat`` runs of ``fn(*log)``)."""
    times = []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn(*log)
        times.append((time.perf_counter() - w0, time.process_time() - c0))
    return out, times


def _median(times, k: int) -> float:
    return float(np.median([t[k] for t in times]))


def main() -> None:
    """Time both sides at each size and print one line per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--loop-max", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each side (medians)")
    args = ap.parse_args()
    for rows in args.rows:
        log = make_log(rows)
        (icf, sw, labels), tb = _timed(batched_both, log, args.repeat)
        wb, cb = _median(tb, 0), _median(tb, 1)
        line = (
            f"rows={rows:>9,}  batched {wb:7.3f} s wall {cb:7.3f} s CPU (first {tb[0][0]:.3f} s)"
            f"  itemcf nnz {icf.nnz:,}  swing nnz {sw.nnz:,}"
        )
        if rows <= args.loop_max:
            (ricf, rsw), tl = _timed(loop_both, log, args.repeat)
            wl, cl = _median(tl, 0), _median(tl, 1)
            diff = max(_max_diff(icf, ricf, labels), _max_diff(sw, rsw, labels))
            line += (
                f"  loop {wl:6.2f} s wall {cl:6.2f} s CPU  ratio {wl / wb:5.1f}x wall"
                f" {cl / cb:5.1f}x CPU  max|diff| {diff:.1e}"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
