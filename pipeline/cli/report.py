"""``recall report <run dir>``: write report.md / report.html with plots for a finished run
(``pipeline.report.run_report``)."""

from __future__ import annotations

from pipeline.cli.main import parser


def main(args: list[str]) -> int:
    """0, after ``recall report`` wrote the run's report and printed where."""
    from pipeline import report

    ap = parser("report")
    ap.add_argument("run_dir")
    md, html = report.run_report(ap.parse_args(args).run_dir)
    print(f"report: {md} {html}")
    return 0
