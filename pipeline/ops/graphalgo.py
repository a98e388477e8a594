"""Whole-graph algorithms with one dispatch: PageRank, Leiden communities, weakly connected components.

Each function takes the device: with ``device="cuda"`` it runs on cuGraph when ``cugraph`` imports,
written against cuGraph's documented API (``cugraph.Graph`` + ``from_cudf_edgelist``,
``cugraph.pagerank``, ``cugraph.leiden``); otherwise (or when the import or the cuGraph call fails, logged
once in ``backend.FALLBACKS``) on the CPU: PageRank by ``ops.ppr.ppr``, Leiden by igraph + leidenalg.
``backend.GRAPH_IMPL`` records which library computed each, for the manifest. The third, weakly
connected components, is ``ops.ppr.components`` (PPR restricts each query to its seeds'
components), with the same dispatch.

cuGraph's graph holds only the vertices named in its edge list, so isolated nodes are added back
here: PageRank rescales the result to the whole node set (see ``_pagerank_cugraph``), Leiden gives
each isolated node its own community. Community ids are renumbered 0.. in order of each community's
smallest node index on both paths, so they do not depend on either library's labelling.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from pipeline.core import backend
from pipeline.ops.ppr import ppr

log = logging.getLogger(__name__)


def _edge_frame(src: np.ndarray, dst: np.ndarray, w: np.ndarray | None):
    import cudf

    cols = {"src": np.asarray(src, np.int32), "dst": np.asarray(dst, np.int32)}
    if w is not None:
        cols["w"] = np.asarray(w, np.float32)
    return cudf.DataFrame(cols)


def renumber_first(raw: np.ndarray) -> np.ndarray:
    """Labels renumbered 0.. in order of each label's first (smallest) index."""
    raw = np.asarray(raw)
    if raw.size == 0:
        return np.zeros(0, np.int64)
    _, first, inv = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inv.ravel()]


def pagerank(
    src: np.ndarray,
    dst: np.ndarray,
    w: np.ndarray,
    n: int,
    *,
    damping: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 1000,
    device: str = "cpu",
) -> np.ndarray:
    """Global PageRank on the weighted directed graph src→dst (parallel edges add; weights ≤ 0
    dropped); dangling mass spread uniformly over all ``n`` nodes, as ``networkx.pagerank``.
    Returns (n,) float64 summing to 1."""
    lib = backend.cugraph(device, "pagerank") if n else None
    if n == 0:
        return np.zeros(0)
    keep = w > 0
    adj = sp.coo_matrix(
        sp.csr_matrix((w[keep].astype(np.float64), (src[keep], dst[keep])), shape=(n, n))
    )
    src, dst, w = (
        adj.row.astype(np.int64),
        adj.col.astype(np.int64),
        adj.data,
    )  # parallel edges summed
    cpu = lambda: _pagerank_cpu(src, dst, w, n, damping, tol, max_iter)  # noqa: E731
    if lib is not None and src.size:
        gpu = lambda: _pagerank_cugraph(lib, src, dst, w, n, damping, tol, max_iter)  # noqa: E731
        return backend.on_cugraph("pagerank", gpu, cpu)
    return cpu()


def _pagerank_cpu(src, dst, w, n, damping, tol, max_iter) -> np.ndarray:
    adj = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    x, info = ppr(adj, np.full((n, 1), 1.0 / n), damping=damping, max_iter=max_iter, tol=tol)
    if not info.converged:
        log.warning(
            "pagerank did not converge in %d iterations (residual %.3g)", info.n_iter, info.residual
        )
    x = x[:, 0].astype(np.float64)
    return x / x.sum()


def _pagerank_cugraph(lib, src, dst, w, n, damping, tol, max_iter) -> np.ndarray:
    """cuGraph PageRank on the m vertices named by edges, extended to all n nodes.

    With uniform teleport and dangling mass spread uniformly, PageRank is x = c·u where
    u = (I − dP)⁻¹·1 (P: column-stochastic over the non-dangling nodes) and c is one scalar; an
    isolated node has u = 1. cuGraph returns r = u / Σu over its m vertices; summing u = 1 + dPu
    gives Σu = m / (1 − d·Σ_{non-dangling} r), so the n-node result is (r·Σu, 1 for each isolated
    node) / (Σu + n − m).
    """
    g = lib.Graph(directed=True)
    g.from_cudf_edgelist(
        _edge_frame(src, dst, w), source="src", destination="dst", edge_attr="w", renumber=True
    )
    # float32 on the GPU: cuGraph's docs advise tol ≥ 1e-5 (too small a tol does not converge)
    df = lib.pagerank(g, alpha=damping, max_iter=max_iter, tol=max(tol, 1e-6))
    vert, r = df["vertex"].to_numpy().astype(np.int64), df["pagerank"].to_numpy().astype(np.float64)
    r = r / r.sum()
    m = vert.size
    nondangling = np.isin(vert, src)
    total_u = m / (1.0 - damping * r[nondangling].sum())
    out = np.ones(n)
    out[vert] = r * total_u
    return out / (total_u + n - m)


def leiden(
    src: np.ndarray,
    dst: np.ndarray,
    n: int,
    *,
    resolution: float = 1.0,
    seed: int = 13,
    device: str = "cpu",
) -> np.ndarray:
    """Leiden communities of the undirected, unweighted simple graph (ReMe design): (n,) int64 ids,
    isolated nodes on their own, renumbered by smallest member."""
    lib = backend.cugraph(device, "leiden") if n else None
    if n == 0:
        return np.zeros(0, np.int64)
    loop = src == dst
    src, dst = src[~loop], dst[~loop]
    cpu = lambda: _leiden_cpu(src, dst, n, resolution, seed)  # noqa: E731
    if lib is not None and src.size:
        gpu = lambda: _leiden_cugraph(lib, src, dst, n, resolution, seed)  # noqa: E731
        return renumber_first(backend.on_cugraph("leiden", gpu, cpu))
    return renumber_first(cpu())


def _leiden_cpu(src, dst, n, resolution, seed) -> np.ndarray:
    import igraph as ig
    import leidenalg

    g = ig.Graph(n=n, edges=list(zip(src.tolist(), dst.tolist())), directed=False)
    g.simplify(multiple=True, loops=True)
    part = leidenalg.find_partition(
        g,
        leidenalg.RBConfigurationVertexPartition,
        resolution_parameter=resolution,
        n_iterations=-1,
        seed=seed,
    )
    return np.asarray(part.membership, np.int64)


def _leiden_cugraph(lib, src, dst, n, resolution, seed) -> np.ndarray:
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)  # simple graph: one unit edge per pair
    g = lib.Graph(directed=False)
    g.from_cudf_edgelist(
        _edge_frame(pairs[:, 0], pairs[:, 1], np.ones(len(pairs))),
        source="src",
        destination="dst",
        edge_attr="w",
        renumber=True,
    )
    parts, _modularity = lib.leiden(g, resolution=resolution, random_state=seed)
    label = parts["partition"].to_numpy().astype(np.int64)
    raw = np.full(n, -1, np.int64)
    raw[parts["vertex"].to_numpy().astype(np.int64)] = label
    alone = (
        raw < 0
    )  # isolated nodes (not in cuGraph's graph): a label of their own, above cuGraph's
    raw[alone] = label.max() + 1 + np.arange(int(alone.sum()))
    return raw
