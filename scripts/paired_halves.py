"""One run's paired per-query gain over another on all queries and on the query halves a / b.

    python scripts/paired_halves.py BASE_RUN OTHER_RUN [OTHER_RUN ...] [--metrics recall@5,ndcg@10]

Rows: (run, half, n, one `gain [low, high]` cell per metric); recall in points, nDCG/MRR as
fractions; 95% percentile bootstrap of the mean paired difference (1,000 resamples, seed 13;
`pipeline.report.bootstrap.paired_difference`). The halves are `query_part=a|b`
(`pipeline.contract.ingest.query_half`): queries are recalled independently, so a half's rows in a full run
are the rows a `query_part` run of that half gives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from pipeline.contract.errors import reported
from pipeline.contract.ingest import query_half
from pipeline.report.bootstrap import paired_difference
from pipeline.report.compare import markdown_table


def _cell(base: pl.DataFrame, other: pl.DataFrame, metric: str) -> tuple[int, str]:
    ci = paired_difference(other, base, metric)
    scale, digits = (100.0, 1) if metric.startswith(("recall", "p@")) else (1.0, 3)
    fmt = f"{{:+.{digits}f}}"
    return ci.n, (
        f"{fmt.format(scale * ci.mean)} [{fmt.format(scale * ci.low)}, "
        f"{fmt.format(scale * ci.high)}]"
    )


def table(base_dir: Path, other_dirs: list[Path], metrics: list[str]) -> str:
    """The Markdown table of every other run's gain over ``base_dir``'s run."""
    base = pl.read_parquet(base_dir / "per_query.parquet")
    rows = []
    for d in other_dirs:
        other = pl.read_parquet(d / "per_query.parquet")
        for half in ("all", "a", "b"):
            ids = base.select("query_id")
            ids = ids if half == "all" else query_half(ids, half)
            cells = [_cell(base.join(ids, on="query_id"), other, m) for m in metrics]
            rows.append([d.name, half, str(cells[0][0]), *[c for _n, c in cells]])
    return markdown_table(["run", "half", "n", *[f"{m} gain" for m in metrics]], rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """CLI entry: print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("others", nargs="+", type=Path)
    ap.add_argument("--metrics", default="recall@2,recall@5,recall@10,ndcg@10")
    args = ap.parse_args(argv)
    return reported(lambda: print(table(args.base, args.others, args.metrics.split(",")), end=""))


if __name__ == "__main__":
    sys.exit(main())
