"""Per-query top-k over long-format (query, item, score) triples, ties broken by item index."""
from __future__ import annotations

import numpy as np


def topk_long(qi: np.ndarray, di: np.ndarray, score: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Keep each query's ``k`` best items. Returns (qi, di, score, rank) sorted by query then rank.

    Ties are broken by ascending item index; ranks are 1-based.
    """
    order = np.lexsort((di, -score, qi))
    qi, di, score = qi[order], di[order], score[order]
    starts = np.r_[0, np.flatnonzero(np.diff(qi)) + 1] if len(qi) else np.zeros(0, np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, len(qi)]))
    rank = np.arange(len(qi)) - first + 1
    keep = rank <= k
    return qi[keep], di[keep], score[keep], rank[keep].astype(np.int32)


def topk_sparse(r, k: int, positive_only: bool = True) -> tuple[np.ndarray, ...]:
    """Top-k per row of a sparse (nq, n) score matrix (scipy or cupyx) → long triples on the host."""
    coo = r.tocoo()
    row, col, data = (np.asarray(getattr(a, "get", lambda: a)()) for a in (coo.row, coo.col, coo.data))
    if positive_only:
        m = data > 0
        row, col, data = row[m], col[m], data[m]
    return topk_long(row.astype(np.int64), col.astype(np.int64), data.astype(np.float32), k)


def topk_dense(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Re-rank (nq, c) search results (ids −1 = padding) with the tie rule → long triples."""
    nq, c = ids.shape
    qi = np.repeat(np.arange(nq, dtype=np.int64), c)
    di, sc = ids.reshape(-1).astype(np.int64), scores.reshape(-1).astype(np.float32)
    m = di >= 0
    return topk_long(qi[m], di[m], sc[m], k)
