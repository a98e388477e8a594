"""PageRank / Leiden / components dispatch: cuGraph with device=cuda when it imports, the CPU otherwise.

No GPU here: the cuGraph path runs against a stand-in module that keeps cuGraph's documented
contract (a graph holds only the vertices its edge list names; ``pagerank`` returns a frame of
``vertex``/``pagerank``, ``leiden`` a (``vertex``/``partition`` frame, modularity) pair), computed
with networkx. References are independent: networkx on the whole graph, a power iteration here.
"""

import sys
import types

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from pipeline.core import backend
from pipeline.ops import graphalgo
from pipeline.ops.ppr import components

# 0→1, 0→2 (twice: weights add), 1→2, 2→0, 2→3; 3 dangling; 4 and 5 isolated
SRC = np.array([0, 0, 0, 1, 2, 2])
DST = np.array([1, 2, 2, 2, 0, 3])
W = np.array([1.0, 1.5, 0.5, 1.0, 1.0, 0.5])
N = 6


def _power_iteration(src, dst, w, n, d=0.85, iters=500):
    out = np.zeros(n)
    np.add.at(out, src, w)
    x = np.full(n, 1.0 / n)
    for _ in range(iters):
        nxt = np.zeros(n)
        np.add.at(nxt, dst, d * x[src] * w / out[src])
        x = nxt + (1 - d) / n + d * x[out == 0].sum() / n
    return x


def _fake_cugraph():
    """cuGraph's documented surface, computed by networkx over the vertices the edge list names."""
    lib = types.ModuleType("cugraph")

    class Graph:
        def __init__(self, directed=False):
            self.directed = directed

        def from_cudf_edgelist(self, df, source, destination, edge_attr=None, renumber=True):
            self.nx = nx.DiGraph() if self.directed else nx.Graph()
            for s, t, wt in zip(df[source], df[destination], df[edge_attr]):
                self.nx.add_edge(int(s), int(t), weight=float(wt))

    def pagerank(g, alpha=0.85, max_iter=100, tol=1e-5):
        pr = nx.pagerank(g.nx, alpha=alpha, max_iter=max_iter, tol=1e-14, weight="weight")
        return pd.DataFrame({"vertex": list(pr), "pagerank": list(pr.values())})

    def leiden(g, resolution=1.0, random_state=None):
        comms = nx.community.louvain_communities(g.nx, resolution=resolution, seed=random_state)
        rows = [
            (v, 100 + c) for c, members in enumerate(comms) for v in members
        ]  # arbitrary labels
        return pd.DataFrame(rows, columns=["vertex", "partition"]), 0.0

    lib.Graph, lib.pagerank, lib.leiden = Graph, pagerank, leiden
    return lib


@pytest.fixture
def fresh():
    backend.reset()
    yield
    backend.reset()


@pytest.fixture
def fake_cugraph(monkeypatch, fresh):
    cudf = types.ModuleType("cudf")
    cudf.DataFrame = pd.DataFrame
    monkeypatch.setitem(sys.modules, "cudf", cudf)
    monkeypatch.setitem(sys.modules, "cugraph", _fake_cugraph())


def test_pagerank_cpu_matches_a_power_iteration(fresh):
    got = graphalgo.pagerank(SRC, DST, W, N, device="cpu")
    np.testing.assert_allclose(got, _power_iteration(SRC, DST, W, N), atol=1e-9)
    assert backend.GRAPH_IMPL["pagerank"] == "scipy" and backend.FALLBACKS == []


def test_cuda_without_cugraph_falls_back_to_cpu(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "cugraph", None)  # import cugraph → ImportError
    got = graphalgo.pagerank(SRC, DST, W, N, device="cuda")
    np.testing.assert_allclose(got, _power_iteration(SRC, DST, W, N), atol=1e-9)
    comm = graphalgo.leiden(SRC, DST, N, device="cuda")
    assert (
        comm.tolist()[4:] == [comm[4], comm[4] + 1] and comm[4] > comm[:4].max()
    )  # isolated: alone
    assert backend.GRAPH_IMPL == {"pagerank": "scipy", "leiden": "leidenalg", "components": "scipy"}
    assert len(backend.FALLBACKS) == 1 and "cugraph does not import" in backend.FALLBACKS[0]


def test_pagerank_cugraph_path_extends_to_isolated_nodes(fake_cugraph):
    got = graphalgo.pagerank(SRC, DST, W, N, device="cuda")
    g = nx.DiGraph()
    g.add_nodes_from(range(N))
    for s, t, wt in zip(SRC, DST, W):
        g.add_edge(int(s), int(t), weight=g.get_edge_data(s, t, {"weight": 0.0})["weight"] + wt)
    ref = nx.pagerank(
        g, alpha=0.85, tol=1e-14, weight="weight"
    )  # the whole graph, isolated nodes included
    np.testing.assert_allclose(got, [ref[i] for i in range(N)], atol=1e-9)
    assert backend.GRAPH_IMPL == {"pagerank": "cugraph"} and backend.FALLBACKS == []


def test_leiden_cugraph_path_renumbers_and_keeps_isolated_nodes_alone(fake_cugraph):
    tri = np.array(
        [[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [2, 3], [1, 1]]
    )  # + a self-loop
    got = graphalgo.leiden(tri[:, 0], tri[:, 1], 8, device="cuda")
    assert got.tolist() == [
        0,
        0,
        0,
        1,
        1,
        1,
        2,
        3,
    ]  # two triangles; 6 and 7 isolated; by smallest node
    assert backend.GRAPH_IMPL == {"leiden": "cugraph"}


def test_components_cpu_match_networkx(fresh):
    adj = sp.csr_matrix(
        (np.ones(3), ([0, 3, 4], [1, 2, 3])), shape=(6, 6)
    )  # 0→1, 3→2, 4→3; 5 alone
    got = np.asarray(components(adj, "cpu"))
    ref = list(nx.weakly_connected_components(nx.DiGraph(list(zip(*adj.nonzero()))))) + [{5}]
    for comp in ref:
        assert len({int(got[v]) for v in comp}) == 1
    assert len(set(got.tolist())) == len(ref) == 3
    assert backend.GRAPH_IMPL == {"components": "scipy"}


def test_run_manifest_names_the_graph_libraries_and_the_faiss_distribution(compose, tmp_path):
    import importlib.metadata

    from pipeline.run import runner
    from tests.helpers.paths import tiny_ws_overrides

    cfg = compose(
        [
            *tiny_ws_overrides(),
            "preset=best",
            "embed=hashing",
            "signals=default",
            "report=false",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    man = runner.run(cfg, tmp_path / "run")["manifest"]
    assert man["graph_algorithms"] == {
        "pagerank": "scipy",
        "leiden": "leidenalg",
        "components": "scipy",
    }
    assert man["versions"]["faiss-cpu"] == importlib.metadata.version("faiss-cpu")
    assert not any(d.startswith(("cupy", "cugraph", "faiss-gpu")) for d in man["versions"])


# 0→1, 3→2, 4→3, 5→6 stored as an explicit zero (scipy counts it as an edge); 7 alone
ADJ = sp.csr_matrix((np.array([1.0, 1.0, 1.0, 0.0]), ([0, 3, 4, 5], [1, 2, 3, 6])), shape=(8, 8))
WEAK = [{0, 1}, {2, 3, 4}, {5, 6}, {7}]  # by hand


def _cugraph_components(calls: list, fail: Exception | None = None, short: bool = False):
    """``cugraph.connected_components`` as cuGraph's source has it: ``connection="weak"`` needs an
    undirected graph (``directed=True`` raises ValueError) and an undirected graph's matrix is
    taken as given, so it must be symmetric; labels by networkx's connected components."""

    def connected_components(G, directed=True, connection="weak", return_labels=True):
        calls.append({"directed": directed, "connection": connection})
        if fail is not None:
            raise fail
        if connection == "weak" and directed:
            raise ValueError("input graph must be undirected")
        if (G != G.T).nnz:
            raise ValueError("an undirected graph needs a symmetric matrix")
        g = nx.Graph()
        g.add_nodes_from(range(G.shape[0] - short))
        g.add_edges_from(zip(*G.nonzero()))
        labels = np.zeros(g.number_of_nodes(), np.int32)
        for c, members in enumerate(nx.connected_components(g)):
            labels[list(members)] = c
        return labels.max() + 1, labels

    lib = types.ModuleType("cugraph")
    lib.connected_components = connected_components
    return lib


def _partition(labels) -> list[set[int]]:
    groups: dict[int, set[int]] = {}
    for v, c in enumerate(np.asarray(labels).tolist()):
        groups.setdefault(c, set()).add(v)
    return sorted(groups.values(), key=min)


def test_components_on_cugraph_get_the_undirected_symmetric_graph(monkeypatch, fresh):
    calls: list = []
    monkeypatch.setitem(sys.modules, "cugraph", _cugraph_components(calls))
    got = components(ADJ, "cuda")
    assert calls == [{"directed": False, "connection": "weak"}]
    assert _partition(got) == WEAK
    assert backend.GRAPH_IMPL == {"components": "cugraph"} and backend.FALLBACKS == []


@pytest.mark.parametrize(
    ("fail", "short", "said"),
    [
        (ValueError("input graph must be undirected"), False, "ValueError: input graph must"),
        (RuntimeError("CUDA error: out of memory"), False, "RuntimeError: CUDA error"),
        (None, True, "ValueError: 7 labels for 8 nodes"),  # a vertex dropped from the answer
    ],
)
def test_components_fall_back_to_scipy_when_cugraph_fails(monkeypatch, fresh, fail, short, said):
    calls: list = []
    monkeypatch.setitem(sys.modules, "cugraph", _cugraph_components(calls, fail, short))
    got = components(ADJ, "cuda")
    assert len(calls) == 1 and _partition(got) == WEAK
    assert backend.GRAPH_IMPL == {"components": "scipy"}
    assert len(backend.FALLBACKS) == 1
    assert backend.FALLBACKS[0].startswith(f"cugraph connected_components failed ({said}")
    assert backend.FALLBACKS[0].endswith("; weak components on cpu (scipy)")


def test_pagerank_and_leiden_fall_back_to_cpu_when_cugraph_raises(monkeypatch, fake_cugraph):
    """A cuGraph call that raises (cuGraph refuses inputs the CPU path takes) gives the CPU answer,
    noted in the fallbacks and in GRAPH_IMPL, instead of failing the run."""
    lib = sys.modules["cugraph"]

    def boom(*_a, **_k):
        raise ValueError("unsupported graph")

    monkeypatch.setattr(lib, "pagerank", boom)
    monkeypatch.setattr(lib, "leiden", boom)
    got = graphalgo.pagerank(SRC, DST, W, N, device="cuda")
    np.testing.assert_allclose(got, _power_iteration(SRC, DST, W, N), atol=1e-9)
    comm = graphalgo.leiden(SRC, DST, N, device="cuda")
    backend.reset()
    np.testing.assert_array_equal(comm, graphalgo.leiden(SRC, DST, N, device="cpu"))
    monkeypatch.setattr(lib, "pagerank", boom)  # reset() above cleared the notes: run once more
    graphalgo.pagerank(SRC, DST, W, N, device="cuda")
    assert backend.GRAPH_IMPL["pagerank"] == "scipy"
    assert backend.FALLBACKS == [
        "cugraph pagerank failed (ValueError: unsupported graph); pagerank on cpu"
    ]
