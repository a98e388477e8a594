"""Each run's metrics with 95% bootstrap intervals over its queries, as a Markdown table.

    python scripts/ci_table.py RUN_DIR [RUN_DIR ...] [--metrics recall@5,recall@10] [--by-group]

A cell reads `mean ± half-width [low, high]` (recall in percent, nDCG/MRR as fractions); 1,000
resamples, seed 13. Per-query values come from each run's per_query.parquet (or are recomputed from
recall.parquet as `recall compare` does). --by-group adds one table per query group (e.g. LoCoMo
category), with n per group.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from pipeline.contract.errors import reported
from pipeline.report.bootstrap import Interval, metric_cis
from pipeline.report.compare import compare, markdown_table


def scale_of(metric: str) -> tuple[float, int]:
    """Recall and precision in percent with one digit; nDCG, MRR, MAP as fractions with three."""
    return (100.0, 1) if metric.startswith(("recall", "p@")) else (1.0, 3)


def run_per_query(run_dir: Path, metrics: list[str] | None) -> tuple[pl.DataFrame, list[str]]:
    """(query_id, group, <metric>...) of one run, and the metrics it holds."""
    result = compare([run_dir], metrics=metrics)
    return result.per_query.drop("run"), result.metrics


def ci_rows(
    name: str, cis: pl.DataFrame, metrics: list[str], group: str | None = None
) -> list[str]:
    sub = cis if group is None else cis.filter(pl.col("group") == group)
    by_metric = {r["metric"]: r for r in sub.iter_rows(named=True)}
    cells = []
    for m in metrics:
        r, (scale, digits) = by_metric[m], scale_of(m)
        half = Interval(r["mean"], r["low"], r["high"], r["n"]).half
        cells.append(f"{scale * r['mean']:.{digits}f} ± {scale * half:.{digits}f}")
    return [name, str(next(iter(by_metric.values()))["n"]), *cells]


def tables(run_dirs: list[Path], metrics: list[str] | None, by_group: bool) -> str:
    loaded = {d: run_per_query(d, metrics) for d in run_dirs}
    metrics = metrics or loaded[run_dirs[0]][1]
    overall = [ci_rows(d.name, metric_cis(pq, metrics), metrics) for d, (pq, _) in loaded.items()]
    parts = [markdown_table(["run", "n", *metrics], overall)]
    if by_group:
        for d, (pq, _) in loaded.items():
            if pq["group"].drop_nulls().len() == 0:
                continue
            cis = metric_cis(pq, metrics, by="group")
            rows = [ci_rows(g, cis, metrics, g) for g in cis["group"].unique(maintain_order=True)]
            parts += [f"\n### {d.name} by group\n", markdown_table(["group", "n", *metrics], rows)]
    return (
        "\n".join(parts) + "\n\n95% percentile bootstrap over queries (1,000 resamples, seed 13).\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    ap.add_argument(
        "--metrics",
        default=None,
        help="comma-separated (default: the first run's evaluate.metrics)",
    )
    ap.add_argument("--by-group", action="store_true", help="one table per query group as well")
    args = ap.parse_args(argv)
    metrics = args.metrics.split(",") if args.metrics else None
    return reported(lambda: print(tables(args.run_dirs, metrics, args.by_group), end=""))


if __name__ == "__main__":
    sys.exit(main())
