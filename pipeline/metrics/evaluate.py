"""Metrics through trec_eval's C core (the ``pytrec_eval`` binding): no JIT, milliseconds per run.

recall@k = share of a query's relevant items in its top k, averaged over the queries with at least
one relevant item (LoCoMo's and HippoRAG's definition); ``p@k`` is precision at k (divided by k),
``ndcg@k`` trec_eval's ``ndcg_cut`` (gain = relevance), ``mrr`` its ``recip_rank``.

Doc-level qrels (``doc_id``) are evaluated on the ranking of documents: each recalled unit maps to
its document and only a document's first (best) occurrence counts. trec_eval orders a query's
results by score, so each result's score is ``-rank``: exactly our order, whatever the stored scores.

Judged items that are not in the corpus stay relevant (trec_eval's convention: they count in the
denominator); ``judged_not_in_corpus`` in metrics.json says how many and how many queries they touch.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.contract.errors import ConfigError

DEFAULT_METRICS = (
    "recall@1",
    "recall@2",
    "recall@5",
    "recall@10",
    "recall@25",
    "recall@50",
    "ndcg@10",
    "mrr",
    "p@5",
)
NOT_METRICS = ("by_group", "n_queries", "judged_not_in_corpus")  # the other keys of metrics.json
_CUT = {
    "recall": "recall",
    "p": "P",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}  # name@k → trec_eval measure.k
_PLAIN = {"mrr": "recip_rank", "map": "map", "ndcg": "ndcg"}


def trec_key(metric: str) -> str:
    """Our metric name → trec_eval's result key (``recall@5`` → ``recall_5``, ``mrr`` → ``recip_rank``)."""
    m = re.fullmatch(r"([a-z]+)@([1-9]\d*)", metric)
    if m and m[1] in _CUT:
        return f"{_CUT[m[1]]}_{m[2]}"
    if metric in _PLAIN:
        return _PLAIN[metric]
    raise ConfigError(
        f"evaluate.metrics: {metric!r} is not a metric here; use recall@k, p@k, ndcg@k, map@k, "
        f"mrr, map or ndcg (k a positive integer)"
    )


def metric_names(metrics: dict) -> list[str]:
    """The metric keys of a metrics.json dict (or of one of its groups), in their order."""
    return [m for m in metrics if m not in NOT_METRICS]


def first_occurrence(recall: pl.DataFrame, level: str, *keep: str) -> pl.DataFrame:
    """recall → (query_id, <level>, rank, *keep): each item's first (best) row, ranks renumbered 1..n."""
    run = recall.select("query_id", level, "rank", *keep).sort(
        "query_id", "rank", maintain_order=True
    )
    run = run.unique(["query_id", level], keep="first", maintain_order=True)
    return run.with_columns(rank=pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int32))


def per_query(
    recall: pl.DataFrame, qrels: pl.DataFrame, level: str, metrics: list[str]
) -> pl.DataFrame:
    """(query_id, <metric>...) for every query with a relevant item, sorted by query_id; a query
    without results scores 0."""
    import pytrec_eval

    keys = [trec_key(m) for m in metrics]
    rel = qrels.filter(pl.col("relevance") > 0).select(
        "query_id", level, pl.col("relevance").cast(pl.Int64)
    )
    q_dict: dict[str, dict[str, int]] = {}
    for q, t, r in rel.iter_rows():
        q_dict.setdefault(q, {})[t] = r
    qids = sorted(q_dict)
    if not qids:
        return pl.DataFrame(
            {"query_id": [], **{m: [] for m in metrics}},
            schema={"query_id": pl.String, **{m: pl.Float64 for m in metrics}},
        )
    run = first_occurrence(recall.filter(pl.col("query_id").is_in(qids)), level)
    r_dict: dict[str, dict[str, float]] = {q: {} for q in qids}
    for q, items, ranks in run.group_by("query_id").agg(level, "rank").iter_rows():
        r_dict[q] = {t: -float(r) for t, r in zip(items, ranks)}
    res = pytrec_eval.RelevanceEvaluator(q_dict, _measures(keys)).evaluate(r_dict)
    return pl.DataFrame(
        {"query_id": qids, **{m: [float(res[q][k]) for q in qids] for m, k in zip(metrics, keys)}},
        schema={"query_id": pl.String, **{m: pl.Float64 for m in metrics}},
    )


def _measures(keys: list[str]) -> set[str]:
    """trec_eval result keys → its measure specs, one per family with all cut-offs (``recall.1,5``)."""
    cuts: dict[str, list[str]] = {}
    plain = set()
    for k in keys:
        family, _, cut = k.rpartition("_")
        if cut.isdigit():
            cuts.setdefault(family, []).append(cut)
        else:
            plain.add(k)
    return plain | {f"{f}.{','.join(sorted(set(c), key=int))}" for f, c in cuts.items()}


def evaluate(
    recall: pl.DataFrame,
    qrels: pl.DataFrame,
    queries: pl.DataFrame,
    level: str,
    metrics: list[str] = DEFAULT_METRICS,
    corpus: pl.DataFrame | None = None,
) -> tuple[dict, pl.DataFrame]:
    """The metrics of a recall against its judgements.

    Args:
        recall: query_id, rank, node_id (+ doc_id for doc-level qrels).
        qrels: query_id, ``level``, relevance.
        queries: query_id (+ group: the metrics are also averaged per group).
        level: ``node_id`` or ``doc_id``, the column the judgements name.
        metrics: the metric names (:func:`trec_key`).
        corpus: the nodes frame; when given, judged items missing from its ``level`` column are
            counted (``judged_not_in_corpus``).

    Returns:
        (the metrics.json dict: flat means, ``n_queries``, ``by_group``; the per-query table:
        query_id, group, <metric>...).
    """
    metrics = list(metrics)
    table = per_query(recall, qrels, level, metrics)
    grouped = "group" in queries.columns
    if grouped:
        groups = queries.select("query_id", pl.col("group").cast(pl.String).fill_null("none"))
        groups = groups.unique("query_id", keep="first", maintain_order=True)
        table = table.join(groups, on="query_id", how="left", maintain_order="left")
    group = pl.col("group").fill_null("none") if grouped else pl.lit(None, pl.String).alias("group")
    table = table.select("query_id", group, *metrics)
    out = {**_means(table, metrics), "n_queries": table.height, "by_group": {}}
    if grouped:
        for (g,), sub in table.sort("group").group_by("group", maintain_order=True):
            out["by_group"][g] = {**_means(sub, metrics), "n_queries": sub.height}
    if corpus is not None and level in corpus.columns:
        out["judged_not_in_corpus"] = judged_not_in_corpus(qrels, corpus, level, table.height)
    return out, table


def _means(table: pl.DataFrame, metrics: list[str]) -> dict[str, float]:
    if not table.height:
        return {m: 0.0 for m in metrics}
    return {m: float(table[m].mean()) for m in metrics}


def judged_not_in_corpus(
    qrels: pl.DataFrame, corpus: pl.DataFrame, level: str, n_queries: int
) -> dict:
    """Relevant judged items whose id is not in the corpus: {items, queries, query_share}."""
    rel = qrels.filter(pl.col("relevance") > 0)
    missing = rel.filter(~pl.col(level).is_in(corpus[level].drop_nulls().unique().implode()))
    n_q = missing["query_id"].n_unique()
    return {
        "items": missing.height,
        "queries": n_q,
        "query_share": n_q / n_queries if n_queries else 0.0,
    }


def judged_warning(metrics: dict) -> list[str]:
    """One warning line when judged items are not in the corpus (they still count as relevant)."""
    miss = metrics.get("judged_not_in_corpus") or {}
    if not miss.get("items"):
        return []
    return [
        f"warning: judged items not in the corpus: {miss['items']}, in {miss['queries']} of "
        f"{metrics['n_queries']} queries ({miss['query_share']:.1%}); they count as relevant (trec_eval's "
        "convention), so recall on those queries stays below 1"
    ]
