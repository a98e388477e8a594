"""Validity windows honoured in every stage that walks edges (issue 13, item 4).

One tiny graph: node 0 (titled "Falcon") is the seed / anchor; edge 0–1 closed on 2025-01-10, edge
0–2 open since 2025-01-01, edge 0–3 opens on 2025-02-01. At the reference time 2025-01-20 only 0–2
is live, so every stage reaches node 2 and neither node 1 nor node 3; with the window ignored
(``now=None``) they reach all three. Expected node ids are read off the graph by hand.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from pipeline.stages import anchors, diffuse, graph, signals

UTC = dt.timezone.utc
NOW = dt.datetime(2025, 1, 20, tzinfo=UTC)
TS = pl.Datetime("us", "UTC")


def tiny():
    nodes = pl.DataFrame(
        {
            "node_id": ["n0", "n1", "n2", "n3"],
            "text": ["Falcon plan", "old", "current", "later"],
            "title": ["Falcon", None, None, None],
            "type": ["fact", "event", "event", "event"],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["what about Falcon"]})
    edges = pl.DataFrame(
        {
            "src": [0, 0, 0],
            "dst": [1, 2, 3],
            "weight": [1.0, 1.0, 1.0],
            "inhibit": [False, False, False],
            "relation": ["edge"] * 3,
            "valid_from": [
                None,
                dt.datetime(2025, 1, 1, tzinfo=UTC),
                dt.datetime(2025, 2, 1, tzinfo=UTC),
            ],
            "valid_to": [dt.datetime(2025, 1, 10, tzinfo=UTC), None, None],
        },
        schema_overrides={
            "src": pl.Int64,
            "dst": pl.Int64,
            "weight": pl.Float32,
            "valid_from": TS,
            "valid_to": TS,
        },
    )
    return nodes, queries, edges


def reached(method: str, now) -> set[int]:
    nodes, queries, edges = tiny()
    cand = pl.DataFrame(
        {"query_idx": [0], "node_idx": [0], "fused": [1.0]},
        schema={"query_idx": pl.Int64, "node_idx": pl.Int64, "fused": pl.Float32},
    )
    p = diffuse.DiffusionParams.defaults(method=method, seed_k=1, steps=2, min_energy=0.0, top_k=10)
    out = diffuse.run(cand, nodes, queries, edges, p, now=now)
    return set(out.filter(pl.col("graph") > 0)["node_idx"].to_list()) - {0}


def test_pedsa_spreads_only_over_live_edges():
    assert reached("pedsa", NOW) == {2}
    assert reached("pedsa", None) == {1, 2, 3}


def test_ppr_spreads_only_over_live_edges():
    assert reached("ppr", NOW) == {2}
    assert reached("ppr", None) == {1, 2, 3}


def test_expand_walks_only_live_edges():
    assert reached("expand", NOW) == {2}
    assert reached("expand", None) == {1, 2, 3}


def test_directed_topn_keeps_only_live_edges():
    _n, _q, edges = tiny()
    out, inn = graph.directed_topn(edges, 4, None, 10, NOW)
    assert sorted(zip(*out.nonzero())) == [(0, 2)]
    assert sorted(zip(*inn.nonzero())) == [(2, 0)]
    assert sorted(zip(*graph.directed_topn(edges, 4, None, 10)[0].nonzero())) == [
        (0, 1),
        (0, 2),
        (0, 3),
    ]


def test_adjacency_keeps_only_live_edges():
    _n, _q, edges = tiny()
    adj, _inh = graph.adjacency(edges, 4, None, NOW)
    assert sorted(zip(*adj.nonzero())) == [(0, 2), (2, 0)]


def test_cross_recall_follows_only_live_edges():
    nodes, queries, edges = tiny()
    found = anchors.find(nodes, queries, min_len=3)
    assert found.rows() == [(0, 0, 2.0)]  # "Falcon" is in the query text
    live = anchors.cross(found, edges, nodes, queries, mult=1.5, now=NOW)
    assert live.rows() == [(0, 2, 1.5)]  # the event over the open edge, 1.5 × weight 1
    assert anchors.cross(found, edges, nodes, queries, mult=1.5)["node_idx"].to_list() == [1, 2, 3]


def test_signals_degree_counts_only_live_edges():
    nodes, _q, edges = tiny()
    table = signals.compute(nodes, edges, NOW, signals.SignalsParams.defaults())
    assert table["in_degree"].to_list() == [0, 0, 1, 0]


def test_a_run_uses_the_reference_time_for_windows(compose, tmp_path):
    """End to end: the run passes the query's reference time to diffusion. Only the lexical channel
    finds n0 ("Falcon"); n2 is reached over the open edge, n1 and n3 only over edges not live at
    the query's ``now``; with every window open they are recalled too."""
    from pipeline.contract.dataset import Dataset
    from pipeline.run import runner

    nodes, queries, edges = tiny()
    ids = nodes["node_id"]
    raw = edges.with_columns(src=ids.gather(edges["src"]), dst=ids.gather(edges["dst"])).drop(
        "inhibit", "relation"
    )
    queries = queries.with_columns(now=pl.lit(NOW, TS))
    cfg = compose(
        [
            "preset=bm25",
            "diffuse=ppr",
            "score.terms={fused: 1.0, graph: 1.0}",
            "graph.temporal=false",
            "embed=hashing",
            "report=false",
            "k=4",
        ]
    )

    def recalled(e):
        runner.run(cfg, tmp_path / "run", dataset=Dataset("w", nodes, queries, e))
        return set(pl.read_parquet(tmp_path / "run" / "recall.parquet")["node_id"].to_list())

    assert recalled(raw) == {"n0", "n2"}
    assert recalled(raw.drop("valid_from", "valid_to")) == {"n0", "n1", "n2", "n3"}
