"""Batched graph diffusion over a sparse adjacency, one column per query.

``pedsa`` is ST-BME's spreading activation (``spec/reference-algorithms.md`` §1.b.1) run for a block
of queries at once. The frontier is a sparse (queries × nodes) matrix with at most ``top_k`` nonzeros
per query, a step is one sparse × sparse product, and the per-query top-k runs over the nonzeros
only, so a query costs what it touches, not O(N). ``ppr`` is personalised PageRank by power
iteration (HippoRAG), solved only on the connected components that hold a query's seeds. Both take
``xp``/``sp`` from their inputs (numpy + scipy.sparse, or cupy + cupyx.scipy.sparse).
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline import backend
from pipeline.backend import bincount, namespaces
from pipeline.ops.topk import topk_abs_mask, topk_entry_mask

DENSE_MIN, DENSE_WORK = 64, 1 << 16  # ppr: a component this large, with size × queries this large, is
# solved by a sparse × dense product; smaller work goes to the per-(query, component) operator
PAIR_NNZ = 1 << 20  # ppr: stored entries per small-component operator (keeps its iterate in cache)
BLOCK_BYTES = 1 << 23  # ppr: an (n_component, B) iterate of about this size stays in cache


@dataclass
class SolverInfo:
    n_iter: int
    residual: float
    converged: bool


# ---------------------------------------------------------------- sparse helpers (xp-generic)

def _is_sparse(x) -> bool:
    return hasattr(x, "tocsr")


def _abs(xp, x):
    """|x| for a dense array or a sparse matrix."""
    if not _is_sparse(x):
        return xp.abs(x)
    out = x.copy()
    out.data = xp.abs(out.data)
    return out


def _segment_ids(xp, indptr, total: int):
    """Row of every stored entry of a CSR structure: ``repeat(arange(rows), diff(indptr))``."""
    dt = xp.int32 if total < 2 ** 31 else xp.int64
    # cupy.repeat takes no array of counts: count the rows starting at each entry and add them up
    # (one code path for numpy and cupy; one row gives an empty ``indptr[1:-1]``)
    starts = bincount(indptr[1:-1], minlength=total + 1)[:total]
    return xp.cumsum(starts, dtype=dt)


def _triplets(xp, sp, x):
    """(query, node, value) of the nonzeros of an (N, B) dense or sparse matrix, sorted by (query, node)."""
    if _is_sparse(x):
        t = sp.csr_matrix(x.T)
        t.sum_duplicates()
        q, i, v = _segment_ids(xp, t.indptr, t.nnz), t.indices, t.data
        nz = v != 0
        return q[nz], i[nz], v[nz]
    q, i = xp.nonzero(x.T)
    return q, i, x[i, q]


def _rows_csr(sp, xp, q, i, v, shape):
    """CSR matrix from entries already grouped by row ``q`` (ascending)."""
    indptr = xp.searchsorted(q, xp.arange(shape[0] + 1), side="left")
    return sp.csr_matrix((v, i, indptr), shape=shape)


# ---------------------------------------------------------------- PEDSA

def pedsa(adj, inhib, e0, *, steps: int = 2, decay: float = 0.6, alpha: float = 0.15, inhibit_mult: float = 2.0,
          clamp: float = 2.0, min_energy: float = 0.01, top_k: int = 100,
          seeds_in_result: bool = True):
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
    q, i, v = _triplets(xp, sp, e0)
    v = xp.clip(v.astype(dtype), -clamp, clamp)
    ok = xp.abs(v) >= min_energy
    q, i, v = q[ok], i[ok], v[ok]
    seed_q, seed_i, seed_val = q, i, v
    seed_key = q.astype(xp.int64) * n + i  # ascending
    seed_node = xp.zeros(n, bool)
    seed_node[i] = True
    parts = [(seed_key, v)] if seeds_in_result else []
    use_inhib = inhib is not None and inhib.nnz > 0
    right = sp.vstack([adj, inhib], format="csr") if use_inhib else adj
    frontier = _rows_csr(sp, xp, q, i, v, (b, n))
    for step in range(1, steps + 1):
        if frontier.nnz == 0:
            break
        # (adj @ F)ᵀ = Fᵀ @ adj for a symmetric adj, so rows stay queries; one product per step:
        # [c₁F | −c₂|F|] @ [adj; inhib], constants on the small side
        f = frontier
        nxt = sp.csr_matrix((f.data * (decay * (1.0 - alpha)), f.indices, f.indptr), shape=(b, n))
        if use_inhib:
            nxt = sp.hstack([nxt, sp.csr_matrix((xp.abs(f.data) * -(decay * inhibit_mult), f.indices, f.indptr),
                                                shape=(b, n))], format="csr")
        nxt = sp.csr_matrix(nxt @ right)  # rows grouped by query; nodes in any order, no duplicates
        q = _segment_ids(xp, nxt.indptr, nxt.nnz)
        i = nxt.indices
        v = xp.clip(nxt.data.astype(dtype, copy=False), -clamp, clamp)
        # entries under min_energy rank below all others, so they are dropped after the top-k
        a = xp.abs(v)
        extra, cnt = None, xp.diff(nxt.indptr)
        if alpha > 0 and seed_key.size:  # teleport: the seeds' entries are replaced by their mix
            cand = xp.nonzero(seed_node[i])[0]  # entries at a node that is some query's seed
            ck = q[cand].astype(xp.int64) * n + i[cand]
            pos = xp.minimum(xp.searchsorted(seed_key, ck), seed_key.size - 1)
            is_seed = seed_key[pos] == ck
            at, pos = cand[is_seed], pos[is_seed]  # entry of nxt, and which seed it is
            got = xp.zeros_like(seed_val)
            got[pos] = xp.where(a[at] >= min_energy, v[at], 0)
            a[at] = 0  # ranks last, dropped below
            mixed = xp.clip((1.0 - alpha) * got + alpha * seed_val, -clamp, clamp)
            ok = xp.abs(mixed) >= min_energy
            extra = (seed_q[ok].astype(q.dtype), seed_i[ok].astype(i.dtype), mixed[ok])
            if q.size <= 8 * top_k * b:  # small product: rank everything at once
                q, i, v = (xp.concatenate([x, e]) for x, e in zip((q, i, v), extra))
                a = xp.concatenate([a, xp.abs(extra[2])])
                extra, cnt = None, None
        # with ``extra`` left over, rank the graph's entries first and the seeds with the survivors
        # (teleport changes only seed entries, so the top-k of the rest is not affected)
        keep = (xp.nonzero(topk_entry_mask(xp, q, i, a, top_k, b, cnt))[0] if top_k < n else xp.arange(q.size))
        q, i, v, a = q[keep], i[keep], v[keep], a[keep]
        ok = (a >= min_energy) & (a > 0)
        q, i, v = q[ok], i[ok], v[ok]
        if extra is not None:
            q, i, v = (xp.concatenate([x, e]) for x, e in zip((q, i, v), extra))
            if top_k < n:
                keep = topk_entry_mask(xp, q, i, xp.abs(v), top_k, b)
                q, i, v = q[keep], i[keep], v[keep]
        by = xp.argsort(q, kind="stable")  # two sorted runs: the graph's entries, then the seeds'
        q, i, v = q[by], i[by], v[by]
        parts.append((q.astype(xp.int64) * n + i, v))
        frontier = _rows_csr(sp, xp, q, i, v, (b, n))
    return _max_abs(xp, sp, parts, n, b, dtype, dense=not _is_sparse(e0))


def _max_abs(xp, sp, parts, n, b, dtype, dense: bool):
    """Per (node, query) the value of largest |E| over ``parts`` ((key = query·N + node, value),
    in step order); on a tie the earlier part's value stays."""
    if parts:
        key = xp.concatenate([p[0] for p in parts])
        order = xp.argsort(key, kind="stable")  # keeps step order per key
        key = key[order]
        v = xp.concatenate([p[1] for p in parts])[order]
        start = xp.nonzero(xp.concatenate([xp.ones(min(1, key.size), bool), key[1:] != key[:-1]]))[0]
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
    return sp.csc_matrix((v.astype(dtype, copy=False), i, xp.searchsorted(q, xp.arange(b + 1))), shape=(n, b))


# ---------------------------------------------------------------- PPR

def components(adj, device: str = "cpu"):
    """Weakly connected component label of every node of a square sparse ``adj`` (scipy or cupyx),
    in ``adj``'s namespace: cuGraph's SciPy-compatible ``connected_components`` when ``device`` is
    cuda and it imports (``backend.cugraph``), else scipy's (on the host for a cupyx matrix)."""
    xp, _ = namespaces(adj.data)
    lib = backend.cugraph(device, "components")
    if lib is not None and xp.__name__ != "numpy":
        _count, labels = lib.connected_components(adj, directed=True, connection="weak", return_labels=True)
        return xp.asarray(labels)
    from scipy.sparse.csgraph import connected_components

    host = adj if xp.__name__ == "numpy" else adj.get()
    return xp.asarray(connected_components(host, directed=True, connection="weak")[1])


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
    y = p if _is_sparse(p) else p.copy()
    delta = trans @ p - damping * p  # y₁ − y₀ = trans·p + (1−d)p − p
    it = 0
    while it < max_iter:
        it += 1
        if _is_sparse(delta) and delta.nnz * 16 > delta.shape[0] * delta.shape[1]:
            delta = delta.toarray()
        if _is_sparse(delta):
            y = y + delta
        else:
            y = y.toarray() if _is_sparse(y) else y
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
        return (y.toarray() if _is_sparse(y) else y), it, 0.0
    last = xp.where(xp.isinf(final), r, final)
    return (y.toarray() if _is_sparse(y) else y), it, float(last.max()) if last.size else 0.0


def _freeze_cols(xp, sp):
    def freeze(d, done):
        if _is_sparse(d):
            return d @ sp.diags((~done).astype(d.dtype))
        d[:, done] = 0
        return d
    return freeze


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
    xp, sp = namespaces(personalization)
    n, b = personalization.shape
    dtype = xp.result_type(personalization.dtype, adj.dtype, xp.float32)
    q, i, v = _triplets(xp, sp, personalization)
    v = v.astype(dtype)
    out_w = xp.asarray(adj.sum(axis=1)).ravel()
    inv = xp.where(out_w > 0, 1.0 / xp.where(out_w > 0, out_w, 1.0), 0.0)
    trans = sp.csr_matrix(adj.T)  # trans[i, j] = d · adj[j, i] / out_w[j]
    trans.sum_duplicates()
    trans = sp.csr_matrix(((damping * trans.data * inv[trans.indices]).astype(dtype), trans.indices, trans.indptr),
                          shape=(n, n))
    label = components(adj, "cpu" if xp.__name__ == "numpy" else "cuda")
    size = bincount(label)
    comp = label[i]
    pair = xp.unique(q.astype(xp.int64) * size.size + comp)  # (query, component) pairs
    hits = bincount(pair % size.size, minlength=size.size)
    dense_comp = (size >= DENSE_MIN) & (size * hits >= DENSE_WORK) & (hits > 0)
    parts, iters, resids = [], [0], [0.0]  # parts: (node rows, query cols, y) — written after rescaling
    total = xp.zeros(b, xp.float64)

    def solve(op, y, segsum, freeze):
        y, it, r = _iterate(op, y, damping, segsum, freeze, tol, max_iter)
        iters.append(it)
        resids.append(r)
        return y

    for c in xp.nonzero(dense_comp)[0].tolist():
        sel = comp == c
        members = xp.nonzero(label == c)[0]
        local = xp.zeros(n, xp.int64)
        local[members] = xp.arange(members.size)
        whole = members.size == n
        op = trans if whole else sp.csr_matrix(trans[members][:, members])
        cols = xp.unique(q[sel])
        sq, si, sv = q[sel], local[i[sel]], v[sel]  # grouped by query
        width = max(8, min(256, 1 << max(0, (BLOCK_BYTES // (members.size * sv.itemsize)).bit_length() - 1)))
        for s in range(0, cols.size, width):  # sparse seeds of a column block → its dense scores
            blk = cols[s:s + width]
            lo = int(xp.searchsorted(sq, blk[0], side="left"))
            hi = int(xp.searchsorted(sq, blk[-1], side="right"))
            indptr = xp.concatenate([xp.searchsorted(sq[lo:hi], blk, side="left"), xp.asarray([hi - lo])])
            p = sp.csc_matrix((sv[lo:hi], si[lo:hi], indptr), shape=(members.size, blk.size))
            y = solve(op, p, lambda z: xp.asarray(z.sum(axis=0, dtype=xp.float64)).ravel(), _freeze_cols(xp, sp))
            total[blk] += y.sum(axis=0, dtype=xp.float64)  # float64: the same total whatever the block width
            parts.append((None if whole else members[:, None], blk[None, :], y))
    rest = ~dense_comp[comp]
    if bool(rest.any()):
        for rows, cols, y in _pair_blocks(xp, sp, trans, label, size, q[rest], i[rest], v[rest], solve):
            total += bincount(cols, weights=y, minlength=b)
            parts.append((rows, cols, y))
    mass = bincount(q, weights=v, minlength=b)  # rescale each column to its personalization mass
    scale = xp.where(total > 0, mass / xp.where(total > 0, total, 1.0), 0.0).astype(dtype)
    out = xp.zeros((b, n), dtype)  # filled query by query; returned as its (N, B) transpose
    for rows, cols, y in parts:
        if rows is None:
            out[cols[0]] = (y * scale[cols]).T
        else:
            out[cols, rows] = y * scale[cols]
    return out.T, SolverInfo(max(iters), max(resids), max(resids) < tol)


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
    first = xp.searchsorted(label[nodes], xp.arange(ncomp))  # where each hit component starts in ``nodes``
    where = xp.zeros(n, xp.int64)  # a node's index inside its component's block
    where[nodes] = xp.arange(nodes.size) - first[label[nodes]]
    row_nnz = xp.diff(sub.indptr)
    comp_nnz = bincount(label[nodes], weights=row_nnz, minlength=ncomp).astype(xp.int64)
    cum = xp.cumsum(comp_nnz[pc])
    cuts = [0] + xp.searchsorted(cum, xp.arange(1, int(cum[-1]) // PAIR_NNZ + 1) * PAIR_NNZ).tolist() + [pair.size]
    for a, z in zip(cuts[:-1], cuts[1:]):
        if z <= a:
            continue
        cq, cc = pq[a:z], pc[a:z]
        psize = size[cc]
        off = xp.cumsum(psize) - psize  # each pair's first entry in the iterate
        m = int(psize.sum())
        at = _segment_ids(xp, xp.concatenate([off, xp.asarray([m])]), m)  # pair of each iterate entry
        row = first[cc][at] + xp.arange(m) - off[at]  # its row in ``sub``
        lens = row_nnz[row]
        indptr = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(lens)])
        e_row = _segment_ids(xp, indptr, int(indptr[-1]))
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
        y = solve(op, y, lambda w, at=at, k=z - a: bincount(at, weights=w, minlength=k),
                  lambda w, done, at=at: xp.where(done[at], 0, w).astype(w.dtype))
        yield nodes[row], cq[at], y


def expand(out_adj, in_adj, e0, *, depth: int = 1, decay: float = 0.6, budget: int = 30):
    """ReMe-style multi-hop expansion (BFS) from the seeds, for B queries at once.

    out_adj / in_adj: (N, N) 0/1 sparse matrices, row j has j's neighbours in that direction
    (already cut to the first few per node, see ``graph.directed_topn``); e0: (N, B) seed energies.
    A node first reached at hop h gets ``decay · Σ energy of its hop h−1 parents``, capped at
    ``decay`` × the query's largest seed energy; each hop keeps at most ``budget`` new nodes per
    query (largest energy, ties by row). Seeds keep their energy. Returns (N, B).
    """
    xp, _ = namespaces(e0)
    if not 0 <= depth <= 3:
        raise ValueError(f"expand depth={depth}; use 0 to 3 (ReMe's maximum is 3)")
    result = e0.copy()
    reached = e0 != 0
    frontier = e0
    cap = e0.max(axis=0, keepdims=True)
    total = xp.zeros(e0.shape[1], dtype=xp.int64)
    for _ in range(depth):
        nxt = decay * (out_adj @ frontier + in_adj @ frontier)
        nxt = xp.minimum(nxt, decay * cap)
        nxt = xp.where(reached, 0.0, nxt)
        keep = topk_abs_mask(nxt, xp.maximum(budget - total, 0))
        nxt = xp.where(keep, nxt, 0.0)
        total = total + keep.sum(axis=0)
        result = xp.where(keep, nxt, result)
        reached |= keep
        frontier = nxt
        cap = cap * decay
    return result
