"""ReMe-style multi-hop expansion (breadth-first, budgeted) from the seeds, batched over queries."""

from __future__ import annotations

from pipeline.core.backend import namespaces
from pipeline.ops.topk import topk_abs_mask


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
