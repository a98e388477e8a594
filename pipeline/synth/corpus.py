"""A synthetic memory corpus: clustered 384-d embeddings, a power-law graph, timestamps and types.

``make(n, n_queries, seed)`` returns (Dataset, node embeddings (n, d), query embeddings (q, d));
texts are short word lists drawn per cluster so BM25 has something to match. Deterministic per seed.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.dataset import Dataset

TYPES = ["fact", "event", "preference", "procedure", "lesson", "person"]


def make(
    n: int,
    n_queries: int = 1000,
    *,
    d: int = 384,
    clusters: int = 200,
    avg_degree: int = 8,
    seed: int = 13,
) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """A synthetic Dataset of ``n`` nodes and ``n_queries`` queries with their embeddings (deterministic per seed)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, d)).astype(np.float32)
    cl = rng.integers(0, clusters, n)
    xb = centers[cl] + 0.6 * rng.normal(size=(n, d)).astype(np.float32)
    xb /= np.linalg.norm(xb, axis=1, keepdims=True)
    words = np.array([f"w{i}" for i in range(5000)])
    vocab = rng.integers(0, len(words), size=(clusters, 30))
    picks = vocab[cl[:, None], rng.integers(0, 30, size=(n, 8))]
    texts = [" ".join(row) for row in words[picks]]
    m = n * avg_degree // 2
    src = rng.integers(0, n, m)
    dst = (rng.pareto(1.2, m) * n / 50).astype(np.int64) % n  # heavy-tailed in-degree
    keep = src != dst
    t0 = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    ids = np.char.add("n", np.arange(n).astype(str))
    nodes = pl.DataFrame(
        {
            "node_id": ids,
            "text": texts,
            "doc_id": np.char.add("d", (np.arange(n) // 20).astype(str)),
            "type": np.array(TYPES)[rng.integers(0, len(TYPES), n)],
            "seq": np.arange(n) % 20,
            "importance": rng.uniform(0, 10, n).astype(np.float32),
            "created_at": [t0 + dt.timedelta(minutes=int(x)) for x in rng.integers(0, 600_000, n)],
        }
    )
    edges = pl.DataFrame(
        {
            "src": ids[src[keep]],
            "dst": ids[dst[keep]],
            "relation": "related",
            "weight": rng.uniform(0.1, 1.0, int(keep.sum())).astype(np.float32),
        }
    )
    qc = rng.integers(0, n, n_queries)
    xq = xb[qc] + 0.3 * rng.normal(size=(n_queries, d)).astype(np.float32)
    xq /= np.linalg.norm(xq, axis=1, keepdims=True)
    queries = pl.DataFrame(
        {
            "query_id": np.char.add("q", np.arange(n_queries).astype(str)),
            "text": [" ".join(words[vocab[cl[i], rng.integers(0, 30, 4)]]) for i in qc],
        }
    )
    return Dataset(f"synthetic-{n}", nodes, queries, edges), xb, xq
