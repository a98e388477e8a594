"""Stage tables of several ``bench_pipeline.py`` runs side by side, one column pair per run.

    python scripts/bench/side_by_side.py LABEL=LOG [LABEL=LOG ...] [--queries N]

Each ``LOG`` is the printed output of one ``bench_pipeline.py`` call (its ``| nodes | edges |
stage | seconds | queries/s | peak RSS MiB |`` rows); ``LABEL`` names its columns (``cuda``,
``cpu 16 cores``). Rows are matched by (nodes, stage) and printed in the first run's order, then
any stage only a later run has; a run without that row shows ``—`` (a missing log, e.g. a step its
time budget skipped, reads as a run with no rows). ``--queries N`` prints the query count in the
header. ``scripts/device_check.sh`` prints its cuda and CPU runs of one size with it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def stage_rows(text: str) -> dict[tuple[str, str], tuple[float, str]]:
    """{(nodes, stage): (seconds, queries/s text)} of the table rows in one bench's output."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].replace(",", "").isdigit():
            continue
        nodes, _edges, stage, sec, qps, _rss = cells
        rows[(nodes, stage)] = (float(sec), qps)
    return rows


def merged(runs: list[tuple[str, dict]], queries: int | None = None) -> str:
    """The markdown table: one row per (nodes, stage) seen in any run, a seconds and a queries/s
    column per run, and, for two runs, the first's speed over the second's (seconds ratio)."""
    keys: list[tuple[str, str]] = []
    for _label, rows in runs:
        keys += [k for k in rows if k not in keys]
    head = ["nodes", "stage"]
    for label, _rows in runs:
        head += [f"{label} s", f"{label} q/s"]
    if len(runs) == 2:
        head.append(f"{runs[0][0]} speed-up")
    lines = [f"queries: {queries:,}"] if queries else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        cells = list(key)
        for _label, rows in runs:
            sec, qps = rows.get(key, (None, "—"))
            cells += ["—" if sec is None else f"{sec:.2f}", qps]
        if len(runs) == 2:
            a, b = (rows.get(key, (None,))[0] for _label, rows in runs)
            cells.append(f"{b / a:.1f}×" if a and b is not None else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    """Read each LABEL=LOG and print the merged table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="LABEL=LOG: a column label and a bench_pipeline output")
    ap.add_argument("--queries", type=int, default=None)
    a = ap.parse_args()
    runs = []
    for arg in a.runs:
        label, sep, path = arg.partition("=")
        if not sep:
            sys.exit(f"side_by_side: {arg!r} is not LABEL=LOG (e.g. cuda=/tmp/bench-cuda.log)")
        p = Path(path)
        runs.append((label, stage_rows(p.read_text()) if p.is_file() else {}))
    print(merged(runs, a.queries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
