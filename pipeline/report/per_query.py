"""Views of per-query metrics (a run's per_query.parquet, or ``CompareResult.per_query``): the worst
queries of a run, and each run's wins and losses against a baseline."""

from __future__ import annotations

import polars as pl

TIE = 1e-12  # per-query differences at or below this are ties (float noise)


def worst_queries(per_query: pl.DataFrame, metric: str, n: int = 10) -> pl.DataFrame:
    """The ``n`` queries lowest on ``metric`` (ties by query_id), all columns kept."""
    return per_query.sort(metric, "query_id").head(n)


def wins_losses(per_query: pl.DataFrame, baseline: str, metrics: list[str]) -> pl.DataFrame:
    """per_query (run, query_id, <metric>...) → (run, metric, wins, losses, ties) against ``baseline``,
    paired by query_id; one row per other run and metric."""
    base = per_query.filter(pl.col("run") == baseline).select(
        "query_id", *[pl.col(m).alias(f"{m}__base") for m in metrics]
    )
    others = per_query.filter(pl.col("run") != baseline).join(base, on="query_id", how="inner")
    rows = []
    for (run,), sub in others.group_by("run", maintain_order=True):
        for m in metrics:
            diff = sub[m] - sub[f"{m}__base"]
            rows.append(
                {
                    "run": run,
                    "metric": m,
                    "wins": int((diff > TIE).sum()),
                    "losses": int((diff < -TIE).sum()),
                    "ties": int((diff.abs() <= TIE).sum()),
                }
            )
    schema = {
        "run": pl.String,
        "metric": pl.String,
        "wins": pl.Int64,
        "losses": pl.Int64,
        "ties": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)
