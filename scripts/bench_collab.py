"""Benchmark: ItemCF and Swing (pipeline.ops.collab, sparse products over all teams at once)
against a plain Python loop (dicts of sets, the usual per-basket / per-pair loops).

    python scripts/bench_collab.py --rows 100000 1000000 --loop-max 100000

Synthetic log: 1 000 rows per team, 60 pages and 50 sessions per team (basket = session), pages
drawn from 6 planted clusters. Prints, per size, the seconds of each side, the batched/loop ratio
(loop only up to --loop-max rows) and the max |batched − loop| difference.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections import defaultdict

import numpy as np

from pipeline.ops import collab


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


def main() -> None:
    """Time both sides at each size and print one line per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--loop-max", type=int, default=100_000)
    args = ap.parse_args()
    for rows in args.rows:
        log = make_log(rows)
        t0 = time.perf_counter()
        icf, sw, labels = batched_both(*log)
        tb = time.perf_counter() - t0
        line = (
            f"rows={rows:>9,}  batched {tb:8.2f} s (itemcf nnz {icf.nnz:,}, swing nnz {sw.nnz:,})"
        )
        if rows <= args.loop_max:
            t0 = time.perf_counter()
            ricf, rsw = loop_both(*log)
            tl = time.perf_counter() - t0
            diff = max(_max_diff(icf, ricf, labels), _max_diff(sw, rsw, labels))
            line += f"  loop {tl:8.2f} s  ratio {tl / tb:6.1f}x  max|diff| {diff:.1e}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
