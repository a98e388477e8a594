"""Co-use statistics from an injection log, as sparse products for all teams at once.

OKS designs a ``collab`` backend (item co-occurrence / Swing from the injection log) and ItemCF /
UserCF boosts in the injection layer (spec ``reference-algorithms.md`` §3.e; the OKS repository
at open-agent-power/open-knowledge-studio@6a281b47 names them but writes no formula or constant:
``git grep -i -E "swing|itemcf|usercf"`` finds nothing in any commit). The formulas here are the
standard ones, with their constants as parameters:

- ItemCF (cosine-normalised co-count): ``sim(i, j) = |U_i ∩ U_j| / sqrt(|U_i| · |U_j|)``, U_i the
  baskets (agents, sessions or injections) that hold item i; the diagonal is 0.
- Swing (Yang et al. 2020, Alibaba): ``swing(i, j) = Σ_{u<v; u, v ∈ U_i ∩ U_j} w_u·w_v /
  (alpha + |I_u ∩ I_v|)``, I_u the items of basket u, ``alpha`` 1.0, ``w_u = 1`` or, with
  ``user_weight=True``, ``1/sqrt(|I_u|)``; the diagonal is 0.
- UserCF: the same cosine over baskets (agents): ``sim(a, b) = |I_a ∩ I_b| / sqrt(|I_a|·|I_b|)``.

Sealed by construction: a basket and an item are each a (team, key) pair, so every product is
block-diagonal over teams and no team's rows reach another team's entries. Incidence is binary
(a basket that injected an item twice counts once).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.ops.topk import int_order

_INT64_MAX = np.iinfo(np.int64).max  # python int: combining columns must not overflow


def codes(*keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense 0-based codes of the rows' key tuples (sorted key order) and how many there are.

    An integer column enters as its offset from its minimum (no sort), any other column as its
    ``np.unique`` rank; the columns combine as one int64 (lexicographic order), factorised once.
    Where the combined range would overflow int64, the columns so far are factorised first (the
    codes are the same ranks either way)."""
    n = len(keys[0])
    combined, span = np.zeros(n, dtype=np.int64), 1
    for key in keys:
        k = np.asarray(key).ravel()
        width = int(k.max()) - int(k.min()) + 1 if k.dtype.kind in "iu" and n else 0
        if 0 < width <= _INT64_MAX:
            col = (k - k.min()).astype(np.int64)
        else:
            uniq, col = np.unique(k, return_inverse=True)
            width, col = max(len(uniq), 1), col.ravel().astype(np.int64)
        if span * width > _INT64_MAX:
            uniq, combined = np.unique(combined, return_inverse=True)
            span = len(uniq)
            if span * width > _INT64_MAX:
                uniq, col = np.unique(col, return_inverse=True)
                width = len(uniq)
        combined = combined * width + col
        span *= width
    return _dense_ranks(combined)


def _dense_ranks(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values of ``x`` (int64, ≥ 0) and how many there are,
    from its stable order (:func:`ops.topk.int_order`)."""
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = int_order(x)
    key = x[order]
    rank = np.zeros(n, dtype=np.int64)
    np.cumsum(key[1:] != key[:-1], out=rank[1:])
    inv = np.empty(n, dtype=np.int64)
    inv[order] = rank
    return inv, int(rank[-1]) + 1


def _csr(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, shape) -> sp.csr_matrix:
    """The CSR matrix of entries already grouped by row (``rows`` non-decreasing), no COO pass."""
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_matrix((data, cols, indptr), shape=shape)


def incidence(basket: np.ndarray, item: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The binary (baskets × items) matrix of the (basket, item) rows (duplicates count once)."""
    nb, ni = shape
    b = np.asarray(basket, dtype=np.int64).ravel()
    i = np.asarray(item, dtype=np.int64).ravel()
    if len(b) != len(i):
        raise ValueError(f"incidence: {len(b)} basket codes but {len(i)} item codes")
    if len(b) and (b.min() < 0 or b.max() >= nb or i.min() < 0 or i.max() >= ni):
        raise ValueError(f"incidence: a basket or item code lies outside the shape {shape}")
    key = np.sort(b * ni + i)
    first = np.ones(len(key), dtype=bool)
    np.not_equal(key[1:], key[:-1], out=first[1:])
    key = key[first]
    rows = key // ni
    return _csr(rows, key - rows * ni, np.ones(len(key)), shape)


def _off_diagonal(c: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, data) of the entries of ``c`` off its diagonal, in CSR order."""
    rows = np.repeat(np.arange(c.shape[0], dtype=c.indices.dtype), np.diff(c.indptr))
    keep = rows != c.indices
    return rows[keep], c.indices[keep], c.data[keep]


def _sorted_symmetric(c: sp.csr_matrix) -> sp.csr_matrix:
    """A symmetric product with each row's columns ascending: its transpose (a stable counting sort
    by column, cheaper than sorting each row), so the similarities are canonical CSR and any
    product with them sums in one order."""
    return c.T.tocsr()


def _cosine(r: sp.csr_matrix) -> sp.csr_matrix:
    """Columns' cosine of a binary matrix ``r`` with a zero diagonal: ``(rᵀr)_ij / sqrt(n_i n_j)``."""
    rt = r.T.tocsr()
    inv = 1.0 / np.sqrt(np.maximum(np.asarray(r.sum(axis=0)).ravel(), 1.0))
    rows, cols, co = _off_diagonal(_sorted_symmetric(rt @ r))
    return _csr(rows, cols, co * inv[rows] * inv[cols], (r.shape[1], r.shape[1]))


def itemcf(r: sp.csr_matrix) -> sp.csr_matrix:
    """ItemCF (items × items): co-count of items i, j over baskets / sqrt(|U_i|·|U_j|)."""
    return _cosine(r.tocsr())


def usercf(r: sp.csr_matrix) -> sp.csr_matrix:
    """UserCF (baskets × baskets): co-count of baskets a, b over items / sqrt(|I_a|·|I_b|)."""
    return _cosine(r.T.tocsr())


def _pairs_within_rows(m: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pairs per row, a, b): the column indices of every pair of entries a < b of each row of
    ``m``, row by row, ``(a, b)`` ascending within a row."""
    n = np.diff(m.indptr)
    later = np.repeat(m.indptr[1:] - 1, n) - np.arange(m.nnz)  # entries after each in its row
    start = np.cumsum(later) - later
    a = np.repeat(m.indices, later)
    b = m.indices[np.arange(len(a)) + np.repeat(np.arange(m.nnz) + 1 - start, later)]
    return n * (n - 1) // 2, a, b


def swing(r: sp.csr_matrix, alpha: float = 1.0, user_weight: bool = False) -> sp.csr_matrix:
    """Swing (items × items) of the binary (baskets × items) matrix ``r`` (module docstring).

    Each item's basket pairs u < v are listed (vectorised, from ``rᵀ``); two stable counting sorts
    (scipy's CSR transposes) group them by pair, items ascending, which gives the pairs' overlaps
    ``|I_u ∩ I_v|`` and ``P[(u, v), i] = r_ui · r_vi`` directly. Pairs that share one item only add to
    the diagonal, so ``P`` keeps the pairs sharing two or more; ``swing = Pᵀ diag(k) P`` with
    ``k = w_u w_v / (alpha + overlap)``: one sparse product, no Python loop over pairs."""
    r = r.tocsr()
    nb, ni = r.shape
    rt = r.T.tocsr()  # items × baskets, each item's baskets ascending
    per_item, u, v = _pairs_within_rows(rt)
    ptr = np.zeros(ni + 1, dtype=np.int64)
    np.cumsum(per_item, out=ptr[1:])
    by_v = sp.csr_matrix((u, v, ptr), shape=(ni, nb)).T.tocsr()  # rows v: (item, u), item-ordered
    by_u = sp.csr_matrix((by_v.indices, by_v.data, by_v.indptr), shape=(nb, nb)).T.tocsr()
    vv, item = by_u.indices, by_u.data  # rows u, then v ascending, then item ascending
    new = np.ones(len(vv), dtype=bool)
    np.not_equal(vv[1:], vv[:-1], out=new[1:])
    new[by_u.indptr[:-1][np.diff(by_u.indptr) > 0]] = True
    start = np.flatnonzero(new)
    overlap = np.diff(np.append(start, len(vv)))
    big = overlap >= 2
    pu = np.searchsorted(by_u.indptr, start[big], side="right") - 1
    pv, overlap_big = vv[start[big]], overlap[big]
    w = np.ones(nb)
    if user_weight:
        w = 1.0 / np.sqrt(np.maximum(np.diff(r.indptr).astype(np.float64), 1.0))
    k = w[pu] * w[pv] / (alpha + overlap_big)
    pptr = np.zeros(len(overlap_big) + 1, dtype=np.int64)
    np.cumsum(overlap_big, out=pptr[1:])
    items = item[np.repeat(big, overlap)]
    pair_items = sp.csr_matrix((np.ones(len(items)), items, pptr), shape=(len(k), ni))
    weighted = pair_items.T.tocsr()
    weighted.data = k[weighted.indices]
    rows, cols, s = _off_diagonal(_sorted_symmetric(weighted @ pair_items))
    return _csr(rows, cols, s, (ni, ni))


def coused(hits: sp.csr_matrix, sim: sp.csr_matrix) -> sp.csr_matrix:
    """The collab channel's scores (queries × items): ``Σ_{h ∈ hits(q)} hit(q, h) · sim(h, j)``
    for the items j that are not already hits of q (those entries are dropped)."""
    hits = hits.tocsr()
    s = (hits @ sim).tocsr()
    found = hits.copy()
    found.data[:] = 1.0
    s = s - s.multiply(found)
    s.eliminate_zeros()
    return s


def item_boost(r: sp.csr_matrix, sim: sp.csr_matrix) -> sp.csr_matrix:
    """ItemCF boost (agents × items): ``Σ_{x ∈ I_a} sim(x, i)``, "agents that injected x also
    injected i", for the agents' rows of ``r`` (agents × items) and an item similarity."""
    return (r.tocsr() @ sim).tocsr()


def user_boost(r: sp.csr_matrix, usim: sp.csr_matrix) -> sp.csr_matrix:
    """UserCF boost (agents × items): ``Σ_b usim(a, b) · r_bi``, what the agents whose injections
    resemble agent a's injected."""
    return (usim @ r.tocsr()).tocsr()


SIMILARITIES = {"itemcf": itemcf, "swing": swing}
