"""``recall feedback <run_dir> [--signals T] [--out P] [--injected] [--now ISO]``: the command
layer of ``pipeline.feedback`` (what it computes is documented there)."""

from __future__ import annotations

from pipeline import feedback


def main(ap, args: list[str]) -> int:
    """``recall feedback`` (argparse; called by ``pipeline.cli``)."""
    ap.add_argument("run_dir")
    ap.add_argument("--signals", default=None, help="input signals table (default: the run's)")
    ap.add_argument(
        "--out", default=None, help="new table (default: <run_dir>/signals-r<revision>.parquet)"
    )
    ap.add_argument(
        "--injected", action="store_true", help="only the rows the injection layer kept"
    )
    ap.add_argument("--now", default=None, help="access time, ISO (default: the wall clock, UTC)")
    a = ap.parse_args(args)
    from pipeline.schema import parse_timestamp

    now = parse_timestamp(a.now, "--now", None, "now") if a.now else None
    print(f"wrote {feedback.feedback_run(a.run_dir, a.signals, a.out, a.injected, now)}")
    return 0
