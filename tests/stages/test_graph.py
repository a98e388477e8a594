"""Graph construction: explicit, temporal, mention and kNN edges; adjacency and validity windows."""

import datetime as dt
from collections import Counter

import numpy as np
import polars as pl
import pytest

from pipeline.stages.graph import GraphParams, adjacency, build

NODES = pl.DataFrame(
    {
        "node_id": ["a", "b", "c", "d", "e"],
        "text": [
            "Paris is in France",
            "I met Ada Lovelace",
            "Ada Lovelace wrote notes",
            "about Parisian food",
            "x",
        ],
        "title": ["France", "Ada Lovelace", "Notes", "Paris", None],
        "doc_id": ["s1", "s1", "s1", "s2", "s2"],
        "seq": [2, 0, 1, 0, 1],
    }
)


def _pairs(e, rel):
    f = e.filter(pl.col("relation") == rel)
    return sorted(zip(f["src"].to_list(), f["dst"].to_list(), f["weight"].to_list()))


def test_temporal_chain_follows_seq_within_doc():
    e = build(NODES, None, GraphParams.defaults())
    assert _pairs(e, "temporal") == [
        (1, 2, pytest.approx(0.2)),
        (2, 0, pytest.approx(0.2)),
        (3, 4, pytest.approx(0.2)),
    ]


def test_mentions_are_whole_word_and_case_sensitive():
    e = build(NODES, None, GraphParams.defaults(temporal=False, mentions=True))
    # a mentions "Paris" → d ("France" is its own title: no self-loop); b mentions only its own title;
    # c mentions "Ada Lovelace" → b; d's "Parisian" is not the whole word "Paris" → none
    assert _pairs(e, "mention") == [(0, 3, 1.0), (2, 1, 1.0)]
    e2 = build(
        NODES.with_columns(pl.col("text").str.replace("Ada", "ada")),
        None,
        GraphParams.defaults(temporal=False, mentions=True, mention_case_sensitive=False),
    )
    assert _pairs(e2, "mention") == [(0, 3, 1.0), (2, 1, 1.0)]


def test_explicit_edges_dangling_self_loops_and_relation_weights():
    edges = pl.DataFrame(
        {
            "src": ["a", "a", "zz", "b"],
            "dst": ["b", "a", "a", "c"],
            "relation": ["knows", "x", "x", "next_turn"],
            "weight": [0.5, 1.0, 1.0, 1.0],
        }
    )
    skipped = Counter()
    e = build(
        NODES,
        edges,
        GraphParams.defaults(temporal=False, relation_weights={"next_turn": 0.25}),
        skipped=skipped,
    )
    assert _pairs(e, "knows") == [(0, 1, 0.5)] and _pairs(e, "next_turn") == [(1, 2, 0.25)]
    assert skipped == Counter({"edge_dangling": 1, "edge_self_loop": 1})


def test_knn_edges_threshold():
    xb = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    xb /= np.linalg.norm(xb, axis=1, keepdims=True)
    e = build(
        NODES.head(3), None, GraphParams.defaults(temporal=False, knn_k=1, knn_threshold=0.9), xb=xb
    )
    assert [(s, d) for s, d, _ in _pairs(e, "knn")] == [(0, 1), (1, 0)]


def test_adjacency_is_symmetric_adds_parallel_edges_and_honours_windows():
    t = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    e = pl.DataFrame(
        {
            "src": [0, 0, 1, 2],
            "dst": [1, 1, 2, 0],
            "weight": [0.5, 0.25, 1.0, 0.7],
            "inhibit": [False, False, False, True],
            "relation": ["r"] * 4,
            "valid_to": [None, None, t, None],
        },
        schema_overrides={"valid_to": pl.Datetime("us", "UTC")},
    )
    adj, inh = adjacency(e, 3)
    np.testing.assert_allclose(adj.toarray(), [[0, 0.75, 0], [0.75, 0, 1.0], [0, 1.0, 0]])
    assert inh.toarray()[0, 2] == pytest.approx(0.7) and inh.toarray()[2, 0] == pytest.approx(0.7)
    later, _ = adjacency(e, 3, now=t + dt.timedelta(days=1))
    assert later.toarray()[1, 2] == 0.0  # expired edge ignored
    sub, _ = adjacency(e, 3, rows=np.array([1, 2]))
    np.testing.assert_allclose(sub.toarray(), [[0, 1.0], [1.0, 0]])
