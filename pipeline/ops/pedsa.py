"""PEDSA: ST-BME's spreading activation (docs/presets.md, ``bme``: PEDSA), batched over queries.

The frontier is a sparse (queries × nodes) matrix with at most ``top_k`` nonzeros per query, a step
is one sparse × sparse product, and the per-query top-k runs over the nonzeros only, so a query
costs what it touches, not O(N). Takes ``xp``/``sp`` from its inputs (numpy + scipy.sparse, or
cupy + cupyx.scipy.sparse).
"""

from __future__ import annotations

from typing import NamedTuple

from pipeline.core.backend import namespaces
from pipeline.ops.sparse_entries import is_sparse, rows_csr, segment_ids, triplets
from pipeline.ops.topk import topk_entry_mask


class _Seeds(NamedTuple):
    q: object  # query of every seed entry (grouped by query)
    i: object  # its node
    val: object  # its energy, clamped
    key: object  # query·N + node, ascending
    node: object  # (N,) bool: the node is some query's seed


def pedsa(
    adj,
    inhib,
    e0,
    *,
    steps: int = 2,
    decay: float = 0.6,
    alpha: float = 0.15,
    inhibit_mult: float = 2.0,
    clamp: float = 2.0,
    min_energy: float = 0.01,
    top_k: int = 100,
    seeds_in_result: bool = True,
):
    """Spreading activation for B queries.

    adj: (N, N) symmetric sparse weights of normal edges (parallel edges summed);
    inhib: (N, N) symmetric sparse weights of inhibitory edges, or None;
    e0: (N, B) seed energies (0 where not a seed), dense or sparse.
    Returns (N, B) energies, dense (an F-ordered view) for a dense ``e0`` and CSC for a sparse one:
    per node the value of largest |E| over the seeds and every step (BME; on a tie the earlier value
    stays). With ``seeds_in_result=False`` the seeds' own energy is left out of the maximum, so the
    result is what a node received through the graph. Exact per query (the top-k keeps each
    query's ``top_k`` largest |E|, ties by node order), so blocks of any size give the same result.
    """
    xp, sp = namespaces(e0)
    n, b = e0.shape
    dtype = xp.result_type(e0.dtype, adj.dtype)
    seeds = _seeds(xp, sp, e0, dtype, clamp, min_energy)
    parts = [(seeds.key, seeds.val)] if seeds_in_result else []
    use_inhib = inhib is not None and inhib.nnz > 0
    right = sp.vstack([adj, inhib], format="csr") if use_inhib else adj
    frontier = rows_csr(sp, xp, seeds.q, seeds.i, seeds.val, (b, n))
    for _step in range(steps):
        if frontier.nnz == 0:
            break
        nxt = _spread(
            sp, xp, frontier, right, use_inhib, decay * (1.0 - alpha), -(decay * inhibit_mult)
        )
        q = segment_ids(xp, nxt.indptr, nxt.nnz)
        i = nxt.indices
        v = xp.clip(nxt.data.astype(dtype, copy=False), -clamp, clamp)
        # entries under min_energy rank below all others, so they are dropped after the top-k
        a = xp.abs(v)
        extra, cnt = None, xp.diff(nxt.indptr)
        if alpha > 0 and seeds.key.size:  # teleport: the seeds' entries are replaced by their mix
            extra = _teleport(xp, seeds, q, i, v, a, n, alpha, clamp, min_energy)
            if q.size <= 8 * top_k * b:  # small product: rank everything at once
                q, i, v = (xp.concatenate([x, e]) for x, e in zip((q, i, v), extra))
                a = xp.concatenate([a, xp.abs(extra[2])])
                extra, cnt = None, None
        q, i, v = _prune(xp, q, i, v, a, extra, cnt, top_k, n, b, min_energy)
        parts.append((q.astype(xp.int64) * n + i, v))
        frontier = rows_csr(sp, xp, q, i, v, (b, n))
    return _max_abs(xp, sp, parts, n, b, dtype, dense=not is_sparse(e0))


def _seeds(xp, sp, e0, dtype, clamp: float, min_energy: float) -> _Seeds:
    """The seed entries of ``e0``, clamped to ±``clamp``; those under ``min_energy`` are left out."""
    n = e0.shape[0]
    q, i, v = triplets(xp, sp, e0)
    v = xp.clip(v.astype(dtype), -clamp, clamp)
    ok = xp.abs(v) >= min_energy
    q, i, v = q[ok], i[ok], v[ok]
    node = xp.zeros(n, bool)
    node[i] = True
    return _Seeds(q, i, v, q.astype(xp.int64) * n + i, node)


def _spread(sp, xp, frontier, right, use_inhib: bool, keep: float, inhibit: float):
    """One step's product, rows grouped by query (nodes in any order, no duplicates).

    (adj @ F)ᵀ = Fᵀ @ adj for a symmetric adj, so rows stay queries; one product per step:
    [keep·F | inhibit·|F|] @ [adj; inhib] (``right``), constants on the small side."""
    f = frontier
    nxt = sp.csr_matrix((f.data * keep, f.indices, f.indptr), shape=f.shape)
    if use_inhib:
        nxt = sp.hstack(
            [nxt, sp.csr_matrix((xp.abs(f.data) * inhibit, f.indices, f.indptr), shape=f.shape)],
            format="csr",
        )
    return sp.csr_matrix(nxt @ right)


def _teleport(xp, seeds: _Seeds, q, i, v, a, n: int, alpha: float, clamp: float, min_energy: float):
    """The seeds' entries after teleport, (1 − α)·received + α·own energy (received under
    ``min_energy`` counts 0), as (query, node, value) of those that stay at least ``min_energy``.
    Sets ``a`` to 0 at the step's entries on a seed, so that they rank last and are dropped."""
    cand = xp.nonzero(seeds.node[i])[0]  # entries at a node that is some query's seed
    ck = q[cand].astype(xp.int64) * n + i[cand]
    pos = xp.minimum(xp.searchsorted(seeds.key, ck), seeds.key.size - 1)
    is_seed = seeds.key[pos] == ck
    at, pos = cand[is_seed], pos[is_seed]  # entry of the step, and which seed it is
    got = xp.zeros_like(seeds.val)
    got[pos] = xp.where(a[at] >= min_energy, v[at], 0)
    a[at] = 0  # ranks last, dropped below
    mixed = xp.clip((1.0 - alpha) * got + alpha * seeds.val, -clamp, clamp)
    ok = xp.abs(mixed) >= min_energy
    return seeds.q[ok].astype(q.dtype), seeds.i[ok].astype(i.dtype), mixed[ok]


def _prune(xp, q, i, v, a, extra, cnt, top_k: int, n: int, b: int, min_energy: float):
    """The next frontier's entries, sorted by query: each query's ``top_k`` largest |E| (``a``; ties
    by node) of at least ``min_energy``. With ``extra`` (teleported seed entries not ranked yet) the
    graph's entries are ranked first and the seeds with the survivors (teleport changes only seed
    entries, so the top-k of the rest is not affected). ``cnt``: entries per query, if known."""
    keep = (
        xp.nonzero(topk_entry_mask(xp, q, i, a, top_k, b, cnt))[0]
        if top_k < n
        else xp.arange(q.size)
    )
    q, i, v, a = q[keep], i[keep], v[keep], a[keep]
    ok = (a >= min_energy) & (a > 0)
    q, i, v = q[ok], i[ok], v[ok]
    if extra is not None:
        q, i, v = (xp.concatenate([x, e]) for x, e in zip((q, i, v), extra))
        if top_k < n:
            keep = topk_entry_mask(xp, q, i, xp.abs(v), top_k, b)
            q, i, v = q[keep], i[keep], v[keep]
    by = xp.argsort(q, kind="stable")  # two sorted runs: the graph's entries, then the seeds'
    return q[by], i[by], v[by]


def _max_abs(xp, sp, parts, n, b, dtype, dense: bool):
    """Per (node, query) the value of largest |E| over ``parts`` ((key = query·N + node, value),
    in step order); on a tie the earlier part's value stays."""
    if parts:
        key = xp.concatenate([p[0] for p in parts])
        order = xp.argsort(key, kind="stable")  # keeps step order per key
        key = key[order]
        v = xp.concatenate([p[1] for p in parts])[order]
        start = xp.nonzero(xp.concatenate([xp.ones(min(1, key.size), bool), key[1:] != key[:-1]]))[
            0
        ]
        end = xp.concatenate([start[1:], xp.asarray([key.size])])
        best = v[start]
        for j in range(1, len(parts)):  # a key occurs at most once per part
            at = xp.nonzero(start + j < end)[0]
            cand = v[start[at] + j]
            up = xp.abs(cand) > xp.abs(best[at])
            best[at[up]] = cand[up]
        key, v = key[start], best
        q, i = key // n, key % n
    else:
        q = i = xp.zeros(0, xp.int64)
        v = xp.zeros(0, dtype)
    if dense:
        out = xp.zeros((b, n), dtype)  # filled query by query; returned as its (N, B) transpose
        out[q, i] = v
        return out.T
    return sp.csc_matrix(
        (v.astype(dtype, copy=False), i, xp.searchsorted(q, xp.arange(b + 1))), shape=(n, b)
    )
