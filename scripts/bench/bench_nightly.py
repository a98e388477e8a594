"""Nightly recall-cache precompute over many small workspaces (issue #16): a full build, then a
rerun after a share of the workspaces changed; the rerun recomputes only those.

The data comes from ``pipeline.synth.workspaces`` (W workspaces × ``--notes`` notes, ``--queries``
queries scoped to each). A changed workspace has the text of its first note edited. Each
``recall precompute`` (``embed=hashing preset=best``) runs in a fresh process; wall includes imports.
``keys s`` is the cache-key computation from the cache manifest (scope versions, query hashes,
recipe). With ``--check`` a third precompute builds a fresh cache on the edited data and the rows
the rerun's cache serves are compared with it (``precompute.served``).

    python scripts/bench/bench_nightly.py [--workspaces 10000] [--changed 0.01] [--out /tmp/bench_nightly] [--check]

Last line: ``nightly rerun at <W> workspaces, <p>% changed: <ratio> of the full build``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.run import precompute  # noqa: E402
from pipeline.synth import workspaces  # noqa: E402


def run_precompute(data: Path, cache: Path, out: Path) -> tuple[dict, float, float]:
    """(the cache's _manifest.json, wall seconds, peak RSS MiB) of one ``recall precompute`` in a
    fresh process; the peak is ``/usr/bin/time``'s maximum resident set size of that process."""
    rss = out.parent / f"{out.name}.maxrss"
    cmd = [
        "/usr/bin/time",
        "-f",
        "%M",
        "-o",
        str(rss),
        sys.executable,
        "-m",
        "pipeline",
        "precompute",
        "data=parquet",
        f"data.path={data}",
        "embed=hashing",
        "preset=best",
        f"cache_dir={cache}",
        f"out_dir={out}",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    peak = int(rss.read_text().split()[-1]) / 1024  # KiB -> MiB
    return json.loads((precompute.live(cache) / "_manifest.json").read_text()), wall, peak


def edited(data: Path, dst: Path, changed: float) -> int:
    """A copy of the dataset at ``data`` in ``dst`` with the first note of every ``1/changed``-th
    workspace edited; returns the number of workspaces changed."""
    nodes = pl.read_parquet(data / "nodes.parquet")
    step = max(1, round(1 / changed))
    ws = nodes["node_id"].str.extract(r"^u(\d+)-n0$").cast(pl.Int64)
    hit = ws.is_not_null() & (ws % step == 0)
    dst.mkdir(parents=True, exist_ok=True)
    nodes.with_columns(
        text=pl.when(hit).then(pl.col("text") + " (edited)").otherwise(pl.col("text"))
    ).write_parquet(dst / "nodes.parquet")
    for name in ("edges", "queries"):
        pl.read_parquet(data / f"{name}.parquet").write_parquet(dst / f"{name}.parquet")
    return int(hit.sum())


def line(name: str, man: dict, wall: float, peak: float) -> str:
    t = man["timings_s"]
    return (
        f"| {name} | {man['hits']:,} | {man['misses']:,} | {t['keys']:.1f} | {t['run']:.1f} | "
        f"{wall:.1f} | {peak:,.0f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspaces", type=int, default=10000)
    ap.add_argument("--notes", type=int, default=40)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--changed", type=float, default=0.01)
    ap.add_argument("--out", default="/tmp/bench_nightly")
    ap.add_argument(
        "--check", action="store_true", help="compare the rerun's cache with a fresh build"
    )
    a = ap.parse_args()
    out = Path(a.out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    data = workspaces.write(workspaces.make(a.workspaces, a.notes, a.queries), out / "data")
    full, full_wall, full_peak = run_precompute(data, out / "cache", out / "run1")
    n = edited(data, out / "data-edited", a.changed)
    rerun, rerun_wall, rerun_peak = run_precompute(out / "data-edited", out / "cache", out / "run2")
    print(f"{a.workspaces:,} workspaces × {a.notes} notes × {a.queries} queries; {n} changed")
    print("| build | hits | misses | keys s | run s | wall s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    print(line("full", full, full_wall, full_peak))
    print(line(f"rerun, {n} changed", rerun, rerun_wall, rerun_peak))
    if a.check:
        fresh, _, _ = run_precompute(out / "data-edited", out / "cache-fresh", out / "run3")
        same = precompute.served(out / "cache").equals(precompute.served(out / "cache-fresh"))
        print(f"rerun serves the rows of a fresh build: {same}")
    print(
        f"nightly rerun at {a.workspaces} workspaces, {a.changed:.0%} changed: "
        f"{rerun_wall / full_wall:.3f} of the full build"
    )


if __name__ == "__main__":
    main()
