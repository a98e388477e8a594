"""Reports on finished runs: TREC export/import, run comparison with significance tests, plots,
and markdown/HTML reports."""

from __future__ import annotations

from pipeline.report.compare import CompareResult, compare, compare_dir, format_table
from pipeline.report.per_query import wins_losses, worst_queries
from pipeline.report.render import compare_report, run_report
from pipeline.report.trec import import_run, read_qrels, read_run, write_qrels, write_run

__all__ = [
    "CompareResult",
    "compare",
    "compare_dir",
    "compare_report",
    "format_table",
    "import_run",
    "read_qrels",
    "read_run",
    "run_report",
    "wins_losses",
    "worst_queries",
    "write_qrels",
    "write_run",
]
