"""``recall compare <run dirs or one sweep dir> [--baseline NAME] [--out DIR] [--ci]``: the
metrics of finished runs side by side, paired t-tests against a baseline, per query group
(``pipeline.report``); ``--out`` writes compare.md / compare.html."""

from __future__ import annotations

from pathlib import Path

from pipeline.cli.main import parser


def main(args: list[str]) -> int:
    """0, after ``recall compare`` printed the table of the runs (or one sweep) and wrote --out."""
    from pipeline import report

    ap = parser("compare")
    ap.add_argument("runs", nargs="+", help="run directories, or one sweep directory")
    ap.add_argument(
        "--baseline", default=None, help="run name to test against (default: the first)"
    )
    ap.add_argument("--out", default=None, help="write compare.md / compare.html here")
    ap.add_argument(
        "--ci", action="store_true", help="± the half-width of each mean's 95%% bootstrap interval"
    )
    a = ap.parse_args(args)
    runs = [Path(r) for r in a.runs]
    one_sweep = len(runs) == 1 and not (runs[0] / "manifest.json").exists()
    res = (
        report.compare_dir(runs[0], baseline=a.baseline, ci=a.ci)
        if one_sweep
        else report.compare(runs, baseline=a.baseline, ci=a.ci)
    )
    print(report.format_table(res))
    if a.out:
        md, html = report.compare_report(res, a.out)
        print(f"report: {md} {html}")
    return 0
