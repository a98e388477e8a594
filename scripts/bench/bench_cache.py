"""Recall cache: cold vs warm vs ~1%-changed reruns of ``recall precompute``.

    .venv/bin/python scripts/bench/bench_cache.py --data locomo [--preset best] [--embed minilm]
    .venv/bin/python scripts/bench/bench_cache.py --data synthetic --nodes 20000 --queries 2000 --workspaces 100

The dataset is written as a Parquet folder (``data=parquet``) under ``--work``; the embedding cache
is warmed first, so "cold" means an empty recall cache, not un-embedded texts. The change edits
the text of ~``--change`` of all nodes, all inside one scope (one conversation / one workspace).
Both changed runs start from the same embedding cache (the edited texts are encoded in each). Then
``recall run`` on the edited data — the reference, with its own cache folder (``cache-run``: a copy
of the warm-up's embeddings only, no candidates, no recall cache), so it reads nothing either
precompute wrote — is compared with the rows the changed recall cache serves (exit 1 if they
differ, or if the reference reused a cached stage). Prints a table; the last line is
``changed rerun / full recompute: <ratio>``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import polars as pl
from hydra import compose, initialize_config_dir

from pipeline.adapters import locomo
from pipeline.run import precompute, runner
from pipeline.synth.corpus import make

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def write_locomo(dst: Path) -> None:
    ds = locomo.load(
        str(Path(__file__).resolve().parents[3] / "shared/data/locomo/locomo_dev5.json.gz")
    )
    _write(ds, dst)


def write_synthetic(dst: Path, n: int, nq: int, workspaces: int) -> None:
    ds, _xb, _xq = make(n, nq)
    ws = (pl.col("node_id").str.slice(1).cast(pl.Int64) // 20 % workspaces).cast(
        pl.String
    )  # whole docs
    ds.nodes = ds.nodes.with_columns(
        doc_id=pl.concat_str([pl.lit("u"), ws, pl.lit("/"), pl.col("doc_id")])
    )
    ds.queries = ds.queries.with_columns(
        doc_scope=pl.concat_list(
            pl.concat_str(
                [
                    pl.lit("u"),
                    (pl.col("query_id").str.slice(1).cast(pl.Int64) % workspaces).cast(pl.String),
                ]
            )
        )
    )
    _write(ds, dst)


def _write(ds, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    ds.nodes.write_parquet(dst / "nodes.parquet")
    ds.queries.write_parquet(dst / "queries.parquet")
    if ds.edges is not None:
        ds.edges.write_parquet(dst / "edges.parquet")


def change(dst: Path, frac: float) -> int:
    """Edit ~frac of all nodes, taken from the first node's scope (doc_id prefix before '/')."""
    nodes = pl.read_parquet(dst / "nodes.parquet")
    scope = nodes["doc_id"][0].split("/")[0]
    n = max(1, round(frac * nodes.height))
    pick = (
        nodes.with_row_index("i").filter(pl.col("doc_id").str.starts_with(scope + "/"))["i"].head(n)
    )
    nodes = (
        nodes.with_row_index("i")
        .with_columns(
            text=pl.when(pl.col("i").is_in(pick.implode()))
            .then(pl.col("text") + " (edited)")
            .otherwise(pl.col("text"))
        )
        .drop("i")
    )
    nodes.write_parquet(dst / "nodes.parquet")
    return len(pick)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=["locomo", "synthetic"], default="locomo")
    ap.add_argument("--preset", default="best")
    ap.add_argument("--embed", default="minilm")
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--workspaces", type=int, default=100)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--work", default="/tmp/bench_cache")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    write_locomo(data) if a.data == "locomo" else write_synthetic(
        data, a.nodes, a.queries, a.workspaces
    )
    over = [
        "device=cpu",
        "data=parquet",
        f"data.path={data}",
        f"preset={a.preset}",
        f"embed={a.embed}",
        "embed.cache=true",
        f"cache_dir={work / 'cache'}",
        "report=false",
    ]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=over)
    runner.run(cfg, work / "warm-embeddings")  # fills the embedding cache only
    for sub in ("recall", "candidates"):
        shutil.rmtree(work / "cache" / sub, ignore_errors=True)
    rows = []

    def timed(name: str, c) -> None:
        t = time.perf_counter()
        res = precompute.precompute(c)
        rows.append((name, time.perf_counter() - t, res["hits"], res["misses"]))
        print(name, res["timings_s"], res["run_timings_s"], file=sys.stderr)

    timed("cold (empty recall cache)", cfg)
    timed("warm (nothing changed)", cfg)
    edited = change(data, a.change)
    for copy in ("cache-full", "cache-run"):  # the warm-up's embeddings only
        shutil.copytree(
            work / "cache", work / copy, ignore=shutil.ignore_patterns("recall", "candidates")
        )
    timed("changed, with the recall cache", cfg)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        full = compose("config", overrides=[*over, f"cache_dir={work / 'cache-full'}"])
    timed("changed, full recompute", full)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        ref = compose("config", overrides=[*over, f"cache_dir={work / 'cache-run'}"])
    # `recall run` on the edited data, in its own cache folder: what the cache must serve
    reused = runner.run(ref, work / "full-run")["manifest"]["reused_stages"]
    plain = pl.read_parquet(work / "full-run" / "recall.parquet").sort(
        ["query_id", "rank"], maintain_order=True
    )
    same = not reused and precompute.served(work / "cache").select(plain.columns).equals(plain)
    print(
        f"data: {a.data}; preset={a.preset} embed={a.embed}; nodes edited: {edited} of "
        f"{pl.read_parquet(data / 'nodes.parquet').height} (one scope)"
    )
    print("| run | seconds | hits | misses |\n|---|---|---|---|")
    for name, sec, h, m in rows:
        print(f"| {name} | {sec:.2f} | {h} | {m} |")
    print(f"reference run (own cache folder) reused stages: {reused}")
    print(f"changed rerun serves the rows of a full run: {same}")
    print(f"changed rerun / full recompute: {rows[2][1] / rows[3][1]:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
