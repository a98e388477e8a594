"""Batched graph diffusion over a sparse adjacency, one column per query.

``pedsa`` is ST-BME's spreading activation (``spec/reference-algorithms.md`` §1.b.1) run for a block
of queries at once: the frontier is an (N, B) array, a step is one sparse product, and the
per-query top-K pruning is a column-wise mask. ``ppr`` is personalised PageRank by power iteration
(HippoRAG). Both take ``xp``/``sp`` from their inputs (numpy+scipy or cupy+cupyx).
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.backend import namespaces


@dataclass
class SolverInfo:
    n_iter: int
    residual: float
    converged: bool


def topk_abs_mask(x, k):
    """Boolean (N, B) mask keeping each column's k largest |x| (ties: lower row index first), x≠0.

    ``k`` is an int, or a (B,) integer array giving each column its own k.
    """
    xp, _ = namespaces(x)
    n, b = x.shape
    a = xp.abs(x)
    if xp.ndim(k) == 0:
        if k >= n:
            return a > 0
        thr = -xp.partition(-a, int(k) - 1, axis=0)[int(k) - 1]  # k-th largest |x| per column
        kk = xp.full(b, int(k))
    else:
        kk = xp.asarray(k)
        if b == 0:
            return a > 0
        srt = -xp.sort(-a, axis=0)
        thr = srt[xp.clip(kk - 1, 0, n - 1), xp.arange(b)]
        thr = xp.where(kk > 0, thr, xp.inf)
    gt = a > thr
    eq = a == thr
    need = kk - gt.sum(axis=0)
    keep_eq = eq & (xp.cumsum(eq, axis=0) <= need)
    return (gt | keep_eq) & (a > 0)


def pedsa(adj, inhib, e0, *, steps: int = 2, decay: float = 0.6, alpha: float = 0.15, inhibit_mult: float = 2.0,
          clamp: float = 2.0, min_energy: float = 0.01, top_k: int = 100,
          seeds_in_result: bool = True):
    """Spreading activation for B queries.

    adj: (N, N) symmetric sparse weights of normal edges (parallel edges summed);
    inhib: (N, N) symmetric sparse weights of inhibitory edges, or None;
    e0: (N, B) seed energies (0 where not a seed).
    Returns (N, B) energies: per node the value of largest |E| over the seeds and every step
    (BME). With ``seeds_in_result=False`` the seeds' own energy is left out of the maximum, so the
    result is what a node received through the graph.
    """
    xp, _ = namespaces(e0)
    seeds = xp.clip(e0, -clamp, clamp)
    seeds = xp.where(xp.abs(seeds) >= min_energy, seeds, 0.0)
    is_seed = seeds != 0
    result = seeds.copy() if seeds_in_result else xp.zeros_like(seeds)
    frontier = seeds
    for _ in range(steps):
        nxt = (decay * (1.0 - alpha)) * (adj @ frontier)
        if inhib is not None and inhib.nnz:
            nxt = nxt - (decay * inhibit_mult) * (inhib @ xp.abs(frontier))
        nxt = xp.clip(nxt, -clamp, clamp)
        nxt = xp.where(xp.abs(nxt) >= min_energy, nxt, 0.0)
        if alpha > 0:
            mixed = xp.clip((1.0 - alpha) * nxt + alpha * seeds, -clamp, clamp)
            nxt = xp.where(is_seed, xp.where(xp.abs(mixed) >= min_energy, mixed, 0.0), nxt)
        if int((nxt != 0).sum(axis=0).max(initial=0)) > top_k:  # pruning only when a column needs it
            nxt = xp.where(topk_abs_mask(nxt, top_k), nxt, 0.0)
        result = xp.where(xp.abs(nxt) > xp.abs(result), nxt, result)
        frontier = nxt
        if not bool((frontier != 0).any()):
            break
    return result


def ppr(adj, personalization, *, damping: float = 0.5, max_iter: int = 100, tol: float = 1e-8):
    """Personalised PageRank for B seed distributions at once.

    adj: (N, N) sparse non-negative weights (row = source); personalization: (N, B), columns sum to 1.
    Dangling nodes send their mass back to the personalization. Returns ((N, B) scores, SolverInfo).
    """
    xp, _ = namespaces(personalization)
    out_w = xp.asarray(adj.sum(axis=1)).ravel()
    inv = xp.where(out_w > 0, 1.0 / xp.where(out_w > 0, out_w, 1.0), 0.0)
    dangling = out_w == 0
    trans = adj.T.tocsr()
    p = personalization
    x = p.copy()
    resid = float("inf")
    for it in range(1, max_iter + 1):
        lost = (x * dangling[:, None]).sum(axis=0)
        new = damping * (trans @ (x * inv[:, None])) + (damping * lost + (1.0 - damping)) * p
        resid = float(xp.abs(new - x).sum(axis=0).max()) if x.size else 0.0
        x = new
        if resid < tol:
            return x, SolverInfo(it, resid, True)
    return x, SolverInfo(max_iter, resid, False)


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
