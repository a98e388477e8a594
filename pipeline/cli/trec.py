"""``recall export-trec`` and ``recall import-trec``: a run's recall as a TREC run file
(``qid Q0 docid rank score tag``), and an external TREC run file as a run directory, to compare or
fuse with the pipeline's runs (``pipeline.report.trec``)."""

from __future__ import annotations

from pathlib import Path

from pipeline.cli.main import parser
from pipeline.contract.errors import UserError

LEVELS = ["node_id", "doc_id"]


def export_main(args: list[str]) -> int:
    """0, after ``recall export-trec <run dir> <file>`` wrote a run's recall.parquet as a TREC run file."""
    import polars as pl

    from pipeline import report

    ap = parser("export-trec")
    ap.add_argument("run_dir")
    ap.add_argument("path")
    ap.add_argument("--level", default="node_id", choices=LEVELS)
    ap.add_argument("--tag", default=None)
    ap.add_argument(
        "--score",
        default="score",
        choices=["score", "rank"],
        help="score: the run's scores (ties nudged 1 ulp so sorting by score keeps the rank "
        "order); rank: 1/rank",
    )
    a = ap.parse_args(args)
    rec = Path(a.run_dir) / "recall.parquet"
    if not rec.exists():
        raise UserError(f"{a.run_dir}: no recall.parquet; pass a finished run directory")
    out = report.write_run(
        pl.read_parquet(rec),
        a.path,
        tag=a.tag or Path(a.run_dir).name,
        level=a.level,
        score=a.score,
    )
    print(f"wrote {out}")
    return 0


def import_main(args: list[str]) -> int:
    """0, after ``recall import-trec <run file> --out DIR`` turned a TREC run file into a run directory."""
    from pipeline import report

    ap = parser("import-trec")
    ap.add_argument("run_file")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--qrels",
        default=None,
        help="TREC qrels, or any data.qrels format: TSV with a header, OKS recall-case/v1",
    )
    ap.add_argument("--level", default="node_id", choices=LEVELS)
    a = ap.parse_args(args)
    print(f"wrote {report.import_run(a.run_file, a.out, a.qrels, a.level)}")
    return 0
