"""Personalised PageRank (HippoRAG) by power iteration for a block of queries, solved only on the
weakly connected components that hold a query's seeds; and those components (``components``).

Takes ``xp``/``sp`` from its inputs (numpy + scipy.sparse, or cupy + cupyx.scipy.sparse).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.core import backend
from pipeline.core.backend import bincount, namespaces, to_host
from pipeline.core.progress import inner
from pipeline.ops.sparse_entries import is_sparse, segment_ids, triplets
from pipeline.ops.topk import int_order, topk_abs_mask, topk_long

DENSE_MIN, DENSE_WORK = 64, 1 << 16  # a component this large, with size × queries this large, is
# solved by a sparse × dense product; smaller work goes to the per-(query, component) operator
PAIR_NNZ = 1 << 20  # stored entries per small-component operator (keeps its iterate in cache)
BLOCK_BYTES = 1 << 23  # an (n_component, B) iterate of about this size stays in cache (CPU)
GPU_BLOCK_BYTES = 1 << 30  # a GPU is bound by launches and syncs per step, not cache: wide blocks
# (the first H200 run: 100k nodes × 1,000 queries took 63 blocks of 16 columns, ~10 s)


@dataclass
class SolverInfo:
    """How a PPR solve ended: most iterations run, largest final residual, and whether it is below the tolerance."""

    n_iter: int
    residual: float
    converged: bool


def components(adj, device: str = "cpu"):
    """Weakly connected component label of every node of a square sparse ``adj`` (scipy or cupyx),
    in ``adj``'s namespace: cuGraph's SciPy-compatible ``connected_components`` when ``device`` is
    cuda and it imports (``backend.cugraph``), else (or when cuGraph fails, noted as a fallback)
    scipy's, on the host for a cupyx matrix."""
    xp, sp = namespaces(adj.data)
    lib = backend.cugraph(device, "components")
    if lib is not None:
        labels = _cugraph_components(lib, xp, sp, adj)
        if labels is not None:
            return labels
    from scipy.sparse.csgraph import connected_components

    host = adj if xp.__name__ == "numpy" else adj.get()
    return xp.asarray(connected_components(host, directed=True, connection="weak")[1])


def _cugraph_components(lib, xp, sp, adj):
    """cuGraph's labels of ``adj``'s weak components, or None after noting why it failed.

    cuGraph computes weak components of undirected graphs only (``directed=True`` raises), so it
    gets the symmetric pattern ``P + Pᵀ`` with ``directed=False``: P holds a 1 at every stored
    entry of ``adj`` (scipy counts a stored zero as an edge too), so the components are ``adj``'s
    weak ones. Any error, or labels of the wrong length, falls back to scipy (``backend.fallback``,
    listed in the manifest) instead of failing the run."""
    n = adj.shape[0]
    csr = sp.csr_matrix(adj)
    pattern = sp.csr_matrix(
        (xp.ones(csr.indices.size, xp.float32), csr.indices, csr.indptr), (n, n)
    )
    try:
        _count, labels = lib.connected_components(
            sp.csr_matrix(pattern + pattern.T),
            directed=False,
            connection="weak",
            return_labels=True,
        )
        labels = xp.asarray(labels)
        if labels.shape != (n,):
            raise ValueError(f"{labels.shape[0]} labels for {n} nodes")
    except Exception as exc:  # any cuGraph failure has the same answer: scipy
        backend.fallback(
            f"cugraph connected_components failed ({type(exc).__name__}: {exc}); "
            "weak components on cpu (scipy)"
        )
        backend.GRAPH_IMPL["components"] = backend.CPU_GRAPH_LIBS["components"]
        return None
    return labels


def ppr(adj, personalization, *, damping: float = 0.5, max_iter: int = 100, tol: float = 1e-8):
    """Personalised PageRank for B seed distributions at once.

    adj: (N, N) sparse non-negative weights (row = source); personalization: (N, B), dense or
    sparse, columns sum to 1. Dangling nodes send their mass back to the personalization. Returns
    ((N, B) dense scores, an F-ordered view, SolverInfo): the most iterations any part took, and the largest L1 change
    of a part in its last iteration relative to its mass (converged: below ``tol``).

    Mass never leaves a weakly connected component, so each query is solved only on the
    components that hold its seeds. A component with many (size × queries) gets a sparse × dense
    product over the queries that reach it, in cache-sized column blocks; all the others are
    solved at once as one block-diagonal operator with a copy of the component per (query,
    component) pair. Iterating without the dangling term and rescaling each column to its
    personalization mass at the end gives the same fixed point.
    """
    xp, parts, scale, (n, b, dtype), info = _solve_parts(
        adj, personalization, damping, max_iter, tol
    )
    return _scatter(xp, parts, scale, n, b, dtype), info


def ppr_top(adj, personalization, rows: int, keep: int, *, damping=0.5, max_iter=100, tol=1e-8):
    """:func:`ppr`'s positive scores of the first ``rows`` nodes, each column cut to its ``keep``
    largest (ties: lower node first; 0 keeps all), as host (node, column, score) sorted by (column,
    node), the order the component join merges in: the entries ``nonzero`` finds in
    ``topk_abs_mask`` of the dense result (taken column by column), without the dense (N, B)
    result. Each score is the dense result's, bit for bit."""
    xp, parts, scale, _shape, info = _solve_parts(adj, personalization, damping, max_iter, tol)
    node, col, val = [], [], []
    for r, c, y in parts:
        v = y * scale[c]  # the expression _scatter writes
        if v.ndim == 2:  # a column block: (members or the whole graph) × its queries
            members = xp.arange(v.shape[0]) if r is None else r[:, 0]
            unit = members < rows
            v, members = v[unit], members[unit]
            if keep and v.shape[0] > keep:  # a superset of its part of each column's top keep
                v = xp.where(topk_abs_mask(xp.ascontiguousarray(v), keep), v, 0)
            i, j = xp.nonzero(v > 0)
            node.append(members[i])
            col.append(c[0][j])
            val.append(v[i, j])
        else:  # pair blocks: one entry per (query, component member)
            ok = (r < rows) & (v > 0)
            node.append(r[ok])
            col.append(c[ok])
            val.append(v[ok])
    cat = lambda xs, dt: (  # noqa: E731
        np.concatenate([to_host(x) for x in xs]).astype(dt) if xs else np.zeros(0, dt)
    )
    node, col, val = cat(node, np.int64), cat(col, np.int64), cat(val, np.float32)
    if keep:
        col, node, val, _rank = topk_long(col, node, val, keep)
    order = int_order(col, node)
    return node[order], col[order], val[order], info


def _solve_parts(adj, personalization, damping, max_iter, tol):
    """The solved parts of :func:`ppr` before they are laid out: (xp, [(rows, cols, y)], each
    column's rescale, (N, B, dtype), SolverInfo)."""
    xp, sp = namespaces(personalization)
    n, b = personalization.shape
    dtype = xp.result_type(personalization.dtype, adj.dtype, xp.float32)
    q, i, v = triplets(xp, sp, personalization)
    v = v.astype(dtype)
    trans = _transition(xp, sp, adj, damping, dtype)
    label = components(adj, "cpu" if xp.__name__ == "numpy" else "cuda")
    size = bincount(label)
    comp = label[i]
    dense_comp = _dense_components(xp, q, comp, size)
    parts, iters, resids = (
        [],
        [0],
        [0.0],
    )  # parts: (node rows, query cols, y) — written after rescaling
    total = xp.zeros(b, xp.float64)

    def solve(op, y, segsum, freeze):
        y, it, r = _iterate(op, y, damping, segsum, freeze, tol, max_iter)
        iters.append(it)
        resids.append(r)
        return y

    for c in xp.nonzero(dense_comp)[0].tolist():
        for rows, cols, y in _column_blocks(xp, sp, trans, label, c, comp == c, q, i, v, solve):
            total[cols[0]] += y.sum(
                axis=0, dtype=xp.float64
            )  # float64: the same total whatever the block width
            parts.append((rows, cols, y))
    rest = ~dense_comp[comp]
    if bool(rest.any()):
        for rows, cols, y in _pair_blocks(
            xp, sp, trans, label, size, q[rest], i[rest], v[rest], solve
        ):
            total += bincount(cols, weights=y, minlength=b)
            parts.append((rows, cols, y))
    mass = bincount(q, weights=v, minlength=b)  # rescale each column to its personalization mass
    scale = xp.where(total > 0, mass / xp.where(total > 0, total, 1.0), 0.0).astype(dtype)
    return xp, parts, scale, (n, b, dtype), SolverInfo(max(iters), max(resids), max(resids) < tol)


def _transition(xp, sp, adj, damping: float, dtype):
    """CSR ``trans[i, j] = d · adj[j, i] / out_w[j]`` (0 from a dangling node j)."""
    n = adj.shape[0]
    out_w = xp.asarray(adj.sum(axis=1)).ravel()
    inv = xp.where(out_w > 0, 1.0 / xp.where(out_w > 0, out_w, 1.0), 0.0)
    trans = sp.csr_matrix(adj.T)
    trans.sum_duplicates()
    return sp.csr_matrix(
        ((damping * trans.data * inv[trans.indices]).astype(dtype), trans.indices, trans.indptr),
        shape=(n, n),
    )


def _dense_components(xp, q, comp, size):
    """Per component: solved by a sparse × dense product (at least ``DENSE_MIN`` nodes, size × the
    queries that reach it at least ``DENSE_WORK``)."""
    pair = xp.unique(q.astype(xp.int64) * size.size + comp)  # (query, component) pairs
    hits = bincount(pair % size.size, minlength=size.size)
    return (size >= DENSE_MIN) & (size * hits >= DENSE_WORK) & (hits > 0)


def _scatter(xp, parts, scale, n: int, b: int, dtype):
    """The (N, B) result (an F-ordered view) from the solved parts, each column times its ``scale``."""
    out = xp.zeros((b, n), dtype)  # filled query by query; returned as its (N, B) transpose
    for rows, cols, y in parts:
        if rows is None:
            out[cols[0]] = (y * scale[cols]).T
        else:
            out[cols, rows] = y * scale[cols]
    return out.T


def _iterate(trans, p, damping, segsum, freeze, tol, max_iter):
    """Power iteration y ← trans·y + (1−d)·p from y = p (trans already scaled by d), in steps
    Δₖ = yₖ₊₁ − yₖ = trans·Δₖ₋₁ (no rounding floor from differencing two iterates).

    ``p`` may be sparse: the first steps then stay sparse (sparse × sparse products) until Δ fills
    more than 1/16 of its shape. ``segsum`` maps an iterate-shaped array to per-part sums (a
    column, or a (query, component) pair); ``freeze(Δ, done)`` zeroes the entries of the parts in
    ``done``. A part's change is |Δ|₁ / its mass after step 1; a part stops (is frozen) at the first
    step where its own change is below ``tol``, so its result does not depend on which other parts
    share the batch. Returns (dense y, steps, largest final change of a part).
    """
    xp, _ = namespaces(p)
    mass, final = None, None
    y = p if is_sparse(p) else p.copy()
    delta = trans @ p - damping * p  # y₁ − y₀ = trans·p + (1−d)p − p
    it = 0
    while it < max_iter:
        it += 1
        if is_sparse(delta) and delta.nnz * 16 > delta.shape[0] * delta.shape[1]:
            delta = delta.toarray()
        if is_sparse(delta):
            y = y + delta
        else:
            y = y.toarray() if is_sparse(y) else y
            y += delta
        if mass is None:
            mass = segsum(y)  # ≥ (1−d)·Σp; the final mass when no node of the part is dangling
            mass = xp.where(mass > 0, mass, 1.0)
            final = xp.full(mass.shape, xp.inf)
        r = segsum(_abs(xp, delta)) / mass
        live = xp.isinf(final)
        done = live & (r < tol)
        final = xp.where(done, r, final)
        if not bool(xp.isinf(final).any()):
            break
        delta = trans @ freeze(delta, done) if bool(done.any()) else trans @ delta
    if final is None:
        return (y.toarray() if is_sparse(y) else y), it, 0.0
    last = xp.where(xp.isinf(final), r, final)
    return (y.toarray() if is_sparse(y) else y), it, float(last.max()) if last.size else 0.0


def _abs(xp, x):
    """|x| for a dense array or a sparse matrix."""
    if not is_sparse(x):
        return xp.abs(x)
    out = x.copy()
    out.data = xp.abs(out.data)
    return out


def _freeze_cols(xp, sp):
    def freeze(d, done):
        if is_sparse(d):
            return d @ sp.diags((~done).astype(d.dtype))
        d[:, done] = 0
        return d

    return freeze


def _column_blocks(xp, sp, trans, label, c: int, sel, q, i, v, solve):
    """Solve component ``c`` for the queries that reach it (seed entries ``sel``) by sparse × dense
    products, in column blocks whose iterate stays about ``BLOCK_BYTES``. Yields (node rows, None
    for the whole graph; query cols (1, width); y) per block."""
    n = label.size
    members = xp.nonzero(label == c)[0]
    local = xp.zeros(n, xp.int64)
    local[members] = xp.arange(members.size)
    whole = members.size == n
    op = trans if whole else sp.csr_matrix(trans[members][:, members])
    cols = xp.unique(q[sel])
    sq, si, sv = q[sel], local[i[sel]], v[sel]  # grouped by query
    gpu = xp.__name__ != "numpy"
    budget, cap = (GPU_BLOCK_BYTES, 1 << 16) if gpu else (BLOCK_BYTES, 256)
    width = max(8, min(cap, 1 << max(0, (budget // (members.size * sv.itemsize)).bit_length() - 1)))
    width_of = lambda s: min(width, cols.size - s)  # noqa: E731
    starts = inner(range(0, cols.size, width), "diffuse exact", cols.size, "query", width_of)
    for s in starts:  # sparse seeds of a column block → its dense scores
        blk = cols[s : s + width]
        lo = int(xp.searchsorted(sq, blk[0], side="left"))
        hi = int(xp.searchsorted(sq, blk[-1], side="right"))
        indptr = xp.concatenate(
            [xp.searchsorted(sq[lo:hi], blk, side="left"), xp.asarray([hi - lo])]
        )
        p = sp.csc_matrix((sv[lo:hi], si[lo:hi], indptr), shape=(members.size, blk.size))
        y = solve(
            op,
            p,
            lambda z: xp.asarray(z.sum(axis=0, dtype=xp.float64)).ravel(),
            _freeze_cols(xp, sp),
        )
        yield (None if whole else members[:, None]), blk[None, :], y


def _pair_blocks(xp, sp, trans, label, size, q, i, v, solve):
    """Solve every (query, component) pair at once: one operator holding a copy of the component's
    block of ``trans`` per pair (block diagonal), one iterate entry per pair and member. Yields
    (node rows, query cols, y) per chunk of pairs (at most ``PAIR_NNZ`` stored entries each)."""
    n = label.size
    ncomp = size.size
    pair = xp.unique(q.astype(xp.int64) * ncomp + label[i])
    pq, pc = pair // ncomp, pair % ncomp
    # the hit components' nodes, grouped by component: their blocks of trans are diagonal blocks
    hit = xp.zeros(ncomp, bool)
    hit[pc] = True
    nodes = xp.nonzero(hit[label])[0]
    nodes = nodes[xp.argsort(label[nodes], kind="stable")]
    sub = sp.csr_matrix(trans[nodes][:, nodes])
    first = xp.searchsorted(
        label[nodes], xp.arange(ncomp)
    )  # where each hit component starts in ``nodes``
    where = xp.zeros(n, xp.int64)  # a node's index inside its component's block
    where[nodes] = xp.arange(nodes.size) - first[label[nodes]]
    row_nnz = xp.diff(sub.indptr)
    comp_nnz = bincount(label[nodes], weights=row_nnz, minlength=ncomp).astype(xp.int64)
    cum = xp.cumsum(comp_nnz[pc])
    cuts = (
        [0]
        + xp.searchsorted(cum, xp.arange(1, int(cum[-1]) // PAIR_NNZ + 1) * PAIR_NNZ).tolist()
        + [pair.size]
    )
    for a, z in zip(cuts[:-1], cuts[1:]):
        if z <= a:
            continue
        cq, cc = pq[a:z], pc[a:z]
        psize = size[cc]
        off = xp.cumsum(psize) - psize  # each pair's first entry in the iterate
        m = int(psize.sum())
        at = segment_ids(
            xp, xp.concatenate([off, xp.asarray([m])]), m
        )  # pair of each iterate entry
        row = first[cc][at] + xp.arange(m) - off[at]  # its row in ``sub``
        lens = row_nnz[row]
        indptr = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(lens)])
        e_row = segment_ids(xp, indptr, int(indptr[-1]))
        src = sub.indptr[row][e_row] + xp.arange(int(indptr[-1])) - indptr[e_row]
        shift = (off - first[cc])[at]
        op = sp.csr_matrix((sub.data[src], sub.indices[src] + shift[e_row], indptr), shape=(m, m))
        # seeds → iterate entries (a query's pairs may straddle two chunks: keep this chunk's)
        sel = (q >= cq[0]) & (q <= cq[-1])
        sk = q[sel].astype(xp.int64) * ncomp + label[i[sel]]
        at_seed = xp.minimum(xp.searchsorted(pair[a:z], sk), z - a - 1)
        ok = pair[a:z][at_seed] == sk
        y = xp.zeros(m, v.dtype)
        y[off[at_seed[ok]] + where[i[sel][ok]]] = v[sel][ok]
        y = solve(
            op,
            y,
            lambda w, at=at, k=z - a: bincount(at, weights=w, minlength=k),
            lambda w, done, at=at: xp.where(done[at], 0, w).astype(w.dtype),
        )
        yield nodes[row], cq[at], y
