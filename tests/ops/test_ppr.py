"""Personalised PageRank, restricted to the seeds' components: parity with networkx and igraph on
every code path (several components, isolated and dangling seeds, dense and per-pair solvers, tiny
chunks), sparse input, and a query's result independent of its batch."""

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops import ppr as ppr_module
from pipeline.ops.ppr import ppr
from tests.helpers.reference import ppr_networkx


def test_ppr_matches_networkx():
    import networkx as nx

    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 0, 1.0), (2, 3, 1.0), (3, 4, 0.5)]
    g = nx.DiGraph()
    g.add_nodes_from(range(5))
    g.add_weighted_edges_from(edges)
    adj = sp.csr_matrix(
        (np.array([w for *_, w in edges]), ([a for a, *_ in edges], [b for _, b, _ in edges])),
        shape=(5, 5),
    )
    pers = np.zeros((5, 2))
    pers[0, 0] = 1.0
    pers[[1, 3], 1] = 0.5
    got, info = ppr(adj, pers, damping=0.5, tol=1e-12, max_iter=500)
    assert info.converged
    for q in range(2):
        ref = nx.pagerank(
            g,
            alpha=0.5,
            personalization={i: pers[i, q] for i in range(5)},
            dangling={i: pers[i, q] for i in range(5)},
            tol=1e-14,
            max_iter=1000,
        )
        assert got[:, q] == pytest.approx([ref[i] for i in range(5)], abs=1e-8)


def _components_graph(rng, directed):
    """A 70-node component, a 120-node one, 30 pairs and 40 isolated nodes (shuffled labels)."""
    blocks, start = [], 0
    for size, m in [(70, 300), (120, 500)] + [(2, 1)] * 30:
        e = rng.integers(0, size, size=(m, 2)) + start
        if size == 2:
            e = np.array([[start, start + 1]])
        blocks.append(e[e[:, 0] != e[:, 1]])
        start += size
    n = start + 40
    e = np.concatenate(blocks)
    perm = rng.permutation(n)
    e = perm[e]
    w = rng.uniform(0.1, 1.0, len(e))
    a = sp.csr_matrix((w, (e[:, 0], e[:, 1])), shape=(n, n))
    return (a if directed else (a + a.T).tocsr()), n


def _force_paths(monkeypatch, paths: str) -> None:
    """Route every component through one solver path (``auto``: the module's own choice)."""
    if paths == "all-pairs":
        monkeypatch.setattr(ppr_module, "DENSE_WORK", 10**12)
    elif paths == "all-dense":
        monkeypatch.setattr(ppr_module, "DENSE_MIN", 1)
        monkeypatch.setattr(ppr_module, "DENSE_WORK", 0)
    elif paths == "tiny-chunks":
        monkeypatch.setattr(ppr_module, "PAIR_NNZ", 50)
        monkeypatch.setattr(ppr_module, "BLOCK_BYTES", 1)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("paths", ["auto", "all-pairs", "all-dense", "tiny-chunks"])
def test_ppr_components_match_networkx(monkeypatch, directed, paths):
    rng = np.random.default_rng(11)
    adj, n = _components_graph(rng, directed)
    _force_paths(monkeypatch, paths)
    b = 600  # the 120-node component is reached by enough queries for the dense path (auto)
    pers = np.zeros((n, b))
    for q in range(b):
        if q % 97 == 5:
            continue  # an empty query stays zero
        idx = rng.choice(n, size=int(rng.integers(1, 6)), replace=False)
        pers[idx, q] = rng.uniform(0.1, 1.0, len(idx))
    pers /= np.maximum(pers.sum(axis=0), 1e-300)
    got, info = ppr(adj, pers, damping=0.5, tol=1e-12, max_iter=500)
    assert info.converged and info.residual < 1e-12
    assert not got[:, 5].any()
    np.testing.assert_allclose(got.sum(axis=0), (pers.sum(axis=0) > 0).astype(float), atol=1e-9)
    for q in rng.choice(b, 12, replace=False):
        if pers[:, q].any():
            np.testing.assert_allclose(
                got[:, q], ppr_networkx(adj, pers[:, q]), atol=1e-9, err_msg=f"query {q}"
            )


def test_ppr_sparse_and_dense_personalization_agree_float32():
    rng = np.random.default_rng(2)
    adj, n = _components_graph(rng, False)
    adj = adj.astype(np.float32)
    pers = np.zeros((n, 300), np.float32)
    for q in range(300):
        idx = rng.choice(n, size=10, replace=False)
        pers[idx, q] = rng.uniform(0.1, 2.0, 10)
    pers /= pers.sum(axis=0)
    a, ia = ppr(adj, pers, tol=1e-6)
    b, ib = ppr(adj, sp.csc_matrix(pers), tol=1e-6)
    np.testing.assert_array_equal(a, b)
    assert ia == ib and a.dtype == np.float32
    ref = ppr(adj.astype(np.float64), pers.astype(np.float64), tol=1e-12)[0]
    assert np.abs(a - ref).max() < 1e-6


def test_ppr_matches_igraph_on_weighted_undirected_graph():
    ig = pytest.importorskip("igraph")
    rng = np.random.default_rng(4)
    adj, n = _components_graph(rng, False)
    u = sp.triu(adj, k=1).tocoo()
    g = ig.Graph(n=n, edges=np.c_[u.row, u.col].tolist(), directed=False)
    g.es["weight"] = u.data.tolist()
    pers = np.zeros((n, 20))
    for q in range(20):
        idx = rng.choice(n, size=8, replace=False)
        pers[idx, q] = rng.uniform(0.1, 1.0, 8)
    pers /= pers.sum(axis=0)
    got, _ = ppr(adj, pers, damping=0.5, tol=1e-12, max_iter=500)
    for q in range(20):
        ref = np.asarray(
            g.personalized_pagerank(
                vertices=range(n),
                directed=False,
                damping=0.5,
                reset=pers[:, q].tolist(),
                weights="weight",
                implementation="prpack",
            )
        )
        np.testing.assert_allclose(got[:, q], ref / ref.sum(), atol=1e-6)


@pytest.mark.parametrize("n, nnz", [(300, 900), (5000, 4000), (3000, 30000)])
def test_ppr_result_of_a_query_does_not_depend_on_its_batch(n, nnz):
    """Each (query, component) part stops at its own convergence step, so a query gets the same
    bits alone, in a block of 17, or with 40 others (Ray shards and the recall cache rely on it)."""
    rng = np.random.default_rng(0)
    r, c = rng.integers(0, n, nnz), rng.integers(0, n, nnz)
    a = sp.coo_matrix((rng.uniform(0.1, 1, nnz).astype(np.float32), (r, c)), shape=(n, n)).tocsr()
    a = (a + a.T).tocsr()
    pers = np.zeros((n, 40), np.float32)
    for j in range(40):
        s = rng.choice(n, 5, replace=False)
        pers[s, j] = rng.uniform(0.1, 1, 5)
    pers /= pers.sum(0)
    full, info = ppr(a, pers, damping=0.5, tol=1e-6)
    single = np.concatenate(
        [ppr(a, pers[:, [j]], damping=0.5, tol=1e-6)[0] for j in range(40)], axis=1
    )
    halves = np.concatenate(
        [
            ppr(a, pers[:, :17], damping=0.5, tol=1e-6)[0],
            ppr(a, pers[:, 17:], damping=0.5, tol=1e-6)[0],
        ],
        axis=1,
    )
    assert info.converged and np.array_equal(full, single) and np.array_equal(full, halves)


def test_ppr_result_does_not_depend_on_column_block_width(monkeypatch):
    """Each column is its own sparse × dense arithmetic and stops on its own residual, so the block
    width (cache-sized on the CPU, far wider on a GPU) changes no bit of the result."""
    rng = np.random.default_rng(5)
    adj, n = _components_graph(rng, False)
    pers = np.zeros((n, 300))
    for q in range(300):
        idx = rng.choice(n, size=3, replace=False)
        pers[idx, q] = rng.uniform(0.1, 1.0, 3)
    pers /= pers.sum(axis=0)
    monkeypatch.setattr(ppr_module, "DENSE_MIN", 1)
    monkeypatch.setattr(ppr_module, "DENSE_WORK", 0)  # every component by column blocks
    out = {}
    for budget in (1, 1 << 23, 1 << 40):  # width 8, the CPU's, one block per component
        monkeypatch.setattr(ppr_module, "BLOCK_BYTES", budget)
        out[budget] = ppr(adj, pers, damping=0.5, tol=1e-10)[0]
    assert np.array_equal(out[1], out[1 << 23]) and np.array_equal(out[1], out[1 << 40])


@pytest.mark.parametrize("paths", ["auto", "all-pairs", "all-dense", "tiny-chunks"])
@pytest.mark.parametrize("keep", [0, 1, 7, 1000])
def test_ppr_top_is_the_dense_result_cut_to_its_top_entries(monkeypatch, paths, keep):
    # reference: the dense result's first `rows` nodes, each column cut by topk_abs_mask, nonzero
    from pipeline.ops.ppr import ppr_top
    from pipeline.ops.topk import topk_abs_mask

    rng = np.random.default_rng(5)
    adj, n = _components_graph(rng, False)
    adj = adj.astype(np.float32)
    _force_paths(monkeypatch, paths)
    b = 600
    pers = np.zeros((n, b), np.float32)
    for q in range(b):
        idx = rng.choice(n, size=int(rng.integers(1, 6)), replace=False)
        pers[idx, q] = rng.uniform(0.1, 1.0, len(idx))
    pers /= pers.sum(axis=0)
    rows = n - 50  # the last nodes play the hubs: diffused through, never returned
    dense, _ = ppr(adj, sp.csc_matrix(pers))
    out = dense[:rows]
    if keep and rows > keep:
        out = np.where(topk_abs_mask(np.ascontiguousarray(out), keep), out, 0)
    c, r = np.nonzero(out.T > 0)  # by column, then node
    node, col, val, _info = ppr_top(adj, sp.csc_matrix(pers), rows, keep)
    np.testing.assert_array_equal(node, r)
    np.testing.assert_array_equal(col, c)
    np.testing.assert_array_equal(val, out[r, c])  # bit for bit


@pytest.mark.parametrize("paths", ["auto", "tiny-chunks"])
def test_ppr_top_of_a_column_does_not_depend_on_the_column_order(monkeypatch, paths):
    """The harness's shuffled-query path (h26-fix-ppr): the same seed columns in another order put
    other (query, component) pairs together in each ``PAIR_NNZ`` chunk; every column keeps its
    bits, its top-``keep`` cut (ties by node) and its rescale."""
    from pipeline.ops.ppr import ppr_top

    rng = np.random.default_rng(11)
    adj, n = _components_graph(rng, False)
    adj = adj.astype(np.float32)
    _force_paths(monkeypatch, paths)
    b = 300
    pers = np.zeros((n, b), np.float32)
    for q in range(b):
        idx = rng.choice(n, size=int(rng.integers(1, 6)), replace=False)
        pers[idx, q] = rng.uniform(0.1, 1.0, len(idx))
    pers /= pers.sum(axis=0)
    perm = rng.permutation(b)
    rows, keep = n - 50, 7

    def by_column(pers, cols):
        node, col, val, _info = ppr_top(adj, sp.csc_matrix(pers), rows, keep)
        return {int(q): (node[col == j].tolist(), val[col == j].tobytes()) for j, q in enumerate(cols)}  # fmt: skip

    assert by_column(pers[:, perm], perm) == by_column(pers, range(b))
