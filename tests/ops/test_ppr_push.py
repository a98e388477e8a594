"""Forward-push PPR (``ops.ppr_push``) against the exact solver and networkx: a hand-computed
two-node case, a dangling seed, the ε·degree error bound on random symmetric graphs, top-`keep`
sets equal wherever the bound decides them, a query's result independent of its batch, and the
diffusion stage's ``diffuse.solver`` switch."""

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from pipeline.contract.errors import ConfigError
from pipeline.core import backend
from pipeline.ops.ppr import ppr, ppr_top
from pipeline.ops.ppr_push import ppr_push, ppr_push_top
from tests.helpers.reference import ppr_networkx, topk_reference


def test_two_nodes_by_hand():
    # a – b (weight 1), damping 0.5, seed a. Exact: (1 − d)(I − d·W)⁻¹ e_a = (2/3, 1/3).
    # Push with eps 0.3 (threshold 0.3 at both, degree 1): round 1 pushes a (r = 1): x_a += 0.5,
    # r_b = 0.5; round 2 pushes b: x_b += 0.25, r_a = 0.25 < 0.3, stop. Result x + (1 − d)·r =
    # (0.5 + 0.125, 0.25) = (5/8, 1/4).
    adj = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    pers = sp.csr_matrix(np.array([[1.0], [0.0]]))
    x, info = ppr_push(adj, pers, damping=0.5, eps=0.3)
    assert x.toarray().ravel() == pytest.approx([5 / 8, 1 / 4], abs=1e-12)
    assert info.n_iter == 2 and info.converged and info.residual == pytest.approx(0.25)
    y, _ = ppr(adj, pers.toarray(), damping=0.5, tol=1e-14, max_iter=500)
    assert y.ravel() == pytest.approx([2 / 3, 1 / 3], abs=1e-10)
    err = y.ravel() - x.toarray().ravel()
    assert (err >= 0).all() and (err < 0.3).all()  # within eps · degree


def test_isolated_seed_keeps_its_mass():
    # c has no edge: push keeps (1 − d) at c and loses d; the rescale mass / (mass − lost) gives
    # 1, as the exact solver (and networkx, dangling mass back to the seed) does
    adj = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    pers = sp.csr_matrix(np.array([[0.0], [0.0], [1.0]]))
    x, info = ppr_push(adj, pers, damping=0.5, eps=1e-3)
    assert x.toarray().ravel() == pytest.approx([0.0, 0.0, 1.0])
    assert ppr_networkx(adj, pers.toarray()[:, 0]) == pytest.approx([0.0, 0.0, 1.0])
    assert info.n_iter == 1 and info.converged


def _graph(rng, n: int, m: int):
    """A symmetric weighted graph on ``n`` nodes with a ring (no node without an edge) and ``m``
    random extra edges."""
    ring = np.arange(n)
    src = np.r_[ring, rng.integers(0, n, m)]
    dst = np.r_[(ring + 1) % n, rng.integers(0, n, m)]
    ok = src != dst
    w = rng.uniform(0.1, 1.0, int(ok.sum()))
    a = sp.csr_matrix((w, (src[ok], dst[ok])), shape=(n, n))
    return sp.csr_matrix(a + a.T)


def _seeds(rng, n: int, b: int, per: int = 4):
    cols = np.repeat(np.arange(b), per)
    rows = rng.integers(0, n, cols.size)
    e = rng.uniform(0.2, 1.0, cols.size)
    p = sp.csr_matrix((e, (rows, cols)), shape=(n, b)).toarray()
    return sp.csr_matrix(p / p.sum(axis=0))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("eps", [1e-2, 1e-3, 1e-5])
def test_error_within_eps_times_degree(seed, eps):
    """0 ≤ exact − push < eps · weighted degree at every node of every query (no dangling node,
    so no rescale), the exact side at tolerance 1e-13; checked against networkx for one query."""
    rng = np.random.default_rng(seed)
    adj, pers = _graph(rng, 200, 600), _seeds(rng, 200, 12)
    exact, info = ppr(adj, pers.toarray(), damping=0.5, tol=1e-13, max_iter=1000)
    assert info.converged
    assert exact[:, 0] == pytest.approx(ppr_networkx(adj, pers.toarray()[:, 0]), abs=1e-9)
    x, pinfo = ppr_push(adj, pers, damping=0.5, eps=eps)
    assert pinfo.converged
    err = exact - x.toarray()
    deg = np.asarray(adj.sum(axis=1)).ravel()
    assert err.min() >= -1e-12
    assert (err < eps * deg[:, None]).all()


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_top_keep_equal_where_the_bound_decides(seed):
    """Where the exact k-th and (k+1)-th scores of a query differ by more than eps · max degree, no
    node can cross the cut: push's top-k set must be the exact one. eps is small enough that most
    queries qualify (asserted), and every qualifying query is checked."""
    rng = np.random.default_rng(seed)
    n, b, keep, eps = 300, 16, 20, 1e-6
    adj, pers = _graph(rng, n, 900), _seeds(rng, n, b)
    exact, _ = ppr(adj, pers.toarray(), damping=0.5, tol=1e-13, max_iter=1000)
    node, col, _val, _info = ppr_push_top(adj, pers, n, keep, damping=0.5, eps=eps)
    bound = eps * np.asarray(adj.sum(axis=1)).ravel().max()
    decided = 0
    for q in range(b):
        s = np.sort(exact[:, q])[::-1]
        if s[keep - 1] - s[keep] <= bound:
            continue
        decided += 1
        assert sorted(node[col == q].tolist()) == topk_reference(exact[:, q], keep)
    assert decided >= b // 2


def test_push_top_is_the_push_result_cut():
    """ppr_push_top = the dense push result's top-keep per column (positive, rows < ``rows``),
    as (node, column) sorted by column then node."""
    rng = np.random.default_rng(6)
    n, b, keep, rows = 120, 6, 7, 100
    adj, pers = _graph(rng, n, 300), _seeds(rng, n, b)
    dense = ppr_push(adj, pers, eps=1e-4)[0].toarray()
    node, col, val, _ = ppr_push_top(adj, pers, rows, keep, eps=1e-4)
    want = sorted((q, i) for q in range(b) for i in topk_reference(dense[:rows, q], keep))
    assert list(zip(col.tolist(), node.tolist())) == want
    assert val == pytest.approx(dense[node, col].astype(np.float32))


def test_a_query_does_not_depend_on_its_batch():
    rng = np.random.default_rng(7)
    adj, pers = _graph(rng, 150, 400), _seeds(rng, 150, 10)
    both = ppr_push(adj, pers, eps=1e-4)[0].toarray()
    for q in (0, 4, 9):
        alone = ppr_push(adj, sp.csr_matrix(pers[:, [q]]), eps=1e-4)[0].toarray()[:, 0]
        assert np.array_equal(alone, both[:, q])


def test_push_matches_exact_top_with_tiny_eps_and_dangling():
    """A graph with a dangling (isolated) node among the seeds: with eps 1e-9 push's top lists
    and scores are the exact solver's (scores within 1e-6)."""
    rng = np.random.default_rng(8)
    n = 80
    a = _graph(rng, n - 1, 150)
    adj = sp.csr_matrix(sp.block_diag([a, sp.csr_matrix((1, 1))]))
    pers = _seeds(rng, n, 5).toarray()
    pers[:, 0] = 0
    pers[[n - 1, 3], 0] = [0.5, 0.5]  # column 0 half on the isolated node
    pers = sp.csr_matrix(pers)
    en, ec, ev, _ = ppr_top(adj, pers.toarray(), n, 10, tol=1e-13, max_iter=1000)
    pn, pc, pv, _ = ppr_push_top(adj, pers, n, 10, eps=1e-9)
    assert np.array_equal(en, pn) and np.array_equal(ec, pc)
    assert np.abs(ev - pv).max() < 1e-6


def test_stage_solver_switch():
    """diffuse.run with solver=push and a tiny eps gives the exact solver's graph hits; an unknown
    solver is a ConfigError listing the choices."""
    from pipeline.stages.diffuse import DiffusionParams, run

    nodes = pl.DataFrame({"node_id": [f"n{i}" for i in range(6)], "text": ["x"] * 6})
    queries = pl.DataFrame({"query_id": ["q0", "q1"], "text": ["a", "b"]})
    edges = pl.DataFrame(
        {
            "src": [0, 1, 2, 3, 4],
            "dst": [1, 2, 3, 4, 0],
            "weight": [1.0, 0.5, 2.0, 1.0, 0.3],
            "inhibit": [False] * 5,
        }
    )
    cand = pl.DataFrame({"query_idx": [0, 0, 1], "node_idx": [0, 3, 5], "fused": [1.0, 0.5, 0.8]})
    base = DiffusionParams.defaults().__dict__ | {"method": "ppr", "keep": 3}
    exact = run(cand, nodes, queries, edges, DiffusionParams(**base | {"solver": "exact"}))
    push = run(
        cand, nodes, queries, edges, DiffusionParams(**base | {"solver": "push", "push_eps": 1e-10})
    )
    key = ["query_idx", "node_idx"]
    assert exact.sort(key)[key].equals(push.sort(key)[key])
    assert np.abs(exact.sort(key)["graph"] - push.sort(key)["graph"]).max() < 1e-6
    assert exact.filter(pl.col("query_idx") == 1)["graph"].to_list() == pytest.approx([1.0])
    with pytest.raises(ConfigError, match="choose from"):
        run(cand, nodes, queries, edges, DiffusionParams(**base | {"solver": "pushy"}))


@pytest.mark.gpu
@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_cupy_push_matches_scipy():
    """The same code on cupyx: every estimate within 1e-6 of scipy's (float32 sums in another
    order can move a threshold decision, hence no bit equality), and the top cut runs there."""
    import cupyx.scipy.sparse as cusp

    rng = np.random.default_rng(9)
    adj = _graph(rng, 400, 1500).astype(np.float32)
    pers = _seeds(rng, 400, 20).astype(np.float32)
    cpu = ppr_push(adj, pers, eps=1e-5)[0].toarray()
    gpu = ppr_push(cusp.csr_matrix(adj), cusp.csr_matrix(pers), eps=1e-5)[0].get().toarray()
    assert np.abs(cpu - gpu).max() < 1e-6
    gn, gc, gv, _ = ppr_push_top(cusp.csr_matrix(adj), cusp.csr_matrix(pers), 400, 30, eps=1e-5)
    assert np.abs(gv - cpu[gn, gc]).max() < 1e-6 and np.bincount(gc).max() <= 30


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_threads_split_the_columns_with_the_same_bits(workers):
    """Columns solved on ``workers`` threads (contiguous parts, uneven when b % workers ≠ 0) give
    the bits of one solve of all columns, and the same solver info."""
    rng = np.random.default_rng(11)
    adj, pers = _graph(rng, 200, 600), _seeds(rng, 200, 10)
    one = ppr_push_top(adj, pers, 180, 9, eps=1e-4, workers=1)
    split = ppr_push_top(adj, pers, 180, 9, eps=1e-4, workers=workers)
    for a, b in zip(one[:3], split[:3]):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert one[3] == split[3]
    dense = ppr_push(adj, pers, eps=1e-4)[0].toarray()  # and it is the one-solve result itself
    assert np.array_equal(split[2], dense[split[0], split[1]].astype(np.float32))


@pytest.mark.parametrize("packed", [True, False])
def test_cut_keeps_each_columns_largest_ties_lower_node(monkeypatch, packed):
    # column 0: 0.7 at node 2, then 0.5 at nodes 1 and 5 (tie: node 1); column 1 keeps both
    import pipeline.ops.ppr_push as pp

    if not packed:  # the packed (column, score, node) key "does not fit": the stable-sort path
        monkeypatch.setattr(pp, "KEY_BITS", 0)
    col = np.array([0, 0, 0, 1, 1], np.int64)
    node = np.array([1, 2, 5, 0, 3], np.int64)
    val = np.array([0.5, 0.7, 0.5, 0.1, 0.2], np.float32)
    c, n, v = pp._cut(np, col, node, val, 2, 2)
    got = sorted(zip(c.tolist(), n.tolist(), v.tolist()))
    want = [(0, 1, 0.5), (0, 2, 0.7), (1, 0, 0.1), (1, 3, 0.2)]
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert [g[2] for g in got] == pytest.approx([w[2] for w in want])
    assert v.dtype == np.float32


@pytest.mark.parametrize("packed", [True, False])
def test_by_column_is_the_pair_order_sort_of_the_triples(monkeypatch, packed):
    """``_by_column`` (one sort of packed (column, node, score bits) keys, decoded) gives the triples
    of ``int_order`` with gathers, bit for bit, on distinct pairs with tied and extreme scores."""
    import pipeline.ops.ppr_push as pp
    from pipeline.ops.topk import int_order

    if not packed:
        monkeypatch.setattr(pp, "KEY_BITS", 0)
    rng = np.random.default_rng(4)
    pairs = rng.choice(300 * 40, size=2000, replace=False)
    node, col = (pairs // 40).astype(np.int64), (pairs % 40).astype(np.int64)
    val = rng.choice(np.array([1e-30, 0.25, 0.5, 1.0, 3e38, np.inf], np.float32), 2000)
    val[::3] = rng.random(len(val[::3])).astype(np.float32) + np.float32(1e-6)
    order = int_order(col, node)
    got = pp._by_column(node, col, val)
    for a, b in zip(got, (node[order], col[order], val[order])):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    empty = pp._by_column(node[:0], col[:0], val[:0])
    assert [len(a) for a in empty] == [0, 0, 0]


@pytest.mark.parametrize("seed, dtype", [(11, np.float32), (12, np.float64)])
def test_query_major_parts_give_the_node_major_bits(monkeypatch, seed, dtype):
    """The solver runs on the (queries × nodes) transpose, in parts of ``PUSH_COLS`` queries: every
    score has the bits of the textbook node-major push (``reference.ppr_push_node_major``: the
    ``trans @ front`` sums over a canonical row), on a float32 graph with an isolated node,
    float32 or float64 seeds with a duplicated entry, and more queries than one part (the
    top-``keep`` cut too)."""
    import pipeline.ops.ppr_push as pp
    from tests.helpers.reference import ppr_push_node_major

    rng = np.random.default_rng(seed)
    n, b = 160, 23
    g = _graph(rng, n - 1, 500).astype(np.float32)  # node n - 1: no edge
    adj = sp.csr_matrix((g.data, g.indices, np.r_[g.indptr, g.indptr[-1]]), shape=(n, n))
    s = _seeds(rng, n, b)
    s = sp.csr_matrix(s + sp.csr_matrix(([0.3], ([n - 1], [3])), shape=(n, b)))
    r0 = int(s.indptr[5])  # node 5's first entry is stored twice: the duplicates add up
    pers = sp.csr_matrix(
        (
            np.r_[s.data[: r0 + 1], 0.05, s.data[r0 + 1 :]],
            np.r_[s.indices[: r0 + 1], s.indices[r0], s.indices[r0 + 1 :]],
            s.indptr + (np.arange(n + 1) > 5),
        ),
        shape=(n, b),
        dtype=dtype,
    )
    assert not pers.has_canonical_format
    want = ppr_push_node_major(adj, pers, eps=1e-4)
    got, info = ppr_push(adj, pers, eps=1e-4)
    assert info.converged and got.dtype == want.dtype == dtype
    assert got.toarray().tobytes() == want.toarray().tobytes()
    monkeypatch.setattr(pp, "PUSH_COLS", 4)
    assert len(pp._spans(b, 2)) == 6
    node, c, val, _ = ppr_push_top(adj, pers, n - 1, 9, eps=1e-4, workers=2)
    dense = want.toarray()
    keep = sorted((q, i) for q in range(b) for i in topk_reference(dense[: n - 1, q], 9))
    assert list(zip(c.tolist(), node.tolist())) == keep
    assert val.tobytes() == dense[node, c].astype(np.float32).tobytes()
