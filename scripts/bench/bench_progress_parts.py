"""The cost of the push solve's progress parts (issue 29): one scope's forward-push PPR cut into at
least 20 parts (``progress.INNER_MIN`` queries and more) against one part per thread, on a random
graph, with the log lines it prints and a check that both give the same bits.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_progress_parts.py [--nodes 50000] [--queries 4000]
        [--workers 2]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np
import scipy.sparse as sp

from pipeline.core import progress
from pipeline.ops.ppr_push import ppr_push_top


def main() -> None:
    """Time both splits and print wall and CPU seconds and whether the bits agree."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=4000)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s", force=True)
    rng = np.random.default_rng(1)
    n, m, b = a.nodes, 5 * a.nodes, a.queries
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    adj = sp.csr_matrix((rng.random(m) + 0.1, (src, dst)), shape=(n, n))
    adj = (adj + adj.T).tocsr()
    seeds = (np.ones(b, np.float32), (rng.integers(0, n, b), np.arange(b)))
    pers = sp.csr_matrix(seeds, shape=(n, b))
    out, old = {}, progress.INNER_MIN
    for label, least in (("parts for progress", min(old, b)), ("one part per thread", b + 1)):
        progress.INNER_MIN = least
        wall, cpu = time.perf_counter(), time.process_time()
        out[label] = ppr_push_top(adj, pers, n, 50, workers=a.workers, eps=1e-4)
        print(
            f"{label}: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU"
        )
    progress.INNER_MIN = old
    one, two = out.values()
    print("same bits:", all(np.array_equal(x, y) for x, y in zip(one[:3], two[:3])))


if __name__ == "__main__":
    main()
