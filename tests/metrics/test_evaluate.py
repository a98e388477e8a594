"""Metrics on hand-made runs: hand-computed values (trec_eval's core computes them), and agreement
with a plain-python reference of the same definitions on a real SciFact slice."""

import math

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.metrics.evaluate import evaluate, judged_warning, trec_key
from tests.helpers.paths import SHARED_DATA, needs_shared


def _recall(rows):
    return pl.DataFrame(rows, schema=["query_id", "rank", "node_id", "doc_id"], orient="row")


RUN = _recall(
    [
        ("q1", 1, "a", "A"),
        ("q1", 2, "b", "B"),
        ("q1", 3, "c", "A"),
        ("q1", 4, "d", "C"),
        ("q2", 1, "y", "Y"),
        ("q3", 1, "z", "Z"),
    ]
)
QUERIES = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "group": ["g1", "g2", "g2"]})


def test_node_level_metrics_hand_computed():
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q1", "q2"], "node_id": ["b", "x", "y"], "relevance": [1, 1, 1]}
    )
    m = evaluate(RUN, qrels, QUERIES, "node_id")[0]
    assert m["n_queries"] == 2  # q3 has no relevant item: not averaged
    assert m["recall@1"] == pytest.approx((0 + 1) / 2)
    assert m["recall@2"] == pytest.approx((0.5 + 1) / 2)
    assert m["recall@50"] == pytest.approx(0.75)
    assert m["mrr"] == pytest.approx((0.5 + 1) / 2)
    assert m["p@5"] == pytest.approx((1 / 5 + 1 / 5) / 2)
    ndcg_q1 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert m["ndcg@10"] == pytest.approx((ndcg_q1 + 1) / 2)
    assert m["by_group"]["g1"]["recall@2"] == pytest.approx(0.5)
    assert m["by_group"]["g2"] == pytest.approx(
        {
            **{k: 1.0 for k in m["by_group"]["g2"] if k != "p@5" and k != "n_queries"},
            "p@5": 0.2,
            "n_queries": 1,
        }
    )


def test_doc_level_metrics_count_each_document_once():
    qrels = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["C", "A"], "relevance": [1, 1]})
    m = evaluate(RUN, qrels, QUERIES, "doc_id")[0]
    # document ranking for q1 is A, B, C (the second A is dropped) → C at rank 3
    assert m["recall@1"] == pytest.approx(0.5)
    assert m["recall@2"] == pytest.approx(0.5)
    assert m["recall@5"] == pytest.approx(1.0)
    assert m["n_queries"] == 1


def test_query_with_nothing_recalled_scores_zero():
    qrels = pl.DataFrame({"query_id": ["q4"], "node_id": ["a"], "relevance": [1]})
    m = evaluate(RUN, qrels, pl.DataFrame({"query_id": ["q4"]}), "node_id")[0]
    assert m["recall@50"] == 0.0 and m["n_queries"] == 1


# --- trec_eval's core (pytrec_eval) on hand-made runs -----------------------------------------


def _run(rows):
    return pl.DataFrame(
        rows, schema={"query_id": pl.String, "rank": pl.Int64, "node_id": pl.String}, orient="row"
    )


def test_tied_scores_and_ids_keep_our_rank_order():
    # trec_eval breaks score ties by id (descending: "z" before "a"); the rank column must decide
    run = _run([("q1", 1, "a"), ("q1", 2, "z"), ("q1", 3, "m")]).with_columns(score=pl.lit(1.0))
    qrels = pl.DataFrame({"query_id": ["q1"], "node_id": ["z"], "relevance": [1]})
    m = evaluate(
        run, qrels, pl.DataFrame({"query_id": ["q1"]}), "node_id", ["mrr", "recall@1", "ndcg@10"]
    )[0]
    assert m["mrr"] == pytest.approx(0.5) and m["recall@1"] == 0.0
    assert m["ndcg@10"] == pytest.approx(1 / math.log2(3))


def test_every_metric_family_hand_computed_with_graded_relevance():
    # q1: ranking a b c d e; relevant b (grade 2) and d (grade 1) and x (never recalled)
    run = _run([("q1", r, t) for r, t in enumerate("abcde", 1)])
    qrels = pl.DataFrame(
        {"query_id": ["q1"] * 4, "node_id": ["b", "d", "x", "e"], "relevance": [2, 1, 1, 0]}
    )
    metrics = ["recall@2", "recall@4", "p@2", "p@10", "ndcg@3", "ndcg", "mrr", "map", "map@2"]
    m = evaluate(run, qrels, pl.DataFrame({"query_id": ["q1"]}), "node_id", metrics)[0]
    dcg3 = 2 / math.log2(3)
    idcg3 = 2 + 1 / math.log2(3) + 1 / math.log2(4)  # ideal: grades 2, 1, 1
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    assert m["recall@2"] == pytest.approx(1 / 3) and m["recall@4"] == pytest.approx(2 / 3)
    assert m["p@2"] == pytest.approx(1 / 2) and m["p@10"] == pytest.approx(
        2 / 10
    )  # divided by k, not by n found
    assert m["ndcg@3"] == pytest.approx(dcg3 / idcg3) and m["ndcg"] == pytest.approx(dcg / idcg3)
    assert m["mrr"] == pytest.approx(1 / 2)
    assert m["map"] == pytest.approx((1 / 2 + 2 / 4) / 3) and m["map@2"] == pytest.approx(
        (1 / 2) / 3
    )
    assert m["n_queries"] == 1


def test_queries_without_results_or_relevant_items():
    run = _run([("q1", 1, "a"), ("q3", 1, "c")])
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q2", "q3"], "node_id": ["a", "b", "c"], "relevance": [1, 1, 0]}
    )
    queries = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "group": ["g", "g", None]})
    m, table = evaluate(run, qrels, queries, "node_id", ["recall@1", "mrr"])
    # q2 has a relevant item but no results: 0; q3 only a grade-0 judgement: not averaged, no row
    assert table.to_dicts() == [
        {"query_id": "q1", "group": "g", "recall@1": 1.0, "mrr": 1.0},
        {"query_id": "q2", "group": "g", "recall@1": 0.0, "mrr": 0.0},
    ]
    assert m == {
        "recall@1": 0.5,
        "mrr": 0.5,
        "n_queries": 2,
        "by_group": {"g": {"recall@1": 0.5, "mrr": 0.5, "n_queries": 2}},
    }


def test_no_relevant_item_at_all_scores_zero_over_zero_queries():
    qrels = pl.DataFrame({"query_id": ["q1"], "node_id": ["a"], "relevance": [0]})
    m, table = evaluate(RUN, qrels, QUERIES, "node_id", ["recall@5"])
    assert m == {"recall@5": 0.0, "n_queries": 0, "by_group": {}} and table.height == 0


def test_doc_level_repeated_documents_every_metric():
    # units a(A) b(B) c(A) d(C) → documents A B C; relevant C and D (D never recalled)
    qrels = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["C", "D"], "relevance": [1, 1]})
    m = evaluate(RUN, qrels, QUERIES, "doc_id", ["recall@3", "p@3", "mrr", "ndcg@10"])[0]
    assert m["recall@3"] == pytest.approx(0.5) and m["p@3"] == pytest.approx(1 / 3)
    assert m["mrr"] == pytest.approx(1 / 3)
    assert m["ndcg@10"] == pytest.approx((1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert m["by_group"] == {
        "g1": {
            "recall@3": m["recall@3"],
            "p@3": m["p@3"],
            "mrr": m["mrr"],
            "ndcg@10": m["ndcg@10"],
            "n_queries": 1,
        }
    }


def test_judged_items_not_in_corpus_are_counted_and_stay_relevant():
    corpus = pl.DataFrame({"node_id": ["a", "b", "c", "d", "y", "z"]})
    qrels = pl.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q3"],
            "node_id": ["b", "gone", "y", "lost", "z"],
            "relevance": [1, 1, 1, 1, 1],
        }
    )
    m = evaluate(RUN, qrels, QUERIES, "node_id", ["recall@50"], corpus=corpus)[0]
    assert m["judged_not_in_corpus"] == {
        "items": 2,
        "queries": 2,
        "query_share": pytest.approx(2 / 3),
    }
    assert m["recall@50"] == pytest.approx(
        (0.5 + 0.5 + 1.0) / 3
    )  # the missing ones stay in the denominator
    assert judged_warning(m) == [
        "warning: judged items not in the corpus: 2, in 2 of 3 queries (66.7%); they "
        "count as relevant (trec_eval's convention), so recall on those queries stays below 1"
    ]
    from pipeline.cli.run import summary_table

    table = summary_table(m, "runs/x").splitlines()
    assert table[-2] == judged_warning(m)[0] and table[-1] == "run directory: runs/x"
    clean = evaluate(
        RUN, qrels.filter(pl.col("node_id") != "gone"), QUERIES, "node_id", ["mrr"], corpus=corpus
    )[0]
    assert clean["judged_not_in_corpus"]["items"] == 1 and judged_warning({"n_queries": 1}) == []


def test_unknown_metric_is_a_config_error_naming_the_valid_forms():
    with pytest.raises(
        ConfigError, match=r"evaluate.metrics: 'hit_rate@5' is not a metric here; use recall@k"
    ):
        evaluate(
            RUN,
            pl.DataFrame({"query_id": ["q1"], "node_id": ["a"], "relevance": [1]}),
            QUERIES,
            "node_id",
            ["hit_rate@5"],
        )
    with pytest.raises(ConfigError, match="recall@0"):
        trec_key("recall@0")


# --- a real slice: 50 SciFact queries, bm25 ---------------------------------------------------


def _reference(ranking: list[str], rel: dict[str, int], metric: str) -> float:
    """trec_eval's definitions in plain python: ranking = items in rank order (repeats allowed)."""
    seen: list[str] = []
    for t in ranking:
        if t not in seen:
            seen.append(t)
    hits = [rel.get(t, 0) for t in seen]
    n_rel = sum(1 for g in rel.values() if g > 0)
    name, _, k = metric.partition("@")
    k = int(k) if k else len(hits)
    if name == "recall":
        return sum(1 for g in hits[:k] if g > 0) / n_rel
    if name == "p":
        return sum(1 for g in hits[:k] if g > 0) / k
    if name == "mrr":
        return next((1 / (i + 1) for i, g in enumerate(hits) if g > 0), 0.0)
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(hits[:k]))
    return dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))


@needs_shared(SHARED_DATA / "beir_scifact")
def test_agrees_with_plain_python_reference_on_50_scifact_queries(compose, tmp_path):
    import json

    from pipeline.contract import registry
    from pipeline.metrics.evaluate import DEFAULT_METRICS
    from pipeline.run import runner

    runner.run(
        compose(["data=scifact", "data.limit_queries=50", "preset=bm25", "report=false"]),
        tmp_path / "run",
    )
    out = tmp_path / "run"
    manifest = json.loads((out / "manifest.json").read_text())
    ds = registry.call_target(manifest["config"]["data"])
    level = ds.qrels_level
    rel: dict[str, dict[str, int]] = {}
    for q, t, r in ds.qrels.select("query_id", level, "relevance").iter_rows():
        rel.setdefault(q, {})[t] = r
    recall = pl.read_parquet(out / "recall.parquet").sort("query_id", "rank")
    ranking = {
        q: list(t)
        for q, t in recall.group_by("query_id", maintain_order=True).agg(level).iter_rows()
    }
    judged = sorted(q for q, d in rel.items() if any(g > 0 for g in d.values()))
    per_query = pl.read_parquet(out / "per_query.parquet")
    metrics = json.loads((out / "metrics.json").read_text())
    assert per_query["query_id"].to_list() == judged and metrics["n_queries"] == len(judged) >= 45
    for m in DEFAULT_METRICS:
        want = [_reference(ranking.get(q, []), rel[q], m) for q in judged]
        assert per_query[m].to_list() == pytest.approx(want, abs=1e-9), m
        assert metrics[m] == pytest.approx(sum(want) / len(want), abs=1e-9), m
    assert 0.3 < metrics["ndcg@10"] < 0.9  # bm25 on SciFact: a real ranking, not a degenerate one
