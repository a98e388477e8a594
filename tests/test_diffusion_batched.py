"""Sparse-frontier PEDSA and component-restricted PPR: parity with the per-query references on
inputs that reach every code path (long rows, ties, inhibitory edges, empty seeds, sparse input,
several components, isolated and dangling seeds, large query blocks)."""
import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops import diffusion
from pipeline.ops.diffusion import pedsa, ppr
from test_diffusion import _sym, pedsa_reference


def _edges(rng, n, m, weights):
    pairs = rng.integers(0, n, size=(m, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    w = rng.choice(weights, len(pairs))
    return [(int(a), int(b), float(x)) for (a, b), x in zip(pairs, w)]


def _seeds(rng, n, b, per, energies):
    e0 = np.zeros((n, b))
    for q in range(b):
        if q % 7 == 3:
            continue  # an empty query
        idx = rng.choice(n, size=per, replace=False)
        e0[idx, q] = rng.choice(energies, per)
    return e0


@pytest.mark.parametrize("k", [1, 3, 20])
def test_pedsa_long_rows_and_exact_ties_match_reference(k):
    """Dyadic weights/energies make every sum exact, so ties are real ties; rows reach ~100 entries
    per query, far above k (the sampled-threshold path of the top-k)."""
    rng = np.random.default_rng(k)
    n, b = 150, 40
    normal = _edges(rng, n, 1500, [0.5, 1.0, 2.0])
    inhib = _edges(rng, n, 60, [0.5, 1.0])
    e0 = _seeds(rng, n, b, 4, [0.5, 1.0, 2.0, 4.0])  # 4.0 is clamped to 2
    kw = dict(steps=3, decay=0.5, alpha=0.5, inhibit_mult=2.0, top_k=k)
    got = pedsa(_sym(n, normal), _sym(n, inhib), e0, **kw)
    for q in range(b):
        seeds = {int(i): float(e0[i, q]) for i in np.flatnonzero(e0[:, q])}
        ref = pedsa_reference(n, normal, inhib, seeds, steps=3, decay=0.5, alpha=0.5, mult=2.0, k=k)
        np.testing.assert_allclose(got[:, q], ref, atol=1e-12, err_msg=f"query {q}")


def test_pedsa_sparse_input_gives_sparse_equal_output_float32():
    rng = np.random.default_rng(5)
    n, b = 300, 64
    normal = _edges(rng, n, 1200, [0.3, 0.7, 1.0])
    inhib = _edges(rng, n, 80, [0.4])
    adj, inh = _sym(n, normal).astype(np.float32), _sym(n, inhib).astype(np.float32)
    e0 = _seeds(rng, n, b, 6, [0.2, 1.0, 1.7]).astype(np.float32)
    dense = pedsa(adj, inh, e0, top_k=10)
    sparse = pedsa(adj, inh, sp.csc_matrix(e0), top_k=10)
    assert sp.issparse(sparse) and sparse.shape == (n, b)
    np.testing.assert_array_equal(sparse.toarray(), dense)
    for q in range(0, b, 9):
        seeds = {int(i): float(e0[i, q]) for i in np.flatnonzero(e0[:, q])}
        ref = pedsa_reference(n, normal, inhib, seeds, k=10)
        np.testing.assert_allclose(dense[:, q], ref, atol=1e-6)


def test_pedsa_without_teleport_or_seeds_in_result():
    rng = np.random.default_rng(9)
    n = 80
    normal = _edges(rng, n, 400, [0.5, 1.0])
    e0 = _seeds(rng, n, 12, 3, [1.0, 2.0])
    got = pedsa(_sym(n, normal), None, e0, alpha=0.0, top_k=5, seeds_in_result=False)
    for q in range(12):
        seeds = {int(i): float(e0[i, q]) for i in np.flatnonzero(e0[:, q])}
        ref = pedsa_reference(n, normal, [], seeds, alpha=0.0, k=5)
        # the reference always starts from the seeds; without them only received energy counts
        diff = got[:, q] - ref
        assert np.abs(diff[e0[:, q] == 0]).max(initial=0) < 1e-12


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


def _nx_ppr(adj, pers):
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(adj.shape[0]))
    c = adj.tocoo()
    g.add_weighted_edges_from(zip(c.row.tolist(), c.col.tolist(), c.data.tolist()))
    p = {i: float(pers[i]) for i in range(adj.shape[0])}
    r = nx.pagerank(g, alpha=0.5, personalization=p, dangling=p, tol=1e-15, max_iter=2000)
    return np.array([r[i] for i in range(adj.shape[0])])


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("paths", ["auto", "all-pairs", "all-dense", "tiny-chunks"])
def test_ppr_components_match_networkx(monkeypatch, directed, paths):
    rng = np.random.default_rng(11)
    adj, n = _components_graph(rng, directed)
    if paths == "all-pairs":
        monkeypatch.setattr(diffusion, "DENSE_WORK", 10 ** 12)
    elif paths == "all-dense":
        monkeypatch.setattr(diffusion, "DENSE_MIN", 1)
        monkeypatch.setattr(diffusion, "DENSE_WORK", 0)
    elif paths == "tiny-chunks":
        monkeypatch.setattr(diffusion, "PAIR_NNZ", 50)
        monkeypatch.setattr(diffusion, "BLOCK_BYTES", 1)
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
            np.testing.assert_allclose(got[:, q], _nx_ppr(adj, pers[:, q]), atol=1e-9, err_msg=f"query {q}")


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
        ref = np.asarray(g.personalized_pagerank(vertices=range(n), directed=False, damping=0.5,
                                                 reset=pers[:, q].tolist(), weights="weight",
                                                 implementation="prpack"))
        np.testing.assert_allclose(got[:, q], ref / ref.sum(), atol=1e-6)


def test_pedsa_large_block_equals_small_blocks_and_reference():
    """2,000 queries in one call (frontier, top-k and merge over all of them at once) equal the same
    queries in blocks of 7 and, on a sample, the per-query reference."""
    rng = np.random.default_rng(21)
    n, b = 500, 2000
    normal = _edges(rng, n, 2500, [0.25, 0.5, 1.0])
    inhib = _edges(rng, n, 100, [0.5])
    adj, inh = _sym(n, normal), _sym(n, inhib)
    e0 = sp.csc_matrix(_seeds(rng, n, b, 5, [0.5, 1.0, 2.0]))
    kw = dict(decay=0.5, alpha=0.5, top_k=8)
    whole = pedsa(adj, inh, e0, **kw).toarray()
    parts = np.hstack([pedsa(adj, inh, e0[:, s:s + 7], **kw).toarray() for s in range(0, b, 7)])
    np.testing.assert_array_equal(whole, parts)
    for q in rng.choice(b, 25, replace=False):
        col = e0[:, q].toarray().ravel()
        seeds = {int(i): float(col[i]) for i in np.flatnonzero(col)}
        ref = pedsa_reference(n, normal, inhib, seeds, decay=0.5, alpha=0.5, k=8)
        np.testing.assert_allclose(whole[:, q], ref, atol=1e-12, err_msg=f"query {q}")


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
    single = np.concatenate([ppr(a, pers[:, [j]], damping=0.5, tol=1e-6)[0] for j in range(40)], axis=1)
    halves = np.concatenate([ppr(a, pers[:, :17], damping=0.5, tol=1e-6)[0],
                             ppr(a, pers[:, 17:], damping=0.5, tol=1e-6)[0]], axis=1)
    assert info.converged and np.array_equal(full, single) and np.array_equal(full, halves)
