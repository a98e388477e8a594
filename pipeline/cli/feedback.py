"""``recall feedback <run_dir> [--format F] [--signals T] [--out P] [--injected] [--now ISO]``: the
command layer of ``pipeline.run.feedback`` (what it computes is documented there) and of the
system write-backs in ``pipeline/writeback/``."""

from __future__ import annotations

import importlib
from pathlib import Path

from pipeline.cli.main import parser
from pipeline.run import feedback

# --format → the module whose ``write_back(run_dir, cfg, rows, now, out) -> Path`` writes what that
# system writes back after recall (a fixed table written here, never read from a config).
# "signals" (the default) is the project's own: a new signals table revision (pipeline.run.feedback).
WRITERS: dict[str, str] = {
    "reme": "pipeline.writeback.reme",  # meta/access_log.json in the ReMe store, per (path, day)
    "bme": "pipeline.writeback.bme",  # a new graph file, the selected nodes reinforced
    "oks": "pipeline.writeback.oks",  # .oks/access.json, from --use-events only (recall is not use)
}
FORMATS = ("signals", *sorted(WRITERS))


def write_back(
    fmt: str, run_dir: str, injected: bool, now, out: str | None, **extra
) -> Path | None:
    """Run the ``fmt`` writer on the run's recall (or injected) rows; returns the file it wrote
    (None: it wrote nothing). ``extra``: options only some writers take (``use_events``)."""
    cfg, rows = feedback.run_inputs(Path(run_dir), injected)
    module = importlib.import_module(WRITERS[fmt])
    return module.write_back(Path(run_dir), cfg, rows, now, out, **extra)


def main(args: list[str]) -> int:
    """0, after ``recall feedback`` wrote the new signals table or the system's write-back."""
    ap = parser("feedback")
    ap.add_argument("run_dir")
    ap.add_argument(
        "--format",
        default="signals",
        choices=FORMATS,
        help="signals: a new signals table (default); reme|...: write back into the system's store",
    )
    ap.add_argument("--signals", default=None, help="input signals table (default: the run's)")
    ap.add_argument(
        "--out",
        default=None,
        help="new table (default: <run_dir>/signals-r<revision>.parquet); with a store format: the "
        "store root to write into (default: the run's data.path); bme: the new graph file "
        "(default: <run_dir>/st-bme-graph-feedback.json)",
    )
    ap.add_argument(
        "--injected", action="store_true", help="only the rows the injection layer kept"
    )
    ap.add_argument("--now", default=None, help="access time, ISO (default: the wall clock, UTC)")
    ap.add_argument(
        "--use-events",
        default=None,
        help="oks: slugs the agent used, one per line (each = one `oks wiki use`); recall alone "
        "is not use, so without it --format oks writes nothing",
    )
    a = ap.parse_args(args)
    if a.use_events and a.format != "oks":
        from pipeline.contract.errors import UserError

        raise UserError("--use-events is for --format oks (OKS counts uses, not recalls)")
    import datetime as dt

    from pipeline.contract.schema import parse_timestamp

    now = parse_timestamp(a.now, "--now", None, "now") if a.now else None
    if a.format == "signals":
        print(f"wrote {feedback.feedback_run(a.run_dir, a.signals, a.out, a.injected, now)}")
        return 0
    now = now or dt.datetime.now(dt.timezone.utc)
    extra = {"use_events": a.use_events} if a.format == "oks" else {}
    wrote = write_back(a.format, a.run_dir, a.injected, now, a.out, **extra)
    if wrote is None:
        from pipeline.writeback.oks import NOT_USE

        print(NOT_USE)
    else:
        print(f"wrote {wrote}")
    return 0
