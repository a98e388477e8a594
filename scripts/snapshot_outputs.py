"""Byte snapshots of the pipeline's outputs, so a refactor can show it changed no result.

    .venv/bin/python scripts/snapshot_outputs.py save runs/snap-before [--data sample,locomo,musique,scifact]
                                                   [--presets best,bme,reme,oks,hipporag] [--embed minilm]
                                                   [--extra oks=/path/to/instance:oks,oks_team]
                                                   [--limit-queries 20]
    ... refactor ...
    .venv/bin/python scripts/snapshot_outputs.py save runs/snap-after --emb-from runs/snap-before (same options)
    .venv/bin/python scripts/snapshot_outputs.py compare runs/snap-before runs/snap-after

``save`` runs ``recall run`` for every (data, preset) pair and ``recall precompute`` (data=locomo,
preset=best, or the first pair) in fresh processes, each with its own cache folder under the
snapshot (so nothing is reused from an earlier code version), and writes ``hashes.json``: the
sha256 of every ``recall.parquet``, ``metrics.json`` and recall-cache partition. ``compare`` prints
one line per file (``same`` / ``DIFFERENT`` / ``missing``) and exits 1 unless every file is the same;
its last line is ``identical: <n>/<total>``. ``--extra DATA=PATH:PRESET,PRESET`` (repeatable) adds
pairs on a dataset that needs a path (``data=oks data.path=PATH``, e.g. an instance written by
``scripts/parity/oks_store.py``) and presets of its own (``oks_team``); ``--limit-queries N`` runs the first
``N`` queries of every dataset (``data.limit_queries``), a slice that keeps a snapshot short. The snapshots hold recall ids and scores, never corpus
text; keep them out of the repository (``runs/`` is ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

DATA = "sample,locomo,musique,scifact"
PRESETS = "best,bme,reme,oks,hipporag"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recall(args: list[str]) -> None:
    """One ``recall`` command in a fresh process (python -m pipeline), failing loudly."""
    done = subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"recall {' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def partition_sha256(path: Path) -> str:
    """sha256 of a recall-cache partition without its ``recipe`` column: the recipe is a cache key
    that holds the code version (a hash of ``pipeline/**/*.py``, issue 13), so any code change —
    a refactor included — changes it by design; every other column (recall rows, query hash, scope
    version) must stay byte-identical. The frame is written back to Parquet in memory with fixed settings.
    A tiers partition (``<cache_dir>/tiers``, signals on) has no ``recipe`` column and is hashed whole."""
    import io as _io

    import polars as pl

    buf = _io.BytesIO()
    pl.read_parquet(path).drop("recipe", strict=False).write_parquet(
        buf, compression="zstd", statistics=False
    )
    return hashlib.sha256(buf.getvalue()).hexdigest()


def _stable(rel: str) -> str:
    """A recall-cache path without its generation folder (``…/<namespace>/g-000001/scope=…`` →
    ``…/<namespace>/scope=…``): two snapshots name the same partition alike."""
    return re.sub(r"/g-\d{6,}/", "/", rel)


def hashes(root: Path) -> dict[str, str]:
    """{relative path: sha256} of the runs' results and the recall-cache partitions under ``root``
    (not manifests: they hold timings; not precompute's own scratch run); a partition is hashed
    without its ``recipe`` key column (:func:`partition_sha256`)."""
    names = ("recall.parquet", "metrics.json", "data.parquet")
    return {
        _stable(p.relative_to(root).as_posix()): partition_sha256(p)
        if p.name == "data.parquet"
        else sha256(p)
        for sub in ("runs", "precompute")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file() and p.name in names
    }


def carry_embeddings(src: Path, dst: Path) -> None:
    """Copy the content-addressed embedding stores (``emb-*.sqlite``) from ``src`` into ``dst``.
    Their keys hold the encoder's cache id (model files, settings, encoder code, library versions),
    so a store made by other code or another model is never read; only candidates, graphs and every
    later stage are recomputed in each run's own cache."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("emb-*.sqlite")) if src.is_dir() else []:
        shutil.copyfile(f, dst / f.name)


def parse_extra(spec: str) -> list[tuple[str, str | None, str]]:
    """``DATA=PATH:PRESET,PRESET`` (or ``DATA:PRESET``) → [(data, path, preset), ...]."""
    head, sep, presets = spec.rpartition(":")
    if not sep or not head or not presets:
        sys.exit(f"--extra {spec!r}: expected DATA=PATH:PRESET[,PRESET...], e.g. oks=/tmp/oks:oks")
    name, _, path = head.partition("=")
    return [(name, path or None, p) for p in presets.split(",")]


def data_args(name: str, path: str | None, limit: int | None) -> list[str]:
    """The ``data=…`` overrides of one dataset: its name, its path if given (with the
    ``queries.jsonl`` there, as ``scripts/parity/oks_store.py`` writes it), its query slice."""
    return (
        [f"data={name}"]
        + ([f"data.path={path}"] if path else [])
        + (
            [f"data.queries={path}/queries.jsonl"]
            if path and Path(path, "queries.jsonl").is_file()
            else []
        )
        + ([f"data.limit_queries={limit}"] if limit else [])
    )


def save(
    out: Path,
    data: list[str],
    presets: list[str],
    embed: str,
    emb_from: Path | None = None,
    extra: list[tuple[str, str | None, str]] = (),
    limit: int | None = None,
) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    store = (
        out / "emb"
    )  # the embeddings every run shares (encoding MiniLM twenty times is most of the time)
    carry_embeddings(emb_from / "emb" if emb_from else store, store)
    pairs = [(d, None, p) for d in data for p in presets] + list(extra)
    for d, path, p in pairs:
        print(f"run {d} {p}", flush=True)
        cache = out / "cache" / f"{d}-{p}"
        carry_embeddings(store, cache)
        recall(
            [
                "run",
                *data_args(d, path, limit),
                f"preset={p}",
                f"embed={embed}",
                "report=false",
                f"out_dir={out / 'runs' / f'{d}-{p}'}",
                f"cache_dir={cache}",
            ]
        )
        carry_embeddings(cache, store)
    d, p = ("locomo", "best") if "locomo" in data and "best" in presets else (data[0], presets[0])
    print(f"precompute {d} {p}", flush=True)
    carry_embeddings(store, out / "precompute")
    recall(
        [
            "precompute",
            *data_args(d, None, limit),
            f"preset={p}",
            f"embed={embed}",
            f"out_dir={out / 'precompute-run'}",
            f"cache_dir={out / 'precompute'}",
        ]
    )
    table = hashes(out)
    (out / "hashes.json").write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return table


def compare(a: Path, b: Path) -> int:
    ha, hb = (json.loads((x / "hashes.json").read_text()) for x in (a, b))
    same = 0
    for name in sorted(set(ha) | set(hb)):
        state = (
            "missing"
            if name not in ha or name not in hb
            else "same"
            if ha[name] == hb[name]
            else "DIFFERENT"
        )
        same += state == "same"
        print(f"{state:9s} {name}")
    total = len(set(ha) | set(hb))
    print(f"identical: {same}/{total}")
    return 0 if same == total and total else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("out", type=Path)
    s.add_argument("--data", default=DATA)
    s.add_argument("--presets", default=PRESETS)
    s.add_argument("--embed", default="minilm")
    s.add_argument(
        "--extra",
        action="append",
        default=[],
        help="DATA=PATH:PRESET[,PRESET]: pairs on a dataset given by path (oks=/tmp/oks:oks,oks_team)",
    )
    s.add_argument(
        "--limit-queries", type=int, default=None, help="run the first N queries of each dataset"
    )
    s.add_argument(
        "--emb-from",
        type=Path,
        default=None,
        help="an earlier snapshot whose embedding stores to start from (keys include the encoder code)",
    )
    r = sub.add_parser(
        "rehash",
        help="recompute hashes.json of a snapshot from its files (after this script changed)",
    )
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    a = ap.parse_args()
    if a.cmd == "save":
        extra = [pair for spec in a.extra for pair in parse_extra(spec)]
        table = save(
            a.out,
            a.data.split(","),
            a.presets.split(","),
            a.embed,
            a.emb_from,
            extra,
            a.limit_queries,
        )
        print(f"saved {len(table)} file hashes to {a.out / 'hashes.json'}")
        return 0
    if a.cmd == "rehash":
        table = hashes(a.out)
        (a.out / "hashes.json").write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(f"rehashed {len(table)} files into {a.out / 'hashes.json'}")
        return 0
    return compare(a.a, a.b)


if __name__ == "__main__":
    sys.exit(main())
