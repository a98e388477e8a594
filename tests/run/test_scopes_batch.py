"""Many scopes in one run (issue #16): a run over many workspaces gives, for every query group, the
rows that group gives when it is run alone as its own dataset (only the nodes it may see, its own
queries) — nested scopes, overlapping scope lists, a viewer with private notes, archived notes,
explicit edges across workspaces, a query over the whole corpus, a query with its own ``now``.
And the index helpers the grouped path uses equal their straightforward definitions."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contract.dataset import Dataset
from pipeline.ops import scope as scope_ops
from pipeline.ops.scope import EdgeIndex, in_scope, run_groups, scope_groups, visible
from pipeline.synth.workspaces import make
from tests.helpers.isolated import fresh_run

RECIPES = {
    "best": ["preset=best"],
    "reme+signals": [
        "preset=reme",
        "signals=default",
        "graph.knn_k=2",
        "graph.knn_threshold=0.3",
        "graph.mentions=true",
        "score.factors=[reme_inbound,reme_community,reme_recency]",
    ],
}
COMMON = ["embed=hashing", "report=false", "k=5", "graph.hubs.max_df=0.5"]


def corpus() -> Dataset:
    ds = make(4, notes=10, queries=2, per_doc=4, seed=5)
    ids = ds.nodes["node_id"]
    nodes = ds.nodes.with_columns(
        visibility=pl.when(ids.is_in(["u0-n2", "u0-n7"])).then(
            pl.lit(["alice"], pl.List(pl.String))
        ),
        archived=ids.is_in(["u1-n1", "u1-n5"]),
    )
    extra = pl.DataFrame(
        {
            "query_id": ["nested", "overlap-01", "overlap-12", "alice", "everything", "dated"],
            "text": [
                "what did Paris say about the garden",
                "budget with Alice Moreau",
                "the concert in Oslo",
                "what about the piano",
                "Project Lisbon report",
                "the train with Dana Ruiz",
            ],
            "doc_scope": [["u0/d1"], ["u1", "u0"], ["u2", "u1", "u1"], ["u0"], None, ["u3"]],
            "viewer": [None, None, None, "alice", None, None],
            "now": [None, None, None, None, None, dt.datetime(2025, 1, 20, tzinfo=dt.timezone.utc)],
        },
        schema_overrides={"doc_scope": pl.List(pl.String), "now": pl.Datetime("us", "UTC")},
    )
    queries = pl.concat([ds.queries, extra], how="diagonal_relaxed")
    across = pl.DataFrame(
        {
            "src": ["u0-n1", "u2-n0", "u0-n2"],
            "dst": ["u1-n2", "u3-n5", "u0-n3"],
            "relation": "related",
            "weight": pl.Series([1.0, 1.0, 1.0], dtype=pl.Float32),
        }
    )
    return Dataset("workspaces", nodes, queries, pl.concat([ds.edges, across]))


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_each_group_alone_gives_the_full_runs_rows(compose, tmp_path, recipe):
    ds = corpus()
    cfg = compose([*RECIPES[recipe], *COMMON])
    # every run its own cache, output folder and memo (isolated.fresh_run)
    full = fresh_run(cfg, tmp_path, "all", dataset=ds).recall()
    nodes = ds.nodes.sort("node_id")
    groups = run_groups(nodes, ds.queries, False, None)
    assert len(groups) >= 9 and sum(len(qs) for *_k, qs, _t in groups) == ds.queries.height
    for i, (_key, rows, qs, _now) in enumerate(groups):
        alone = Dataset("alone", nodes[rows], ds.queries[qs], ds.edges)
        want = fresh_run(cfg, tmp_path, f"g{i}", dataset=alone).recall()
        got = full.filter(pl.col("query_id").is_in(ds.queries[qs]["query_id"].implode()))
        assert want.height > 0
        assert got.equals(want), f"group {i}: {ds.queries[qs]['query_id'].to_list()}"


def reference_groups(nodes: pl.DataFrame, queries: pl.DataFrame) -> list[tuple]:
    """Scope groups by string matching per scope and a visibility pass per group (the old path)."""
    keys: dict = {}
    for qi, (s, v) in enumerate(zip(queries["doc_scope"].to_list(), queries["viewer"].to_list())):
        keys.setdefault((None if s is None else tuple(sorted(set(s))), v), []).append(qi)
    docs = nodes["doc_id"].fill_null("").to_numpy().astype(str)
    base = ~nodes["archived"].fill_null(False).to_numpy()
    return [
        (
            (s, v),
            np.flatnonzero(base & in_scope(docs, s) & visible(nodes["visibility"].to_list(), v)),
            qs,
        )
        for (s, v), qs in keys.items()
    ]


DOC = st.lists(st.sampled_from(["a", "b", "ab", ""]), min_size=1, max_size=3).map("/".join)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    docs=st.lists(st.one_of(st.none(), DOC), min_size=1, max_size=12),
    scopes=st.lists(
        st.one_of(st.none(), st.lists(st.one_of(DOC, DOC.map(lambda d: d + "/")), max_size=3)),
        min_size=1,
        max_size=6,
    ),
    private=st.lists(st.booleans(), min_size=12, max_size=12),
    archived=st.lists(st.booleans(), min_size=12, max_size=12),
    join=st.booleans(),
)
def test_scope_groups_equal_the_string_matching_definition(docs, scopes, private, archived, join):
    """Both membership paths (the join for many scopes, string matching for a few) give the rows of
    the definition."""
    n = len(docs)
    nodes = pl.DataFrame(
        {
            "doc_id": docs,
            "archived": archived[:n],
            "visibility": [["v1"] if p else None for p in private[:n]],
        },
        schema={"doc_id": pl.String, "archived": pl.Boolean, "visibility": pl.List(pl.String)},
    )
    queries = pl.DataFrame(
        {"doc_scope": scopes, "viewer": ["v1" if i % 2 else None for i in range(len(scopes))]},
        schema={"doc_scope": pl.List(pl.String), "viewer": pl.String},
    )
    saved, scope_ops.JOIN_ABOVE = scope_ops.JOIN_ABOVE, 0 if join else 10**9
    try:
        got = scope_groups(nodes, queries)
    finally:
        scope_ops.JOIN_ABOVE = saved
    want = reference_groups(nodes, queries)
    assert [k for k, *_ in got] == [k for k, *_ in want]
    for (_k, rows, qs), (_k2, rows2, qs2) in zip(got, want):
        assert rows.tolist() == rows2.tolist() and qs.tolist() == list(qs2)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=25),
    rows=st.sets(st.integers(0, 5)),
)
def test_edge_index_gives_the_edges_inside_a_group_in_table_order(pairs, rows):
    ids = [f"n{i}" for i in range(6)]  # n6, n7 are not nodes: dangling ends
    nodes = pl.DataFrame({"node_id": ids})
    edges = pl.DataFrame(
        {
            "src": [f"n{a}" for a, _ in pairs],
            "dst": [f"n{b}" for _, b in pairs],
            "k": list(range(len(pairs))),
        },
        schema={"src": pl.String, "dst": pl.String, "k": pl.Int64},
    )
    rows = np.array(sorted(rows), dtype=np.int64)
    inside = {ids[r] for r in rows}
    want = [k for k, (a, b) in enumerate(pairs) if f"n{a}" in inside and f"n{b}" in inside]
    assert EdgeIndex(nodes, edges).within(rows)["k"].to_list() == want
    assert EdgeIndex(nodes, None).within(rows) is None
    assert Counter(want) == Counter(set(want))
