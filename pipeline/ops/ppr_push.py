"""Personalised PageRank by forward push (Andersen, Chung, Lang 2006, "Local graph partitioning
using PageRank vectors", FOCS), batched over queries: the work of a query follows the
neighbourhood its mass reaches, not the component its seeds sit in.

Every query keeps an estimate ``x`` and a residual ``r`` (at first its personalization). A push at
node u moves ``(1 − d)·r_u`` into ``x_u`` and spreads ``d·r_u`` over u's out-edges by weight; the
invariant ``ppr = x + PPR(r)`` holds throughout. Here every node whose residual reaches
``eps · w(u)`` (its weighted degree) is pushed in the same round, for every query at once: a round
is one sparse × sparse product of the frontier, held query-major as (B × N) ``Fᵀ``
(``Fᵀ @ transᵀ``: its cost follows the entries pushed, not the graph's size, so small parts of
queries stay cheap and each part stops with its own columns). It stops when no residual reaches
its threshold; the result is ``x + (1 − d)·r`` (a residual left at v settles at least that much
at v itself). On a symmetric graph (the diffusion stage's adjacency, hubs included) this bounds
the error of every entry, as in ACL 2006 for the lazy walk: the error is ``PPR(r)`` with
``r < eps · w`` entrywise, PPR is linear and monotone, and the degree vector ``w`` is the walk's
stationary vector, so ``PPR(w) = w`` and ``0 ≤ ppr_v − x_v < eps · w(v)`` per unit of seed mass
(before the dangling rescale below).

A dangling node (no out-edge) keeps its ``(1 − d)`` part and loses the rest, as in
``ops.ppr._iterate``; each column is rescaled at the end by ``mass / (mass − lost)``, the push
counterpart of the exact solver's rescale to the personalization mass (1 when nothing dangles).

Each column is its own arithmetic (products and sums never mix columns), so a query's scores do
not depend on which queries share its batch. Takes ``xp``/``sp`` from its inputs (numpy +
scipy.sparse, or cupy + cupyx.scipy.sparse).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from pipeline.core import progress
from pipeline.core.backend import bincount, namespaces, to_host
from pipeline.ops.ppr import SolverInfo, _transition
from pipeline.ops.sparse_entries import segment_ids, spans
from pipeline.ops.topk import KEY_BITS, bit_width, int_order

PUSH_COLS = 256  # queries per part of a host solve: a part's rounds stop with its own columns


def ppr_push(
    adj,
    personalization,
    *,
    damping: float = 0.5,
    eps: float = 1e-4,
    max_iter: int = 100,
):
    """Forward-push PPR of B seed distributions at once (``x + (1 − d)·r`` at the last round).

    adj: (N, N) sparse non-negative weights (row = source; symmetric for the error bound);
    personalization: (N, B) sparse, columns sum to their seed mass. Returns ((N, B) sparse CSR
    estimates, SolverInfo): rounds run, the largest column's residual mass left relative to its
    seed mass, and whether every residual fell below its threshold within ``max_iter`` rounds."""
    dtype = _dtype(adj, personalization)
    prep = _prepare(adj, damping, eps, dtype)
    x, info = _push_rows(prep, _by_query(personalization, dtype), damping, max_iter)
    return x.T.tocsr(), info


def _push_rows(prep, r, damping: float, max_iter: int):
    """:func:`ppr_push` on the (B, N) query-major form ``r`` (canonical CSR: a query's nodes in
    ascending order), returning the (B, N) estimates. Every entry gets the bits of the node-major
    solve: the front stays canonical, so ``front @ transᵀ`` adds each (query, node) sum over the
    source nodes in ascending order, as ``trans @ front`` does over a row of the canonical
    ``trans``; the seed mass is scipy's column sum of the same (N, B) CSR."""
    xp, sp = namespaces(r.data)
    trans_t, thr, loses = prep
    b = r.shape[0]
    mass = xp.asarray(sp.csr_matrix(r.T).sum(axis=0, dtype=xp.float64)).ravel()  # as (N, B) CSR
    lost = xp.zeros(b, xp.float64)
    pushed, it, converged = [], 0, False
    while it < max_iter:
        act = r.data >= thr[r.indices]
        if not bool(act.any()):
            converged = True
            break
        it += 1
        front, rest = _split(sp, r, act)
        pushed.append(front)
        lost += front @ loses
        prod = (front @ trans_t).tocsc().tocsr()  # two counting sorts: canonical, bits unchanged
        r = rest + prod
    pushed.append(r)  # what stays in r_v settles at least (1 − d)·r_v at v: still ≤ ppr
    x = _total(sp, pushed, r.shape, r.dtype)
    left = bincount(
        segment_ids(xp, r.indptr, r.nnz), weights=r.data.astype(xp.float64), minlength=b
    )
    scale = xp.where(mass > lost, mass / xp.where(mass > lost, mass - lost, 1.0), 0.0)
    rows = segment_ids(xp, x.indptr, x.nnz)
    x.data = (x.data * ((1.0 - damping) * scale)[rows]).astype(r.dtype)
    resid = float((left / xp.where(mass > 0, mass, 1.0)).max()) if b else 0.0
    return x, SolverInfo(it, resid, converged)


def _dtype(adj, personalization):
    xp, _ = namespaces(personalization.data)
    return xp.result_type(personalization.dtype, adj.dtype, xp.float32)


def _by_query(personalization, dtype):
    """The (N, B) seeds as the (B, N) canonical CSR of ``dtype`` (duplicates summed, zeros out)."""
    _, sp = namespaces(personalization.data)
    r = sp.csr_matrix(personalization.T, dtype=dtype)
    r.sum_duplicates()
    r.eliminate_zeros()
    return r


def ppr_push_top(
    adj,
    personalization,
    rows: int,
    keep: int,
    *,
    workers: int | None = None,
    damping: float = 0.5,
    eps: float = 1e-4,
    max_iter: int = 100,
):
    """:func:`ppr_push`'s positive scores of the first ``rows`` nodes, each column cut to its
    ``keep`` largest (ties: lower node first; 0 keeps all), as host (node, column, score) sorted by
    (column, node): the contract of ``ops.ppr.ppr_top``.

    On the host the columns are cut into contiguous parts of at most ``PUSH_COLS`` (:func:`_spans`)
    solved on ``workers`` threads (default: the CPU cores this process may use; scipy's sparse
    kernels and numpy's release the GIL), the progress counted in queries as parts finish; a
    column's arithmetic never reads another's, so the bits are those of one solve, and a part's
    rounds end when its own columns' residuals are spent. On a device: one solve."""
    xp, _ = namespaces(personalization.data)
    dtype = _dtype(adj, personalization)
    prep = _prepare(adj, damping, eps, dtype)
    pers = _by_query(personalization, dtype)
    b, kw = pers.shape[0], {"damping": damping, "max_iter": max_iter}
    workers = min(b, len(os.sched_getaffinity(0)) if workers is None else workers)
    spans = _spans(b, workers)
    if xp is not np or len(spans) <= 1:
        return _push_top(prep, pers, rows, keep, **kw)
    with ThreadPoolExecutor(max(1, workers)) as pool:
        futs = {
            pool.submit(_push_top, prep, pers[s:e], rows, keep, ordered=False, **kw): (s, e)
            for s, e in spans
        }
        width = lambda f: futs[f][1] - futs[f][0]  # noqa: E731
        for _done in progress.inner(as_completed(futs), "diffuse push", b, "query", width):
            pass
        parts = [f.result() for f in futs]  # in span order
    node = np.concatenate([p[0] for p in parts])
    col = np.concatenate([p[1] + s for p, (s, _e) in zip(parts, spans)])
    val = np.concatenate([p[2] for p in parts])
    infos = [p[3] for p in parts]
    info = SolverInfo(
        max(i.n_iter for i in infos),
        max(i.residual for i in infos),
        all(i.converged for i in infos),
    )
    return (*_by_column(node, col, val), info)


def _by_column(node: np.ndarray, col: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, ...]:
    """The host (node, column, score) triples sorted by (column, node), the order the component
    join merges in: one plain sort of the packed (column, node, score bits) key when it fits in 63
    bits (the scores are positive float32, so 31 bits; the pairs are distinct), decoded; else
    :func:`int_order`."""
    bn = bit_width(node)
    if node.size and bit_width(col) + bn + 31 <= KEY_BITS:
        key = np.sort((((col << bn) | node) << 31) | val.view(np.uint32).astype(np.int64))
        bits = (key & 0x7FFFFFFF).astype(np.uint32)
        return (key >> 31) & ((1 << bn) - 1), key >> (31 + bn), bits.view(np.float32)
    order = int_order(col, node)
    return node[order], col[order], val[order]


def _spans(b: int, workers: int) -> list[tuple[int, int]]:
    """``b`` columns cut into contiguous (start, end) parts of at most ``PUSH_COLS``: at least one
    per worker, and from ``progress.INNER_MIN`` columns on at least ``2 · progress.STEPS`` parts (a
    multiple of the workers, so that the last round of parts keeps every worker busy) for the
    progress to move."""
    w = max(1, workers)
    n = max(w, -(-b // PUSH_COLS))
    if b >= progress.INNER_MIN:
        n = max(n, w * -(-2 * progress.STEPS // w))
    n = min(b, n)
    cuts = np.linspace(0, b, n + 1).astype(np.int64)
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


def _prepare(adj, damping: float, eps: float, dtype):
    """The push operator of ``adj``: (the transpose of its transition as canonical CSR, each node's
    push threshold ``eps · w(u)``, what a push at each node loses (``d`` at a dangling node))."""
    xp, sp = namespaces(adj.data)
    trans = _transition(xp, sp, adj, damping, dtype)
    thr = (eps * xp.asarray(adj.sum(axis=1)).ravel()).astype(dtype)
    loses = (damping - xp.asarray(trans.sum(axis=0)).ravel()).astype(xp.float64)
    return sp.csr_matrix(trans.T), thr, loses


def _push_top(
    prep, pers, rows: int, keep: int, *, damping: float, max_iter: int, ordered: bool = True
):
    """:func:`ppr_push_top` of the (B, N) seeds ``pers`` in one solve, on their device;
    ``ordered=False`` leaves the (node, column) sort to the caller (the kept set is the same in
    any order)."""
    x, info = _push_rows(prep, pers, damping, max_iter)
    xp, _ = namespaces(x.data)
    col = segment_ids(xp, x.indptr, x.nnz).astype(xp.int64)
    node, val = x.indices.astype(xp.int64), x.data.astype(xp.float32)
    ok = (node < rows) & (val > 0)
    if not bool(ok.all()):
        col, node, val = col[ok], node[ok], val[ok]
    if keep:
        col, node, val = _cut(xp, col, node, val, keep, x.shape[0])
    node, col, val = to_host(node), to_host(col), to_host(val)
    if not ordered:
        return node, col, val, info
    return (*_by_column(node, col, val), info)


def _cut(xp, col, node, val, keep: int, b: int):
    """Each column's ``keep`` largest of entries in node order within each column (ties: lower
    node first), in no particular order. The key is the column, then the score's bits reversed (a
    positive float32's bits order as its value does), then the node: one plain sort of the packed
    key when it fits in 63 bits (every key is distinct, so no sort needs to be stable), else one
    stable sort of (column, score bits) over the entries in node order."""
    desc = (xp.uint32(0xFFFFFFFF) - val.view(xp.uint32)).astype(xp.int64)
    bn = int(node.max()).bit_length() if node.size else 0
    if max(b - 1, 0).bit_length() + 32 + bn > KEY_BITS:
        order = xp.argsort((col << 32) | desc, kind="stable")
        sel = order[_ranks(xp, col[order], b) < keep]
        return col[sel], node[sel], val[sel]
    key = xp.sort((((col << 32) | desc) << bn) | node)
    at = xp.searchsorted(key, xp.arange(b + 1, dtype=xp.int64) << (32 + bn))  # column starts
    key = key[spans(xp, at[:-1], xp.minimum(at[:-1] + keep, at[1:]))]
    node = key & ((1 << bn) - 1)
    bits = (xp.int64(0xFFFFFFFF) - ((key >> bn) & 0xFFFFFFFF)).astype(xp.uint32)
    return key >> (32 + bn), node, bits.view(xp.float32)


def _ranks(xp, col, b: int):
    """Each entry's place within its column, for entries sorted by column."""
    count = bincount(col, minlength=b)
    start = xp.cumsum(count) - count
    return xp.arange(col.size) - start[col]


def _split(sp, m, mask):
    """``m``'s stored entries where ``mask`` holds, and the others: two CSR of ``m``'s shape."""
    xp, _ = namespaces(m.indptr)
    kept = xp.concatenate([xp.zeros(1, m.indptr.dtype), xp.cumsum(mask, dtype=m.indptr.dtype)])
    kept = kept[m.indptr]  # the row pointer of the entries kept
    yes = sp.csr_matrix((m.data[mask], m.indices[mask], kept), shape=m.shape)
    no = ~mask
    return yes, sp.csr_matrix((m.data[no], m.indices[no], m.indptr - kept), shape=m.shape)


def _total(sp, parts, shape, dtype):
    """The sum of the pushed fronts, one addition per entry per round in round order (a COO sum
    would add duplicates in an order that depends on the other columns' entries)."""
    out = sp.csr_matrix(shape, dtype=dtype)
    for p in parts:
        out = out + p
    return out
