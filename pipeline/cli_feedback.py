"""``recall feedback <run_dir> [--format signals|bme] [--signals T] [--out P] [--injected] [--now ISO]``:
the command layer of ``pipeline.feedback`` (the signals table) and of ``pipeline.writeback``
(each system's own store format)."""

from __future__ import annotations

from pipeline import feedback


def _signals(a, now):
    return feedback.feedback_run(a.run_dir, a.signals, a.out, a.injected, now)


def _bme(a, now):
    from pipeline.writeback import bme

    return bme.feedback_run(a.run_dir, a.out, now)


# --format → writer (each system's writer lives in pipeline/writeback/<system>.py)
FORMATS = {"signals": _signals, "bme": _bme}


def main(ap, args: list[str]) -> int:
    """``recall feedback`` (argparse; called by ``pipeline.cli``)."""
    ap.add_argument("run_dir")
    ap.add_argument(
        "--format",
        default="signals",
        choices=sorted(FORMATS),
        help="signals: a new signals table; bme: a reinforced ST-BME graph file (a new file)",
    )
    ap.add_argument("--signals", default=None, help="input signals table (default: the run's)")
    ap.add_argument(
        "--out",
        default=None,
        help="new file (default: <run_dir>/signals-r<revision>.parquet, "
        "or <run_dir>/st-bme-graph-feedback.json)",
    )
    ap.add_argument(
        "--injected", action="store_true", help="only the rows the injection layer kept"
    )
    ap.add_argument("--now", default=None, help="access time, ISO (default: the wall clock, UTC)")
    a = ap.parse_args(args)
    from pipeline.schema import parse_timestamp

    now = parse_timestamp(a.now, "--now", None, "now") if a.now else None
    print(f"wrote {FORMATS[a.format](a, now)}")
    return 0
