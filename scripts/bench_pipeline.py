"""End-to-end batch recall on synthetic corpora, per stage, next to a plain FAISS flat scan.

    .venv/bin/python scripts/bench_pipeline.py [--sizes 10000 100000] [--queries 1000] [overrides, e.g. diffuse=pedsa]

Query encoding is excluded (embeddings are generated); everything else of `preset=best` runs:
dense + BM25 channels, fusion, graph build, diffusion (PPR; `diffuse=pedsa` as an override), scoring,
top-k selection. The floor is
`IndexFlatIP.search(xq, 100)` over the same embeddings in the same process. Prints a table; the last
line is `end-to-end / flat-scan throughput at <n>: <ratio>` for the largest size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import faiss
import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from pipeline import backend
from pipeline.channels import candidates
from pipeline.stages import channels, diffuse, fuse, graph, score
from pipeline.stages.select import SelectParams, select
from pipeline.synth.corpus import make

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(n: int, nq: int, overrides: list[str] = ()) -> dict:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=["preset=best", "device=cpu", *overrides])
    ds, xb, xq = make(n, nq)
    nodes, queries = ds.nodes.sort("node_id"), ds.queries
    order = np.argsort(ds.nodes["node_id"].to_numpy(), kind="stable")
    xb = xb[order]
    device = backend.resolve_device(cfg.device)  # device=cuda as an override: FAISS, CuPy diffusion
    t = {}
    t0 = time.perf_counter()
    flat = faiss.IndexFlatIP(xb.shape[1])
    flat.add(xb)
    flat.search(xq, 100)
    t["flat scan (floor)"] = time.perf_counter() - t0
    start = time.perf_counter()
    s = time.perf_counter()
    cand = candidates.generate(
        nodes,
        queries,
        ["dense", "lexical"],
        xb,
        xq,
        channels.DenseParams.from_cfg(cfg.dense),
        channels.LexicalParams.from_cfg(cfg.lexical),
        device,
    )
    t["channels"] = time.perf_counter() - s
    s = time.perf_counter()
    fp = OmegaConf.to_container(cfg.fuse)
    cand = fuse.fuse(cand, ["dense", "lexical"], fp.pop("method"), **fp)
    t["fuse"] = time.perf_counter() - s
    s = time.perf_counter()
    edges = graph.build(nodes, ds.edges, graph.GraphParams.from_cfg(cfg.graph))
    t["graph"] = time.perf_counter() - s
    s = time.perf_counter()
    g = diffuse.run(
        cand, nodes, queries, edges, diffuse.DiffusionParams.from_cfg(cfg.diffuse), device
    )
    cand = cand.join(g, on=["query_idx", "node_idx"], how="full", coalesce=True)
    t["diffuse"] = time.perf_counter() - s
    s = time.perf_counter()
    cand = score.compute(cand, dict(cfg.score.terms), [], False)
    sel = select(cand, 50, SelectParams.defaults())
    t["score + select"] = time.perf_counter() - s
    t["end-to-end"] = time.perf_counter() - start
    assert sel["query_idx"].n_unique() == nq
    return {"n": n, "edges": edges.height, "t": t, "rss": rss_mb()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument(
        "overrides", nargs="*", help="config overrides on top of preset=best, e.g. diffuse=pedsa"
    )
    a = ap.parse_args()
    print(f"queries per size: {a.queries}; CPU threads: faiss {faiss.omp_get_max_threads()}")
    print(
        "| nodes | edges | stage | seconds | queries/s | peak RSS MiB |\n|---|---|---|---|---|---|"
    )
    last = None
    for n in a.sizes:
        r = run(n, a.queries, a.overrides)
        for stage, sec in r["t"].items():
            print(
                f"| {n:,} | {r['edges']:,} | {stage} | {sec:.2f} | {a.queries / sec:,.0f} | {r['rss']:,.0f} |"
            )
        last = r
        sys.stdout.flush()
    ratio = last["t"]["flat scan (floor)"] / last["t"]["end-to-end"]
    print(f"end-to-end / flat-scan throughput at {last['n']}: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
