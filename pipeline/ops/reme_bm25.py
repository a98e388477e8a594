"""ReMe's own BM25 arithmetic and top-k (``lexical.order=reme``, preset reme), so its scores and the
order of its ties are ReMe's bits: agentscope-ai/ReMe @ c8e12487
``reme/components/keyword_index/bm25_index.py``.

- Documents are the chunks with at least one term, in store order (``_rebuild_keyword_index``
  adds the chunk store's texts in order; a chunk without a term gets no slot, so it counts in
  neither N nor the average length).
- ``_score_query``: float32 scores, one pass per query term in the query's order (each term once,
  ``_encode_query``), ``idf·tf·(k1+1) / (tf + k1·(1−b) + k1·b/avgdl·|d|)`` with the Python-float
  constants entering float32 arithmetic (NumPy's scalar promotion keeps float32).
- ``_top_k``: the positive scores' ``np.argpartition`` then ``np.argsort`` (NumPy's default,
  unstable sort), whose order of equal scores is what ReMe returns.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp


def scores(
    tf: sp.csc_matrix, lens: np.ndarray, terms: list[int], k1: float, b: float
) -> np.ndarray:
    """ReMe's float32 BM25 score of every slot (rows of ``tf``, term counts, in ReMe's slot
    order; ``lens`` their token counts, 0 for a deleted slot, which scores 0) for one query's
    distinct term ids in query order (``BM25Index._score_query``)."""
    out = np.zeros(len(lens), dtype=np.float32)
    n_docs = int((lens > 0).sum())  # live slots (a deleted one has no length here)
    if not n_docs:
        return out
    avg_len = int(lens.sum()) / n_docs  # Python float, as ReMe's total_len / n_docs
    denom_base = k1 * (1.0 - b)
    denom_norm = k1 * b / avg_len if avg_len > 0 else 0.0
    for t in terms:
        lo, hi = tf.indptr[t], tf.indptr[t + 1]
        if lo == hi:
            continue
        docs = tf.indices[lo:hi]
        df = hi - lo
        idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        if idf == 0.0:
            continue
        tfs = tf.data[lo:hi].astype(np.float32)
        d_lens = lens[docs].astype(np.float32)
        out[docs] += idf * tfs * (k1 + 1.0) / (tfs + denom_base + denom_norm * d_lens)
    return out


def top_k(s: np.ndarray, limit: int) -> np.ndarray:
    """The positions of the ``limit`` best positive scores, best first (``BM25Index._top_k``)."""
    positive = int((s > 0).sum())
    if limit <= 0 or positive == 0:
        return np.empty(0, dtype=np.int64)
    k = min(limit, positive)
    if k >= s.size:
        return np.argsort(-s)[:k]
    top = np.argpartition(-s, k - 1)[:k]
    return top[np.argsort(-s[top])]


def slots(
    tf: sp.csr_matrix, order: np.ndarray, slot: np.ndarray | None = None, n_slots: int = 0
) -> tuple[sp.csc_matrix, np.ndarray, np.ndarray]:
    """(term counts by term, token counts, row of each slot or -1) of ReMe's keyword index over
    the rows of ``tf`` (documents × terms). Rebuilt (``slot`` None): a slot per row with a term,
    in ``order`` (the store order). Persisted: row ``i`` at slot ``slot[i]`` (-1: none) of
    ``n_slots``, the others deleted slots (no row, length 0)."""
    lens = np.asarray(tf.sum(axis=1)).ravel().astype(np.int64)
    if slot is None:
        rows = np.lexsort((np.arange(len(order)), order))
        rows = rows[lens[rows] > 0]
    else:
        rows = np.full(n_slots, -1, np.int64)
        have = slot >= 0
        rows[slot[have]] = np.flatnonzero(have)
    live = rows >= 0
    pick = sp.csr_matrix(
        (np.ones(int(live.sum()), np.float32), (np.flatnonzero(live), rows[live])),
        shape=(len(rows), tf.shape[0]),
    )
    sub = (pick @ tf).tocsc()
    sub.sort_indices()  # each term's slots ascending, as ReMe's posting lists
    return sub, np.where(live, lens[np.maximum(rows, 0)], 0), rows
