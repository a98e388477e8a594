"""Metrics on a hand-made run: hand-computed values (ranx computes them)."""
import math

import polars as pl
import pytest

from pipeline.stages.evaluate import evaluate_run


def _recall(rows):
    return pl.DataFrame(rows, schema=["query_id", "rank", "node_id", "doc_id"], orient="row")


RUN = _recall([("q1", 1, "a", "A"), ("q1", 2, "b", "B"), ("q1", 3, "c", "A"), ("q1", 4, "d", "C"),
               ("q2", 1, "y", "Y"), ("q3", 1, "z", "Z")])
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "group": ["g1", "g2", "g2"]})


def test_node_level_metrics_hand_computed():
    qrels = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "node_id": ["b", "x", "y"], "relevance": [1, 1, 1]})
    m = evaluate_run(RUN, qrels, QUERIES, "node_id")
    assert m["n_queries"] == 2  # q3 has no relevant item: not averaged
    assert m["recall@1"] == pytest.approx((0 + 1) / 2)
    assert m["recall@2"] == pytest.approx((0.5 + 1) / 2)
    assert m["recall@50"] == pytest.approx(0.75)
    assert m["mrr"] == pytest.approx((0.5 + 1) / 2)
    assert m["p@5"] == pytest.approx((1 / 5 + 1 / 5) / 2)
    ndcg_q1 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((ndcg_q1 + 1) / 2)
    assert m["by_group"]["g1"]["recall@2"] == pytest.approx(0.5)
    assert m["by_group"]["g2"] == pytest.approx({**{k: 1.0 for k in m["by_group"]["g2"] if k != "p@5" and k != "n_queries"},
                                                 "p@5": 0.2, "n_queries": 1})


def test_doc_level_metrics_count_each_document_once():
    qrels = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["C", "A"], "relevance": [1, 1]})
    m = evaluate_run(RUN, qrels, QUERIES, "doc_id")
    # document ranking for q1 is A, B, C (the second A is dropped) → C at rank 3
    assert m["recall@1"] == pytest.approx(0.5)
    assert m["recall@2"] == pytest.approx(0.5)
    assert m["recall@5"] == pytest.approx(1.0)
    assert m["n_queries"] == 1


def test_query_with_nothing_recalled_scores_zero():
    qrels = pl.DataFrame({"query_id": ["q4"], "node_id": ["a"], "relevance": [1]})
    m = evaluate_run(RUN, qrels, pl.DataFrame({"query_id": ["q4"]}), "node_id")
    assert m["recall@50"] == 0.0 and m["n_queries"] == 1
