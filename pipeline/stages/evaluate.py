"""Metrics with ranx. recall@k = share of a query's relevant items in its top k, averaged over the
queries with at least one relevant item (LoCoMo's and HippoRAG's definition); ``p@k`` is precision.

Doc-level qrels (``doc_id``) are evaluated on the ranking of documents: each recalled unit maps to
its document and only a document's first (best) occurrence counts.
"""
from __future__ import annotations

import os

import polars as pl

DEFAULT_METRICS = ("recall@1", "recall@2", "recall@5", "recall@10", "recall@25", "recall@50", "ndcg@10", "mrr", "p@5")


def ranx_name(metric: str) -> str:
    return "precision" + metric[1:] if metric.startswith("p@") else metric


def _ranx_dicts(run: pl.DataFrame, qrels: pl.DataFrame, target: str) -> tuple[dict, dict]:
    rel = qrels.filter(pl.col("relevance") > 0)
    q_dict: dict = {}
    for qid, tid, r in rel.select("query_id", target, "relevance").iter_rows():
        q_dict.setdefault(qid, {})[tid] = int(r)
    r_dict: dict = {qid: {} for qid in q_dict}
    for qid, tid, rank in run.filter(pl.col("query_id").is_in(list(q_dict))).select("query_id", target, "rank").iter_rows():
        r_dict[qid].setdefault(tid, 1.0 / rank)  # strictly decreasing in rank: ranx keeps our order
    return q_dict, r_dict


def _ranx_eval(q_dict: dict, r_dict: dict, metrics: list[str]) -> dict[str, float]:
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "numba"))
    from ranx import Qrels, Run, evaluate

    if not q_dict:
        return {m: 0.0 for m in metrics}
    # ranx rejects empty result lists; a query with nothing recalled gets a sentinel id that is never relevant
    r_dict = {q: (d or {"\0none": 0.0}) for q, d in r_dict.items()}
    res = evaluate(Qrels(q_dict), Run(r_dict), [ranx_name(m) for m in metrics], make_comparable=True)
    if len(metrics) == 1:
        res = {ranx_name(metrics[0]): res}
    return {m: float(res[ranx_name(m)]) for m in metrics}


def evaluate_run(recall: pl.DataFrame, qrels: pl.DataFrame, queries: pl.DataFrame, level: str,
                 metrics: list[str] = DEFAULT_METRICS) -> dict:
    """recall: query_id, rank, node_id (+ doc_id for doc-level qrels) → flat metrics + by_group."""
    run = recall.select("query_id", level, "rank")
    if level == "doc_id":
        run = run.sort("query_id", "rank").unique(["query_id", "doc_id"], keep="first", maintain_order=True)
        run = run.with_columns(rank=pl.col("rank").rank("ordinal").over("query_id").cast(pl.Int32))
    q_dict, r_dict = _ranx_dicts(run, qrels, level)
    out: dict = _ranx_eval(q_dict, r_dict, list(metrics))
    out["n_queries"] = len(q_dict)
    out["by_group"] = {}
    if "group" in queries.columns:
        groups = dict(queries.select("query_id", pl.col("group").fill_null("none")).iter_rows())
        for g in sorted({groups.get(q, "none") for q in q_dict}):
            sub_q = {q: v for q, v in q_dict.items() if groups.get(q, "none") == g}
            row = _ranx_eval(sub_q, {q: r_dict[q] for q in sub_q}, list(metrics))
            out["by_group"][g] = {**row, "n_queries": len(sub_q)}
    return out
