"""A synthetic memory corpus: clustered 384-d embeddings, a power-law graph, timestamps and types.

``make(n, n_queries, seed)`` returns (Dataset, node embeddings (n, d), query embeddings (q, d));
texts are short word lists drawn per cluster so BM25 has something to match. With ``names`` > 0,
each cluster also owns that many capitalised made-up names: a unit's text carries two of its
cluster's names and a query's one, so the entity hub layer (``graph.hubs.entities``) and the
query-entity seeds have something to link. With ``dup_share`` > 0, that share of the notes are
exact copies of other notes (the same text, vector and cluster under their own id, date and
links), as memory stores keep the same note twice; their own random stream, so the rest is what
``make`` gives without it. Deterministic per seed.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.contract.dataset import Dataset

CHUNK = 65_536  # rows of noise drawn at a time (1M nodes: 200 MB of float64 instead of 3 GB)
TYPES = ["fact", "event", "preference", "procedure", "lesson", "person"]


def make(
    n: int,
    n_queries: int = 1000,
    *,
    d: int = 384,
    clusters: int = 200,
    avg_degree: int = 8,
    seed: int = 13,
    names: int = 0,
    dup_share: float = 0.0,
) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """A synthetic Dataset of ``n`` nodes and ``n_queries`` queries with their embeddings
    (deterministic per seed); ``dup_share``: the share of notes copying another (module doc)."""
    rng = np.random.default_rng(seed)
    cl, xb = _node_vectors(rng, n, d, clusters)
    words = np.array([f"w{i}" for i in range(5000)])
    vocab = rng.integers(0, len(words), size=(clusters, 30))
    picks = vocab[cl[:, None], rng.integers(0, 30, size=(n, 8))]
    texts = [" ".join(row) for row in words[picks]]
    named = _names(clusters, names, seed) if names else None
    if named is not None:  # its own random stream: the texts without names stay as they were
        pick = np.random.default_rng([seed, 1]).integers(0, names, size=(n, 2))
        texts = [f"{named[c, a]} {t} {named[c, b]}" for t, c, (a, b) in zip(texts, cl, pick)]
    texts = _duplicate(texts, cl, xb, dup_share, seed)
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
    qtext = [" ".join(words[vocab[cl[i], rng.integers(0, 30, 4)]]) for i in qc]
    if named is not None:
        pick = np.random.default_rng([seed, 2]).integers(0, names, n_queries)
        qtext = [f"{t} {named[cl[i], a]}" for t, i, a in zip(qtext, qc, pick)]
    queries = pl.DataFrame(
        {"query_id": np.char.add("q", np.arange(n_queries).astype(str)), "text": qtext}
    )
    return Dataset(f"synthetic-{n}", nodes, queries, edges), xb, xq


def _node_vectors(rng, n: int, d: int, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """(cluster of each node, its unit vector): the cluster's centre plus noise, drawn from ``rng``."""
    centers = rng.normal(size=(clusters, d)).astype(np.float32)
    cl = rng.integers(0, clusters, n)
    xb = centers[cl]
    for s in range(0, n, CHUNK):  # the same draws in row chunks: no (n, d) float64 block
        xb[s : s + CHUNK] += 0.6 * rng.normal(size=(min(CHUNK, n - s), d)).astype(np.float32)
    xb /= np.linalg.norm(xb, axis=1, keepdims=True)
    return cl, xb


def _duplicate(texts: list[str], cl: np.ndarray, xb: np.ndarray, share: float, seed: int):
    """Texts with ``round(share · n)`` random notes made copies of other (never copied) notes:
    their text, and in place their vector and cluster; drawn from their own stream (none: as given)."""
    n = len(texts)
    if share <= 0:
        return texts
    rng = np.random.default_rng([seed, 4])
    order = rng.permutation(n)
    m = min(int(round(share * n)), n - 1)
    copies, sources = order[:m], order[m:]
    src = sources[rng.integers(0, len(sources), m)]
    xb[copies], cl[copies] = xb[src], cl[src]
    out = np.array(texts, dtype=object)
    out[copies] = out[src]
    return out.tolist()


def _names(clusters: int, per_cluster: int, seed: int) -> np.ndarray:
    """(clusters, per_cluster) distinct capitalised made-up words ("Kobavu"): syllables drawn at
    random, a serial number's syllables appended so that no two names meet."""
    syl = np.array([c + v for c in "bdfgklmnprstvz" for v in "aeiou"])
    rng = np.random.default_rng([seed, 3])
    total = clusters * per_cluster
    head = syl[rng.integers(0, syl.size, size=(total, 2))]
    out = []
    for k in range(total):
        tail, j = "", k
        while True:
            tail, j = tail + syl[j % syl.size], j // syl.size
            if not j:
                break
        out.append(("".join(head[k]) + tail).capitalize())
    return np.array(out).reshape(clusters, per_cluster)
