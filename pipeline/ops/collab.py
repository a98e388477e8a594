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


def codes(*keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense 0-based codes of the rows' key tuples (sorted key order) and how many there are.
    Each key column is factorised on its own, then the columns are combined as one int64."""
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for k in keys:
        uniq, inv = np.unique(np.asarray(k), return_inverse=True)
        combined = combined * len(uniq) + inv.ravel()
    uniq, inv = np.unique(combined, return_inverse=True)
    return inv.astype(np.int64).ravel(), len(uniq)


def incidence(basket: np.ndarray, item: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The binary (baskets × items) matrix of the (basket, item) rows (duplicates count once)."""
    m = sp.csr_matrix(
        (np.ones(len(basket), dtype=np.float64), (np.asarray(basket), np.asarray(item))),
        shape=shape,
    )
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def _cosine(r: sp.csr_matrix) -> sp.csr_matrix:
    """Columns' cosine of a binary matrix ``r`` with a zero diagonal: ``(rᵀr)_ij / sqrt(n_i n_j)``."""
    n = np.asarray(r.sum(axis=0)).ravel()
    inv = sp.diags(1.0 / np.sqrt(np.maximum(n, 1.0)))
    c = (inv @ (r.T @ r) @ inv).tocsr()
    c.setdiag(0.0)
    c.eliminate_zeros()
    return c


def itemcf(r: sp.csr_matrix) -> sp.csr_matrix:
    """ItemCF (items × items): co-count of items i, j over baskets / sqrt(|U_i|·|U_j|)."""
    return _cosine(r.tocsr())


def usercf(r: sp.csr_matrix) -> sp.csr_matrix:
    """UserCF (baskets × baskets): co-count of baskets a, b over items / sqrt(|I_a|·|I_b|)."""
    return _cosine(r.T.tocsr())


def swing(r: sp.csr_matrix, alpha: float = 1.0, user_weight: bool = False) -> sp.csr_matrix:
    """Swing (items × items) of the binary (baskets × items) matrix ``r`` (module docstring).

    Pairs u < v of baskets sharing an item come from ``r rᵀ`` (their overlap ``|I_u ∩ I_v|``);
    ``P[(u, v), i] = r_ui · r_vi`` marks the items both hold, so ``swing = Pᵀ diag(k) P`` with
    ``k = w_u w_v / (alpha + overlap)``: three sparse products, no Python loop over pairs."""
    r = r.tocsr()
    ov = sp.triu(r @ r.T, k=1).tocoo()
    u, v, overlap = ov.row, ov.col, ov.data
    w = np.ones(r.shape[0])
    if user_weight:
        size = np.asarray(r.sum(axis=1)).ravel()
        w = 1.0 / np.sqrt(np.maximum(size, 1.0))
    k = w[u] * w[v] / (alpha + overlap)
    pair_items = r[u].multiply(r[v]).tocsr()
    s = (pair_items.T @ sp.diags(k) @ pair_items).tocoo()
    off = s.row != s.col
    return sp.csr_matrix((s.data[off], (s.row[off], s.col[off])), shape=(r.shape[1], r.shape[1]))


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
