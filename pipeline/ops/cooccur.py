"""BME's co-occurrence index and boost (docs/presets.md, ``bme``: Co-occurrence boost) as sparse matrix products.

``index``: batches × nodes incidence ``M`` (one batch = up to ``max_per_batch`` eligible nodes
of one ``doc_id`` consecutive in ``seq`` order), counts ``C = MᵀM`` with a zero diagonal
(symmetric: +1 per pair per shared batch).
``neighbours``: each row of ``C`` cut to its first ``max_neighbors`` entries by count desc, node
index asc, as ``ln(1 + count)``.
``boost``: ``scale · A · N`` where ``A`` is the (queries × nodes) anchor-weight matrix, i.e. for
every anchor ``a`` and each of its kept neighbours ``j``: ``+= w_a · ln(1 + count_aj) · scale``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def index(
    batch_key: np.ndarray, order: np.ndarray, ok: np.ndarray, max_per_batch: int = 10
) -> sp.csr_matrix:
    """batch_key: (n,) int group (e.g. doc) per node, order: (n,) position key inside the group
    (e.g. seq), ok: (n,) eligible mask → (n, n) float64 CSR co-occurrence counts."""
    n = len(batch_key)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return sp.csr_matrix((n, n))
    idx = idx[np.lexsort((idx, order[idx], batch_key[idx]))]  # by group, then seq, then node index
    key = batch_key[idx]
    start = np.r_[True, key[1:] != key[:-1]]
    pos = np.arange(len(idx)) - np.maximum.accumulate(np.where(start, np.arange(len(idx)), 0))
    window = np.cumsum(start | (pos % max(1, max_per_batch) == 0)) - 1  # batch id of each node
    m = sp.csr_matrix((np.ones(len(idx)), (window, idx)), shape=(int(window[-1]) + 1, n))
    c = (m.T @ m).tocsr()
    c.setdiag(0)
    c.eliminate_zeros()
    return c


def neighbours(counts: sp.csr_matrix, max_neighbors: int = 10) -> sp.csr_matrix:
    """Keep each row's first ``max_neighbors`` by (count desc, column asc); values ln(1 + count)."""
    coo = counts.tocoo()
    o = np.lexsort((coo.col, -coo.data, coo.row))
    row, col, cnt = coo.row[o], coo.col[o], coo.data[o]
    first = np.searchsorted(row, row)  # index of each row's first entry (rows are sorted)
    keep = np.arange(len(row)) - first < max_neighbors
    return sp.csr_matrix((np.log1p(cnt[keep]), (row[keep], col[keep])), shape=counts.shape)


def boost(
    q: np.ndarray,
    a: np.ndarray,
    w: np.ndarray,
    nbr: sp.csr_matrix,
    n_queries: int,
    scale: float = 0.1,
) -> sp.coo_matrix:
    """Anchors (query q[i], node a[i], weight w[i]) → (n_queries, n) sparse bonus matrix."""
    anchors = sp.csr_matrix((np.maximum(w, 0.0), (q, a)), shape=(n_queries, nbr.shape[0]))
    return (anchors @ nbr * scale).tocoo()
