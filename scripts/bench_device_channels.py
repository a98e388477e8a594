"""The device channels (issue 29) against the host baselines, in one process, one table.

    python scripts/bench_device_channels.py [--nodes 20000] [--queries 200] [--devices cpu,cuda]

Dense: ``dense.index=torch`` (blocked matrix product + topk, ``channels.dense_torch``) vs FAISS's
flat scan (faiss-cpu), each followed by ``dense.exact_top`` (the channel's answer), on random unit
vectors (384-d). BM25: ``lexical.scorer=torch`` (``channels.bm25_device.topk``) vs the host's scipy
product + ``topk_sparse`` (the default CPU path, bm25s's lucene scores: tests/test_lexical.py), on
synthetic Zipf term counts (30 tokens a document, 100k terms; queries of 4 mid-frequency terms).
Each row: wall and CPU seconds (``time.process_time``, all threads), queries/s, and whether the
answer equals the baseline's bit for bit. A device missing here (no GPU) is a row saying so.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from pipeline import backend
from pipeline.channels import bm25_device, dense, lexical
from pipeline.ops.topk import topk_sparse

K = 100  # candidates per query (conf/dense/flat.yaml, conf/lexical/bm25.yaml)
VOCAB = 100_000  # synthetic terms
STOP = 200  # the most frequent ranks, left out of queries (stopwords)


def timed(fn):
    """(result, wall s, CPU s) of ``fn()``."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def unit(rng, n: int, d: int) -> np.ndarray:
    """``n`` random unit vectors, float32, made in chunks."""
    out = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        x = rng.standard_normal((min(100_000, n - s), d), dtype=np.float32)
        out[s : s + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def zipf_counts(rng, rows: int, per_row: int, lo_rank: int = 0) -> sp.csr_matrix:
    """(rows, VOCAB) term counts, ``per_row`` tokens a row drawn with p(rank r) ∝ 1/(r + 10)."""
    p = 1.0 / (np.arange(lo_rank, VOCAB) + 10.0)
    terms = lo_rank + rng.choice(VOCAB - lo_rank, size=rows * per_row, p=p / p.sum())
    row = np.repeat(np.arange(rows), per_row)
    m = sp.csr_matrix((np.ones(len(terms), np.float32), (row, terms)), shape=(rows, VOCAB))
    m.sum_duplicates()
    return m


def same(a, b) -> bool:
    """Bit-identical tuples of arrays."""
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def main() -> int:
    """Build the data, run each path, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--devices", default="cpu,cuda")
    a = ap.parse_args()
    import torch  # imported before the clocks start

    torch.zeros(1)
    rng = np.random.default_rng(0)
    devices = [d for d in a.devices.split(",") if d]
    gpu = backend.has_cuda()
    rows = []

    def row(ch, path, dev, res, wall, cpu, ok):
        rows.append((ch, path, dev, wall, cpu, a.queries / wall if wall else 0.0, ok))

    xb, xq = unit(rng, a.nodes, a.dim), unit(rng, a.queries, a.dim)
    kk = K + dense.RESCORE_EXTRA

    def flat():
        D, I = dense.search(dense.build_index(xb, "flat"), xq, kk)
        return dense.exact_top(xq, xb, D, I, K)

    base, w, c = timed(flat)
    row("dense", "faiss flat + exact_top", "cpu", base, w, c, "baseline")
    for dev in devices:
        if dev == "cuda" and not gpu:
            rows.append(
                ("dense", "torch matmul+topk + exact_top", "cuda", None, None, None, "no GPU")
            )
            continue
        index, wb, cb = timed(lambda: dense.build_index(xb, "torch", device=dev))
        dense.search(index, xq[:8], kk)  # warm-up (CUDA context, kernels)

        def run(index=index):
            D, I = dense.search(index, xq, kk)
            return dense.exact_top(xq, xb, D, I, K)

        got, w, c = timed(run)
        row(
            "dense",
            f"torch matmul+topk + exact_top (upload {wb:.2f} s)",
            dev,
            got,
            w,
            c,
            same(got, base),
        )

    docs = zipf_counts(rng, a.nodes, 30)
    tokens = lexical.Tokens({"body": docs}, {})
    s, ws, cs = timed(lambda: lexical.bm25_matrix(tokens, {"body": 1.0}))
    q = zipf_counts(rng, a.queries, 4, STOP)
    base, w, c = timed(lambda: topk_sparse(lexical.score(q, s), K))
    row("bm25", f"scipy q@s.T + topk_sparse (matrix {ws:.2f} s)", "cpu", base, w, c, "baseline")
    for dev in devices:
        if dev == "cuda" and not gpu:
            rows.append(("bm25", "torch sparse product + topk", "cuda", None, None, None, "no GPU"))
            continue
        bm25_device.topk(q[:8], s, K, dev)  # warm-up
        got, w, c = timed(lambda: bm25_device.topk(q, s, K, dev))
        row("bm25", "torch sparse product + topk", dev, got, w, c, same(got, base))

    print(f"nodes {a.nodes}, queries {a.queries}, dim {a.dim}, k {K}; {backend.faiss_summary()}")
    print(
        f"{'channel':7s} {'path':52s} {'device':6s} {'wall s':>8s} {'cpu s':>8s} {'q/s':>10s}  same answer"
    )
    for ch, path, dev, w, c, qps, ok in rows:
        nums = (
            f"{w:8.3f} {c:8.3f} {qps:10.0f}" if w is not None else f"{'-':>8s} {'-':>8s} {'-':>10s}"
        )
        print(f"{ch:7s} {path:52s} {dev:6s} {nums}  {ok}")
    return 0 if all(r[-1] in ("baseline", True, "no GPU") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
