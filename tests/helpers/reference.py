"""Reference implementations the parity tests compare with: a sort-based top-k, networkx's
PageRank, the textbook forward push and the per-element dot. Slow and obvious on purpose. (ST-BME's
literal per-query PEDSA loop is :mod:`pipeline.bme.propagate`: scripts/bench uses it too.)"""

import numpy as np


def ppr_networkx(adj, pers):
    """networkx's personalised PageRank (damping 0.5, dangling mass back to ``pers``) of one query."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(adj.shape[0]))
    c = adj.tocoo()
    g.add_weighted_edges_from(zip(c.row.tolist(), c.col.tolist(), c.data.tolist()))
    p = {i: float(pers[i]) for i in range(adj.shape[0])}
    r = nx.pagerank(g, alpha=0.5, personalization=p, dangling=p, tol=1e-15, max_iter=2000)
    return np.array([r[i] for i in range(adj.shape[0])])


def topk_reference(values, k, keep_zero=False):
    """Indices of the ``k`` largest ``values`` of one query (ties: lower index first), by a full
    sort; zeros left out unless ``keep_zero``."""
    order = sorted(range(len(values)), key=lambda j: (-values[j], j))
    return sorted(j for j in order[: max(k, 0)] if keep_zero or values[j] != 0)


def ppr_push_node_major(adj, pers, damping=0.5, eps=1e-4, max_iter=100):
    """Forward push in its textbook (N, B) node-major form with scipy.sparse: each round moves
    every residual at or above ``eps`` × weighted degree (``front``), spreading ``trans @ front``;
    the result is the sum of the fronts in round order plus the last residual, times
    ``(1 − d) · mass / (mass − lost)`` per column (a dangling push loses ``d``), in the inputs'
    float type (at least float32)."""
    import scipy.sparse as sp

    n, dt = adj.shape[0], np.result_type(pers.dtype, adj.dtype, np.float32)
    out_w = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.where(out_w > 0, 1.0 / np.where(out_w > 0, out_w, 1.0), 0.0)
    t = sp.csr_matrix(adj.T)
    t.sum_duplicates()
    trans = sp.csr_matrix(
        ((damping * t.data * inv[t.indices]).astype(dt), t.indices, t.indptr), shape=(n, n)
    )
    thr = (eps * out_w).astype(dt)
    loses = (damping - np.asarray(trans.sum(axis=0)).ravel()).astype(np.float64)
    r = sp.csr_matrix(pers, dtype=dt)
    r.sum_duplicates()
    r.eliminate_zeros()
    mass = np.asarray(r.sum(axis=0, dtype=np.float64)).ravel()
    lost, x = np.zeros(r.shape[1]), sp.csr_matrix(r.shape, dtype=dt)
    for _ in range(max_iter):
        act = r.data >= np.repeat(thr, np.diff(r.indptr))
        if not act.any():
            break
        front, rest = r.copy(), r.copy()
        front.data[~act] = 0
        rest.data[act] = 0
        front.eliminate_zeros()
        rest.eliminate_zeros()
        x = x + front
        lost += front.T @ loses
        r = rest + trans @ front
    x = x + r
    scale = np.where(mass > lost, mass / np.where(mass > lost, mass - lost, 1.0), 0.0)
    x = x.tocsr()
    x.data = (x.data * ((1.0 - damping) * scale)[x.indices]).astype(dt)
    return x


def fold_dot(a, b) -> np.float32:
    """The dot of two float32 vectors in :mod:`pipeline.ops.pairdot`'s order, one numpy float32
    scalar operation at a time (a per-element loop, no array arithmetic): products, then while
    more than one term is left, an odd count first adds its last term to term 0, then term j
    adds term j + w/2."""
    p = [np.float32(x) * np.float32(y) for x, y in zip(a, b)]
    w = len(p)
    if w == 0:
        return np.float32(0.0)
    while w > 1:
        if w % 2:
            p[0] = p[0] + p[w - 1]
            w -= 1
        h = w // 2
        p = [p[j] + p[j + h] for j in range(h)]
        w = h
    return np.float32(p[0])
