"""Query plan: BME's context blend weights, intent split, query_rewrite; multi-part dense merge."""

import numpy as np
import polars as pl
import pytest

from pipeline.channels.candidates import dense_pairs
from pipeline.stages.query import intent_segments, plan


def test_blend_weights_renormalised_over_present_parts():
    q = pl.DataFrame(
        {
            "query_id": ["a", "b", "c"],
            "text": ["where is the farm", "budget?", "x  y"],
            "context": [["old user turn", "assistant said this"], ["only assistant"], None],
        }
    )
    p = plan(q, blend=True)
    a = p.filter(pl.col("query_idx") == 0)
    assert a["part"].to_list() == ["current", "assistant", "previous_user"]
    assert a["weight"].to_list() == pytest.approx([0.7, 0.2, 0.1])
    b = p.filter(pl.col("query_idx") == 1)
    # ST-BME rounds each weight to 3 decimals (Math.round(w / total * 1000) / 1000): 0.7/0.9 → 0.778
    assert b["weight"].to_list() == [0.778, 0.222]
    c = p.filter(pl.col("query_idx") == 2)
    assert c.rows() == [(2, "x y", 1.0, "current")]  # whitespace collapsed, weight 1 alone
    assert plan(q).height == 3 and plan(q)["weight"].to_list() == [1.0, 1.0, 1.0]  # blend off


def test_intent_split_is_bme_s_punctuation_and_chinese_connectives():
    # splitIntentSegments (retrieval-enhancer.js): [，,。.；;！!？?\n]+ | 顺便 另外 还有 对了 然后 而且
    # 并且 同时; no English connective: "also", "by the way" stay inside their segment
    assert intent_segments("book the flight, also check the hotel by the way call mom") == [
        "book the flight",
        "also check the hotel by the way call mom",
    ]
    assert intent_segments("first this and then that, besides the rest") == [
        "first this and then that",
        "besides the rest",
    ]
    assert intent_segments("规则一，然后规则二。另外规则三") == [
        "规则一",
        "规则二",
        "规则三",
    ]  # BME's own example
    # a text that does not split is its one segment, punctuation stripped (BME keeps it)
    assert intent_segments("a single intent") == ["a single intent"]
    assert intent_segments("Harbor fire?") == ["Harbor fire"]
    assert intent_segments("a, b, c, d, e, fgh, ijk") == ["fgh", "ijk"]  # length >= 3
    assert intent_segments("one1, two2, thr3, fou4, fiv5") == ["one1", "two2", "thr3", "fou4"]
    p = plan(
        pl.DataFrame({"query_id": ["a"], "text": ["book the flight; check the hotel"]}),
        intent_split=True,
    )
    assert p["part"].to_list() == ["current", "segment", "segment"] and p["weight"].to_list() == [
        1.0,
        1.0,
        1.0,
    ]


def test_a_lone_segment_is_a_lexical_source_and_a_dense_part():
    from pipeline.bme.lexcover import lexical
    from pipeline.stages.query import lexical_sources

    # buildLexicalQuerySources: uniqueStrings([currentText, ...segments]), case-insensitive
    assert lexical_sources("Harbor fire?") == ["Harbor fire?", "Harbor fire"]
    assert lexical_sources("a single intent") == ["a single intent"]
    assert lexical_sources("Rescue, rescue") == ["Rescue, rescue", "Rescue"]
    # a query equal to a node's name plus "?": the segment matches the name exactly (P = 1)
    # instead of by containment (P = 0.92); T: exact 0.65, not 0.55
    # lexical = max(P, 0.82·S, 0.7·T, 0.75·P + 0.35·S + 0.2·T)
    assert lexical(lexical_sources("Harbor fire?"), ["Harbor fire"], []) == 1.0
    assert lexical(["Harbor fire?"], ["Harbor fire"], []) == pytest.approx(0.92)
    q = pl.DataFrame({"query_id": ["a", "b"], "text": ["Harbor fire?", "harbor fire"]})
    p = plan(q, intent_split=True)
    assert p.rows() == [
        (0, "Harbor fire?", 1.0, "current"),
        (0, "Harbor fire", 1.0, "segment"),
        (1, "harbor fire", 1.0, "current"),  # its segment is the text itself: not repeated
    ]


def test_query_rewrite_replaces_the_dense_text():
    q = pl.DataFrame(
        {"query_id": ["a", "b"], "text": ["orig a", "orig b"], "query_rewrite": ["better a", None]}
    )
    assert plan(q)["text"].to_list() == ["better a", "orig b"]


def test_dense_pairs_take_max_of_weighted_cosine():
    xb = np.eye(3, dtype=np.float32)
    xp = np.array(
        [[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0]], dtype=np.float32
    )  # query 0 has parts 0, 1; query 1 has 2
    got = dense_pairs(
        xp,
        np.array([0, 0, 1]),
        np.array([0.7, 0.3, 1.0]),
        xb,
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
    )
    assert got.tolist() == pytest.approx([0.7, 0.3, 0.6, 0.8])


def test_bme_prefilter_per_part_top_n_positive_then_merged_by_max():
    from pipeline.channels.candidates import CandidateInputs, ChannelSettings, generate
    from pipeline.stages.channels import DenseParams

    # nodes e0 e1 e2 e3; query 0 = part A (weight 0.7) = e0, part B (0.3) = 0.6·e1 + 0.8·e2
    xb = np.eye(4, dtype=np.float32)
    xp = np.array([[1, 0, 0, 0], [0, 0.6, 0.8, 0]], dtype=np.float32)
    nodes = pl.DataFrame({"node_id": ["a", "b", "c", "d"], "text": ["t"] * 4})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["t"]})

    def hits(**kw):
        out = generate(
            nodes,
            queries,
            ChannelSettings(("dense",), DenseParams.defaults(**kw)),
            CandidateInputs(xb, xp, part_q=np.array([0, 0]), part_w=np.array([0.7, 0.3])),
        )
        return dict(
            zip(
                out.sort("dense_rank")["node_idx"].to_list(),
                out.sort("dense_rank")["dense"].to_list(),
            )
        )

    # cosine > 0 only: A → e0; B → e2 (0.8), e1 (0.6); × weight and max-merged: 0.7, 0.24, 0.18
    assert hits(candidates=3, min_score=0.0) == pytest.approx({0: 0.7, 2: 0.24, 1: 0.18})
    # one hit per part before the merge (BME's 20 per text): e1 is B's second hit, so it is out
    assert hits(candidates=3, per_part=1, min_score=0.0) == pytest.approx({0: 0.7, 2: 0.24})
    # the merged list keeps `candidates` (BME's 40): here 2
    assert hits(candidates=2, min_score=0.0) == pytest.approx({0: 0.7, 2: 0.24})
    # without the positivity filter cosine-0 nodes fill the list (e3 ties at 0 by node order)
    assert 3 in hits(candidates=4)


def test_anchors_are_case_sensitive_titles_visible_to_the_viewer_and_cross_recall_events():
    from pipeline.stages import anchors

    nodes = pl.DataFrame(
        {
            "node_id": list("abcde"),
            "text": ["t"] * 5,
            "title": ["Alice Chen", "farm", "Secret", "Launch party", None],
            "type": ["person", "project", "fact", "event", "event"],
            "visibility": [None, None, ["bob"], None, None],
        }
    )
    queries = pl.DataFrame(
        {"query_id": ["q0", "q1"], "text": ["Did Alice Chen see the Farm and the Secret?", "x"]}
    )
    found = anchors.find(nodes, queries)
    assert found.rows() == [
        (0, 0, 2.0)
    ]  # "Farm" ≠ "farm"; "Secret" is invisible without viewer bob
    edges = pl.DataFrame(
        {
            "src": [0, 4, 1],
            "dst": [3, 0, 3],
            "weight": [0.5, 0.8, 1.0],
            "inhibit": [False, False, False],
        },
        schema_overrides={"src": pl.Int64, "dst": pl.Int64, "weight": pl.Float32},
    )
    got = anchors.cross(found, edges, nodes, queries)
    assert got.rows() == [
        (0, 3, pytest.approx(0.75)),
        (0, 4, pytest.approx(1.2)),
    ]  # 1.5 × weight, both directions


def test_rocchio_feedback_adds_the_bisector_of_query_and_top_hits():
    from pipeline.channels.candidates import CandidateInputs, ChannelSettings, generate
    from pipeline.stages.channels import DenseParams

    # nodes: e0, e0+e1 (at 45°), e1, e2; the query is e0
    r = np.sqrt(0.5)
    xb = np.array([[1, 0, 0], [r, r, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    nodes = pl.DataFrame({"node_id": list("abcd"), "text": ["t"] * 4})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["t"]})

    def dense(**kw):
        out = generate(
            nodes,
            queries,
            ChannelSettings(("dense",), DenseParams.defaults(candidates=4, **kw)),
            CandidateInputs(xb, np.array([[1, 0, 0]], np.float32)),
        )
        return dict(zip(out["node_idx"].to_list(), out["dense"].to_list()))

    assert dense() == pytest.approx({0: 1.0, 1: r, 2: 0.0, 3: 0.0}, abs=1e-6)
    # top 2 = e0 and the 45° node: their mean points at 22.5°, and with β = 1 the feedback vector
    # bisects it and the query (11.25°); each node keeps the larger of its two cosines
    deg = np.pi / 180
    assert dense(prf_docs=2, prf_weight=1.0) == pytest.approx(
        {0: 1.0, 1: np.cos(33.75 * deg), 2: np.sin(11.25 * deg), 3: 0.0}, abs=1e-6
    )
