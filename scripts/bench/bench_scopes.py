"""Many small workspaces (issue #16): per-stage seconds, q/s and peak RSS of a full run per size.

For each W in ``--sizes`` the generator ``pipeline.synth.workspaces`` writes W workspaces × ``--notes``
notes (names, a next-note chain) with ``--queries`` queries per workspace scoped to it, and
``python -m pipeline run data=parquet embed=hashing preset=best`` runs on it in a fresh process (so
the peak RSS is that run's). Stage seconds come from the manifest's ``timings_s``; wall is the whole
process (imports included); "recall s" is every stage after ingest and embedding, before export.
``--profile`` runs the largest size under ``python -m cProfile -o <out>/profile-<W>.prof`` and prints
the top functions by cumulative and by own time. ``--against <repo>`` runs every size a second time
with that checkout's code (e.g. the per-scope path on main), checks that both write the same
``recall.parquet`` bytes, and the last line is ``scopes speedup at <W>: <ratio>`` (recall stages).
Above ``--against-max`` workspaces (default 10,000) the other checkout runs on that many only and
its recall seconds are scaled to W (its cost per workspace is flat: docs/benchmarks.md).

Usage: python scripts/bench/bench_scopes.py [--sizes 500,2000] [--notes 40] [--queries 5] [--out /tmp/bench_scopes]
       [--against /work/main] [--against-max 10000] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.synth.workspaces import make, write  # noqa: E402

STAGES = ("channels", "fuse", "graph", "diffuse", "score", "select")
NOT_RECALL = ("ingest", "embed", "export", "report", "analyze", "evaluate")


def run_once(data: Path, out: Path, profile: Path | None, code: Path = ROOT) -> tuple[dict, float]:
    """(manifest, wall seconds) of one ``pipeline run`` in a fresh process; cold caches."""
    cmd = [
        sys.executable,
        *(["-m", "cProfile", "-o", str(profile)] if profile else []),
        "-m",
        "pipeline",
        "run",
        "data=parquet",
        f"data.path={data}",
        "embed=hashing",
        "preset=best",
        "report=false",
        f"out_dir={out}",
        f"cache_dir={out}-cache",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    subprocess.run(["rm", "-rf", str(out), f"{out}-cache"], check=True)
    t0 = time.perf_counter()
    subprocess.run(
        cmd, check=True, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - t0
    return json.loads((out / "manifest.json").read_text()), wall


def recall_s(m: dict) -> float:
    return sum(v for k, v in m["timings_s"].items() if k not in NOT_RECALL)


def row(w: int, m: dict, wall: float, code: str) -> str:
    t, rows, recall = m["timings_s"], m["rows"], recall_s(m)
    cells = [
        code,
        f"{w:,}",
        f"{rows['nodes']:,}",
        f"{rows['queries']:,}",
        *(f"{t.get(s, 0.0):.1f}" for s in STAGES),
        f"{recall:.1f}",
        f"{wall:.0f}",
        f"{rows['queries'] / wall:.0f}",
        f"{m['peak_rss_mb']:,.0f}",
    ]
    return "| " + " | ".join(cells) + " |"


def top(prof: Path, n: int) -> None:
    for key in ("cumulative", "tottime"):
        print(f"\n# top {n} by {key}: {prof}")
        pstats.Stats(str(prof)).sort_stats(key).print_stats(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--notes", type=int, default=40)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--out", default="/tmp/bench_scopes")
    ap.add_argument("--profile", action="store_true", help="cProfile the largest size (slower)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument(
        "--against", default=None, help="another checkout to time on the same data (old path)"
    )
    ap.add_argument(
        "--against-max",
        type=int,
        default=10000,
        help="above this many workspaces the other checkout runs on this many and its recall "
        "seconds are scaled by W / this (its cost per workspace is flat)",
    )
    a = ap.parse_args()
    sizes, out = [int(s) for s in a.sizes.split(",")], Path(a.out)
    print(
        "| code | workspaces | nodes | queries | "
        + " | ".join(f"{s} s" for s in STAGES)
        + " | recall s | wall s | q/s | peak RSS MiB |"
    )
    print("|" + "---|" * (len(STAGES) + 8))
    ratio = None
    for w in sizes:
        data = write(make(w, a.notes, a.queries), out / f"data-{w}")
        prof = out / f"profile-{w}.prof" if a.profile and w == max(sizes) else None
        m, wall = run_once(data, out / f"run-{w}", prof)
        print(row(w, m, wall, "this") + (" (under cProfile)" if prof else ""), flush=True)
        if a.against and w > a.against_max:  # the old path on a sample of workspaces, scaled
            few = a.against_max
            sample = write(make(few, a.notes, a.queries), out / f"data-{few}")
            old, old_wall = run_once(sample, out / f"old-{few}", None, Path(a.against))
            print(
                row(few, old, old_wall, Path(a.against).name)
                + f" (sample for {w:,}: recall s × {w / few:g} = {recall_s(old) * w / few:.1f})",
                flush=True,
            )
            ratio = recall_s(old) * w / few / recall_s(m)
        elif a.against:
            old, old_wall = run_once(data, out / f"old-{w}", None, Path(a.against))
            same = (out / f"run-{w}" / "recall.parquet").read_bytes() == (
                out / f"old-{w}" / "recall.parquet"
            ).read_bytes()
            print(
                row(w, old, old_wall, Path(a.against).name)
                + (" (same recall.parquet bytes)" if same else " (recall.parquet DIFFERS)"),
                flush=True,
            )
            ratio = recall_s(old) / recall_s(m)
    if a.profile:
        top(out / f"profile-{max(sizes)}.prof", a.top)
    if ratio is not None:
        print(f"scopes speedup at {max(sizes)}: {ratio:.2f}")


if __name__ == "__main__":
    main()
