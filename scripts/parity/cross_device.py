"""One answer across devices: the same recall run on the CPU and on CUDA, rows compared by the
contract of docs/reliability.md "One answer across devices" (``pipeline.report.crossdevice``:
the same rows and ranks, a move only inside a near-tie, every float column within the bound).

    python scripts/parity/cross_device.py [--sets sample,locomo,synth,synth-dup] [--embed hashing]
        [--devices cpu,cuda] [--synth-nodes 100000] [--synth-queries 1000] [--bound 1e-4]
        [--out /tmp/cross_device] [overrides, e.g. preset=bme]

- ``sample``: the bundled sample, ``recall run preset=best`` per device (own output and cache
  folders: no device reads the other's embeddings or stage caches).
- ``locomo``: LoCoMo dev5 (``data=locomo``, ``RECALL_DATA_DIR`` or ``data_dir=``), likewise.
- ``synth``: the synthetic corpus of ``scripts/bench/bench_pipeline.py`` (``--synth-nodes`` notes,
  ``--synth-queries`` queries) through the same query path, the generator's vectors given to both
  devices (the pipeline's arithmetic alone; with ``--embed`` a model's vectors would differ by
  device); ``synth-dup``: the same with ``--dup-share 0.2`` (exact cosine ties across the cut).

With ``--embed minilm`` each device embeds with its own model run (float16 on a GPU by
``embed.precision=auto``), so ``sample`` and ``locomo`` then compare rows whose inputs differ by
the encoder's bound (cosine >= 0.9999) and are held to ``crossdevice.EMBED_BOUND``; the line says
so. One line per set; exits 1 when a set fails its comparison.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import polars as pl
from hydra import compose, initialize_config_dir

from pipeline.core.stagelog import StageLog
from pipeline.report import crossdevice

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "bench"))


def _cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=overrides)


def run_set(name: str, device: str, a, root: Path) -> pl.DataFrame:
    """The recall table of set ``name`` on ``device`` (its own folders under ``root``)."""
    if name in ("sample", "locomo"):
        from pipeline.run import runner

        out, cache = root / f"{name}-{device}", root / f"cache-{name}-{device}"
        data = [] if name == "sample" else ["data=locomo"]
        cfg = _cfg([
            "preset=best", f"embed={a.embed}", f"device={device}", f"out_dir={out}",
            f"cache_dir={cache}", "report=false", *data, *a.overrides,
        ])  # fmt: skip
        runner.run(cfg, out)
        return pl.read_parquet(out / "recall.parquet")
    import bench_pipeline as bp
    from pipeline.contract.ingest import nodes_and_queries
    from pipeline.run import querypath
    from pipeline.synth.corpus import make

    dup = 0.2 if name == "synth-dup" else 0.0
    ds, xb, xq = make(a.synth_nodes, a.synth_queries, names=20, avg_degree=8, dup_share=dup)
    cache = root / f"cache-{name}-{device}"
    cfg = bp.compose_cfg("best", [f"device={device}", *a.overrides], str(cache))
    nodes, queries = nodes_and_queries(ds, cfg.get("query_part"))
    with bp.given_vectors(xb, ds.nodes["node_id"], xq, ds.queries["query_id"]):
        got = querypath.recall_queries(cfg, ds, nodes, queries, device, StageLog())
    return got.recall


def main() -> int:
    """Run every set on both devices and print one comparison line each."""
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sets", default="sample,locomo,synth,synth-dup")
    ap.add_argument("--embed", default="hashing")
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--synth-nodes", type=int, default=100_000)
    ap.add_argument("--synth-queries", type=int, default=1000)
    ap.add_argument("--bound", type=float, default=None,
                    help="default: SCORE_BOUND, or EMBED_BOUND for sample/locomo with a model")  # fmt: skip
    ap.add_argument("--out", default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    first, second = a.devices.split(",")
    root = Path(a.out or tempfile.mkdtemp(prefix="cross_device-"))
    root.mkdir(parents=True, exist_ok=True)
    bad = False
    for name in a.sets.split(","):
        if name == "locomo" and not Path(_cfg(["data=locomo"]).data.path).is_file():
            print(f"locomo: skipped, no {_cfg(['data=locomo']).data.path} (RECALL_DATA_DIR)")
            continue
        want = run_set(name, first, a, root)
        got = run_set(name, second, a, root)
        own = a.embed != "hashing" and "synth" not in name  # each device's own embeddings
        bound = a.bound or (crossdevice.EMBED_BOUND if own else crossdevice.SCORE_BOUND)
        res = crossdevice.compare(want, got, bound)
        inputs = " (each device's own embeddings)" if own else ""
        print(crossdevice.summary(f"{name} {first} vs {second}{inputs}", res), flush=True)
        bad |= not res["ok"]
    if not a.out:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
