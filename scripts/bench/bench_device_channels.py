"""The device channels (issue 29) against the host baselines, in one process, one table.

    python scripts/bench/bench_device_channels.py [--nodes 20000] [--queries 200] [--devices cpu,cuda]

Dense: ``dense.index=torch`` (blocked matrix product + topk, ``channels.dense_torch``) vs FAISS's
flat scan (faiss-cpu), each followed by ``dense.exact_top`` (the channel's answer), on random unit
vectors (384-d). BM25: ``lexical.scorer=torch`` (``channels.bm25_device.topk``) vs the host's scipy
product + ``topk_sparse`` (the default CPU path, bm25s's lucene scores: tests/channels/test_lexical.py), on
synthetic Zipf term counts (30 tokens a document, 100k terms; queries of 4 mid-frequency terms).
Each row: wall and CPU seconds (``time.process_time``, all threads), queries/s, and whether the
answer equals the baseline's bit for bit. A device missing here (no GPU) is a row saying so.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from pipeline.channels import bm25_device, dense, lexical
from pipeline.core import backend
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
    ap.add_argument(
        "--cpu-queries",
        type=int,
        default=0,
        help="torch on cpu: only the first n queries (0 = all)",
    )
    a = ap.parse_args()
    import torch  # imported before the clocks start

    torch.zeros(1)
    rng = np.random.default_rng(0)
    devices = [d for d in a.devices.split(",") if d]
    gpu = backend.has_cuda()
    rows = []

    def row(ch, path, dev, nq, wall, cpu, ok):
        rows.append((ch, path, dev, nq, wall, cpu, nq / wall if wall else 0.0, ok))

    def nq_of(dev: str) -> int:
        return a.cpu_queries if dev == "cpu" and 0 < a.cpu_queries < a.queries else a.queries

    def head(res, n: int):
        """The rows of queries below ``n`` (each query's answer is its own: batch-independent)."""
        m = res[0] < n
        return tuple(x[m] for x in res)

    xb, xq = unit(rng, a.nodes, a.dim), unit(rng, a.queries, a.dim)
    kk = K + dense.RESCORE_EXTRA

    def flat():
        D, I = dense.search(dense.build_index(xb, "flat"), xq, kk)
        return dense.exact_top(xq, xb, D, I, K)

    base, w, c = timed(flat)
    row("dense", "faiss flat + exact_top", "cpu", a.queries, w, c, "baseline")
    for dev in devices:
        if dev == "cuda" and not gpu:
            rows.append(
                ("dense", "torch matmul+topk + exact_top", "cuda", 0, None, None, 0, "no GPU")
            )
            continue
        index, wb, cb = timed(lambda: dense.build_index(xb, "torch", device=dev))
        dense.search(index, xq[:8], kk)  # warm-up (CUDA context, kernels)
        n = nq_of(dev)

        def run(index=index, n=n):
            D, I = dense.search(index, xq[:n], kk)
            return dense.exact_top(xq[:n], xb, D, I, K)

        got, w, c = timed(run)
        ok = same(got, head(base, n))
        row("dense", f"torch matmul+topk + exact_top (upload {wb:.2f} s)", dev, n, w, c, ok)

    docs = zipf_counts(rng, a.nodes, 30)
    tokens = lexical.Tokens({"body": docs}, {})
    s, ws, cs = timed(lambda: lexical.bm25_matrix(tokens, {"body": 1.0}))
    q = zipf_counts(rng, a.queries, 4, STOP)
    base, w, c = timed(lambda: topk_sparse(lexical.score(q, s), K))
    row(
        "bm25", f"scipy q@s.T + topk_sparse (matrix {ws:.2f} s)", "cpu", a.queries, w, c, "baseline"
    )
    for dev in devices:
        if dev == "cuda" and not gpu:
            rows.append(("bm25", "torch sparse product + topk", "cuda", 0, None, None, 0, "no GPU"))
            continue
        bm25_device.topk(q[:8], s, K, dev)  # warm-up
        n = nq_of(dev)
        got, w, c = timed(lambda n=n: bm25_device.topk(q[:n], s, K, dev))
        row("bm25", "torch sparse product + topk", dev, n, w, c, same(got, head(base, n)))

    print(f"nodes {a.nodes}, queries {a.queries}, dim {a.dim}, k {K}; {backend.faiss_summary()}")
    print(
        f"{'channel':7s} {'path':52s} {'device':6s} {'queries':>7s} {'wall s':>8s} {'cpu s':>8s} "
        f"{'q/s':>10s}  same answer"
    )
    for ch, path, dev, nq, w, c, qps, ok in rows:
        nums = (
            f"{w:8.3f} {c:8.3f} {qps:10.0f}" if w is not None else f"{'-':>8s} {'-':>8s} {'-':>10s}"
        )
        print(f"{ch:7s} {path:52s} {dev:6s} {nq:7d} {nums}  {ok}")
    return 0 if all(r[-1] in ("baseline", True, "no GPU") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
