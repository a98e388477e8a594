"""Ablation of the `best` recipe: each layer and seed source switched off in turn, on each dev set.

    .venv/bin/python scripts/ablate.py [--out runs/ablation] [--data locomo,musique,scifact]

Every variant is one `recall run --multirun data=<sets> preset=best <overrides>`; the script prints a
Markdown table per metric set plus the time each run spent (sum of the manifest's stage seconds, and
the graph + diffuse part of it; evaluation excluded). Each variant gets its own candidate cache, so
the channels stage is timed too; embeddings come from the shared cache. Runs are kept under --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

VARIANTS = [
    ("best", []),
    ("− entity layer (and its query seeds)", ["graph.hubs.entities=false"]),
    ("− query-entity seeds", ["diffuse.entity_seed_share=0"]),
    ("− temporal chain", ["graph.temporal=false"]),
    ("− seed sharpening (seed_power 1)", ["diffuse.seed_power=1"]),
    ("− diffusion (channels + fusion only)", ["diffuse=none"]),
    (
        "− stemming, k1/b back to 1.5/0.75",
        ["lexical.stemmer=none", "lexical.k1=1.5", "lexical.b=0.75"],
    ),
    ("RRF instead of weighted sum (same weights)", ["fuse=rrf"]),
    (
        "+ session/speaker links (doc_id 5, speaker 5)",
        ["graph.hubs.groups.doc_id=5", "graph.hubs.groups.speaker=5"],
    ),
    ("+ synonym links (k 10, cos ≥ 0.8)", ["graph.hubs.synonym_k=10"]),
    (
        "plain hybrid (wsum 0.75/0.25, no graph; issue 2)",
        [
            "diffuse=none",
            "lexical.stemmer=none",
            "lexical.k1=1.5",
            "lexical.b=0.75",
            "fuse.weights.dense=0.75",
            "fuse.weights.lexical=0.25",
        ],
    ),
]
METRICS = {
    "locomo": ["recall@5", "recall@10", "recall@25", "recall@50"],
    "musique": ["recall@2", "recall@5", "recall@10"],
    "scifact": ["ndcg@10", "recall@10"],
}


def fresh_cache(out: Path, cache: Path) -> Path:
    """A cache dir for one variant: the shared embedding caches linked in, nothing else, so the
    channels stage is recomputed (its time counts) while no text is embedded again."""
    mine = out / "cache"
    mine.mkdir(parents=True, exist_ok=True)
    for f in cache.glob("emb-*.sqlite"):
        if not (mine / f.name).exists():
            (mine / f.name).symlink_to(f.resolve())
    return mine


def run_variant(out: Path, sets: str, overrides: list[str], cache: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pipeline.cli.main",
        "run",
        "--multirun",
        f"data={sets}",
        "preset=best",
        "report=false",
        f"out_dir={out}",
        f"cache_dir={fresh_cache(out, cache)}",
        *overrides,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")


def cell(run: Path, data: str) -> tuple[str, float, float]:
    m = json.loads((run / "metrics.json").read_text())
    secs = {
        k: v
        for k, v in json.loads((run / "manifest.json").read_text())["timings_s"].items()
        if k != "evaluate"
    }
    vals = " / ".join(
        f"{m[k]:.3f}" if k.startswith("ndcg") else f"{100 * m[k]:.1f}" for k in METRICS[data]
    )
    return vals, sum(secs.values()), secs.get("graph", 0.0) + secs.get("diffuse", 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/ablation")
    ap.add_argument("--data", default="locomo,musique,scifact")
    ap.add_argument(
        "--cache", default=".cache/recall", help="where the embedding caches (emb-*.sqlite) are"
    )
    a = ap.parse_args()
    sets = a.data.split(",")
    rows = []
    for i, (name, ov) in enumerate(VARIANTS):
        out = Path(a.out) / f"v{i:02d}"
        if not all((out / f"{j}-{d}-best" / "manifest.json").exists() for j, d in enumerate(sets)):
            run_variant(out, a.data, ov, Path(a.cache))
        rows.append((name, ov, [cell(out / f"{j}-{d}-best", d) for j, d in enumerate(sets)]))
    head = " | ".join(f"{d} {' / '.join(METRICS[d])}" for d in sets)
    print(f"| variant | overrides | {head} |")
    print("|---" * (2 + len(sets)) + "|")
    for name, ov, cells in rows:
        print(f"| {name} | `{' '.join(ov) or '—'}` | " + " | ".join(c[0] for c in cells) + " |")
    print()
    print("| variant | " + " | ".join(f"{d}: s (graph+diffuse s)" for d in sets) + " |")
    print("|---" * (1 + len(sets)) + "|")
    for name, _ov, cells in rows:
        print(f"| {name} | " + " | ".join(f"{c[1]:.1f} ({c[2]:.1f})" for c in cells) + " |")


if __name__ == "__main__":
    main()
