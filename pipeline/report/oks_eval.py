"""``recall oks-eval``: a finished run scored as OKS's ``oks eval recall`` scores itself.

OKS (open-agent-power/open-knowledge-studio, ``cli/knowledge_studio/evaluation.py``) recalls each
case of a ``recall-case/v1`` file with ``limit`` (default 5) and scores the returned slugs:
recall@1/3/5 = |top-k slugs ∩ relevant| / |relevant|, ``mrr`` = 1 / rank of the first relevant
slug, ``ndcg_at_5`` with binary gains (ideal over min(5, |relevant|)), ``no_result`` = nothing
returned, ``stale_leakage`` = a ``forbidden`` slug in the top 5; each averaged over the cases and
rounded to 6 places. Here the slugs are the run's documents in rank order (a document's slug is its
file stem, OKS's slug), each kept once, the first ``limit``. The output is OKS's
``recall-eval-run/v1`` JSON less the latency figures (a batch run does not time queries singly);
``oks eval recall`` prints ``{"output", "metrics"}``, and so does this command.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import polars as pl

from pipeline.adapters.common import sha256_file
from pipeline.adapters.query_files import read_recall_case
from pipeline.contract.errors import ConfigError, DataError

METRICS = ("recall_at_1", "recall_at_3", "recall_at_5", "mrr", "ndcg_at_5")
FLAGS = ("no_result", "stale_leakage")
RUN_SCHEMA = "recall-eval-run/v1"


def case_metrics(slugs: list[str], relevant: set[str], forbidden: set[str]) -> dict[str, float]:
    """OKS's per-case metrics of the retrieved ``slugs`` (module docstring)."""
    out = {f"recall_at_{k}": len(set(slugs[:k]) & relevant) / len(relevant) for k in (1, 3, 5)}
    first = next((i for i, s in enumerate(slugs, start=1) if s in relevant), None)
    out["mrr"] = 1.0 / first if first else 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, s in enumerate(slugs[:5], start=1) if s in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(5, len(relevant)) + 1))
    out["ndcg_at_5"] = dcg / ideal if ideal else 0.0
    out["no_result"] = float(not slugs)
    out["stale_leakage"] = float(bool(set(slugs[:5]) & forbidden))
    return out


def retrieved_slugs(recall: pl.DataFrame, limit: int) -> dict[str, list[str]]:
    """{query_id: the first ``limit`` distinct slugs in rank order} of a recall table."""
    col = "doc_id" if "doc_id" in recall.columns else "node_id"
    rows = recall.filter(pl.col("rank").is_not_null()).sort("query_id", "rank")
    out: dict[str, list[str]] = {}
    for q, item in rows.select("query_id", col).iter_rows():
        slug = Path(str(item).split("#")[0]).stem
        got = out.setdefault(q, [])
        if slug not in got and len(got) < limit:
            got.append(slug)
    return out


def evaluate_run(run_dir: str | Path, dataset: str | Path, limit: int = 5) -> dict:
    """The ``recall-eval-run/v1`` result of a finished run against a recall-case file."""
    if limit < 5:
        raise ConfigError(f"--limit {limit}: OKS requires ≥ 5 so recall_at_5 and ndcg_at_5 mean it")
    rec = Path(run_dir) / "recall.parquet"
    if not rec.is_file():
        raise DataError(str(run_dir), "no recall.parquet", "pass a finished run directory")
    data = read_recall_case(dataset)
    got = retrieved_slugs(pl.read_parquet(rec), limit)
    missing = [c["case_id"] for c in data["cases"] if c["case_id"] not in got]
    if len(missing) == len(data["cases"]):
        raise DataError(
            str(rec),
            f"no query id of the run is a case_id of {dataset}",
            "run with data.queries=<that recall-case file>",
        )
    cases = []
    for c in data["cases"]:
        slugs = got.get(c["case_id"], [])
        m = case_metrics(slugs, set(c["relevant"]), set(c.get("forbidden") or []))
        cases.append(
            {
                "case_id": c["case_id"],
                "query": c["query"],
                "goal": c.get("goal", "none"),
                "retrieved": slugs,
                "relevant": c["relevant"],
                "forbidden": c.get("forbidden", []),
                "metrics": m,
            }  # fmt: skip
        )
    agg = {n: round(sum(c["metrics"][n] for c in cases) / len(cases), 6) for n in METRICS + FLAGS}
    return {
        "schema_version": RUN_SCHEMA,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z"),
        "manifest": {
            "run_dir": str(Path(run_dir).resolve()),
            "dataset_path": str(Path(dataset).resolve()),
            "dataset_sha256": sha256_file(dataset),
            "dataset_id": data["dataset_id"],
            "dataset_version": str(data["version"]),
            "limit": limit,
            "goal_modes": sorted({str(c.get("goal", "none")) for c in data["cases"]}),
            "cases_without_recall": missing,
        },
        "metrics": {**agg, "case_count": len(cases)},
        "cases": cases,
    }
