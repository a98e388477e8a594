"""Blocked dense scan over a memmapped .npy vs FAISS flat on the same embeddings.

    .venv/bin/python scripts/bench/bench_blocked.py [--nodes 200000] [--queries 1000] [--block 65536]

Prints seconds, queries/s and the agreement of the top-10 ids (ties aside, expect ~1.0).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from pipeline.channels import blocked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--block", type=int, default=65536)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "xb.npy"
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(a.nodes, 384))
        for s in range(0, a.nodes, 50_000):  # written in chunks: never the whole array in memory
            x = rng.normal(size=(min(50_000, a.nodes - s), 384)).astype(np.float32)
            mm[s : s + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
        mm.flush()
        del mm
        xq = rng.normal(size=(a.queries, 384)).astype(np.float32)
        xq /= np.linalg.norm(xq, axis=1, keepdims=True)
        xb = np.load(path, mmap_mode="r")
        t = time.perf_counter()
        D, I = blocked.search(xb, xq, 10, a.block)
        tb = time.perf_counter() - t
        rss_b = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t = time.perf_counter()
        index = faiss.IndexFlatIP(384)
        index.add(np.ascontiguousarray(xb))
        Df, If = index.search(xq, 10)
        tf = time.perf_counter() - t
        rss_f = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("| scan | nodes | seconds | queries/s | peak RSS MiB after |\n|---|---|---|---|---|")
    print(
        f"| blocked (memmap, block {a.block}) | {a.nodes:,} | {tb:.2f} | {a.queries / tb:,.0f} | {rss_b:,.0f} |"
    )
    print(
        f"| FAISS IndexFlatIP (in memory) | {a.nodes:,} | {tf:.2f} | {a.queries / tf:,.0f} | {rss_f:,.0f} |"
    )
    print(f"top-10 id agreement: {(I == If).mean():.4f}; max |ΔD|: {np.abs(D - Df).max():.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
