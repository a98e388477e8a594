"""End-to-end batch recall on synthetic corpora through the real query path, next to a FAISS flat scan.

    .venv/bin/python scripts/bench/bench_pipeline.py [--sizes 10000 100000] [--queries 1000]
        [--preset best] [--names 20] [--edges-per-node 4] [--dup-share 0.2] [--vectors encoder]
        [overrides, e.g. diffuse.solver=push embed=hashing]

What runs is ``pipeline.run.querypath.recall_queries``, the function ``recall run preset=<name>``
calls (``runner.run``), with the preset's whole config: every stage of ``querypath.STAGES`` that
the preset enables (channels, fusion, graph with the temporal chain and the entity hub layer,
diffusion with the query-entity hub seeds, score terms and factors, selection), query groups and
packs as the runner makes them. One step is swapped: the run-wide embed stage
(``stages.embed.embed_run``) takes the generator's embeddings instead of running the encoder, so
query encoding is excluded; it places them (node vectors in the ingested order, one per query
part) by one gather, as a run reads them from its embedding cache, and its seconds are the table's
``embed (vectors given)`` row (inside end-to-end). Ingest (adapters, schema checks) and writing the outputs are not timed.

The synthetic corpus (``pipeline/synth/corpus.py``) carries ``--names`` made-up capitalised names
per cluster (a unit's text two, a query's one), so the entity layer and its seeds are not empty.
``--edges-per-node K`` draws K·n explicit edges (``make(avg_degree=2K)``; self-loops dropped, so
a few fewer): 4 by default (100k nodes: 399,993 edges), 5 for issue 29's 1M nodes / 5M edges.
``--dup-share S`` makes that share of the notes exact copies of others (``make(dup_share=S)``:
the same text and vector under another id), so exact cosine ties cross the candidate cut.
``--vectors encoder`` replaces the generator's vectors with the config's encoder's over the texts
the embed stage would encode (``stages.embed.embed_texts``; the queries' texts), computed before
the timing: with ``embed=hashing`` these are ``recall run ... embed=hashing``'s vectors, whose
sparse word-hash features tie many cosines exactly.
``--warm N`` first runs the query path untimed on the last N queries, then removes every cache
folder it wrote but ``--keep`` (default ``tokens,entities``: the nodes' field tokens and entity
mentions, ``pipeline/core/npzcache.py``, cached for groups of ``MIN_ROWS`` nodes or more), so the timed
run reads them back as a later run over the same nodes does; ``--keep none`` keeps nothing (the
same warm-up, e.g. memory this process has touched once, without the cached values).
``--overlap M`` then reruns the first M queries, untimed, with every PPR solve checked against
the exact solver (``scripts/bench/ppr_overlap.py``). The floor is ``IndexFlatIP.search(xq, 100)`` over
the same embeddings in the same process. Prints a table of the stage times the run's own
``StageLog`` records (the manifest's ``timings_s``); after each size's row counts, the SHA-256 of
its recall frame's CSV text (the same before and after a change that should not alter results);
the last lines are the CPU seconds (``time.process_time``, all threads: steadier than wall time on
a shared machine) of the floor and of the query path, ``end-to-end / flat-scan throughput at
<n>: <ratio>`` and ``channels stage / flat-scan throughput`` (wall time) for the largest size.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import faiss
import numpy as np
import polars as pl
from hydra import compose, initialize_config_dir

from pipeline.contract.ingest import nodes_and_queries
from pipeline.core import backend
from pipeline.core.stagelog import StageLog
from pipeline.run import querypath
from pipeline.synth.corpus import make

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ppr_overlap  # noqa: E402

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def rss_mb() -> float:
    """Peak resident memory of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rows_of(ids: pl.Series, given: pl.Series) -> np.ndarray:
    """The row of each of ``ids`` among the generator's ``given`` ids: one join, not a Python walk
    over a million ids."""
    got = (
        pl.DataFrame({"id": ids})
        .join(
            pl.DataFrame({"id": given, "row": np.arange(len(given), dtype=np.int64)}),
            on="id",
            how="left",
            maintain_order="left",
        )
        .get_column("row")
    )
    if got.null_count():
        raise SystemExit(f"{got.null_count()} ids have no generated vector")
    return got.to_numpy()


@contextmanager
def given_vectors(xb: np.ndarray, node_ids: pl.Series, xq: np.ndarray, query_ids: pl.Series):
    """``querypath.embed_run`` replaced by one that puts the generator's vectors where the embed
    stage puts the encoder's (node vectors in the ingested node order, one vector per query part),
    each array by one gather (as a run reads them from its embedding cache)."""
    real = querypath.embed_run

    def embed_run(state, p, nodes, queries) -> int:
        with state.log.stage("embed"):
            state.xb = xb[rows_of(nodes["node_id"], node_ids)]
            plan = p.plan(queries)
            part = rows_of(queries["query_id"], query_ids)[plan["query_idx"].to_numpy()]
            state.xparts = xq[part]
            state.part_q, state.part_w = plan["query_idx"].to_numpy(), plan["weight"].to_numpy()
        return 0

    querypath.embed_run = embed_run
    try:
        yield
    finally:
        querypath.embed_run = real


class CpuStageLog(StageLog):
    """A ``StageLog`` that also sums each stage's CPU seconds (``time.process_time``, all
    threads) into ``cpu``: steadier than wall time when other jobs share the cores."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        """:meth:`StageLog.stage`, its CPU seconds added to ``cpu[name]``."""
        c0 = time.process_time()
        with super().stage(name):
            yield
        self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c0


def keep_only(root: Path, names: str) -> None:
    """Every file and folder under ``root`` removed but those ``names`` (comma-separated) names."""
    import shutil

    for p in root.iterdir():
        if p.name not in names.split(","):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def encoded(cfg, ds) -> tuple[np.ndarray, np.ndarray]:
    """(node vectors, query vectors) of ``cfg.embed.encoder`` over the texts the embed stage
    encodes (nodes: ``embed_texts``; queries: their text), in the generator's row order."""
    from pipeline.contract.registry import call_target
    from pipeline.stages.embed import embed_texts

    enc = call_target(cfg.embed.encoder)
    xb = enc.encode(embed_texts(ds.nodes, cfg.embed.include_title))
    xq = enc.encode(ds.queries["text"].to_list())
    return np.asarray(xb, np.float32), np.asarray(xq, np.float32)


def compose_cfg(preset: str, overrides: list[str], cache_dir: str):
    """The config ``recall run preset=<preset> device=cpu cache_dir=<fresh> <overrides>`` composes
    (a fresh cache: no stage is served from an earlier run's stage cache)."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(
            "config",
            overrides=[f"preset={preset}", "device=cpu", f"cache_dir={cache_dir}", *overrides],
        )


def run(
    n: int,
    nq: int,
    preset: str,
    names: int,
    overrides: list[str] = (),
    overlap: int = 0,
    edges_per_node: int = 4,
    warm: int = 0,
    keep: str = "tokens,entities",
    dup_share: float = 0.0,
    vectors: str = "synthetic",
) -> dict:
    """One size: the flat-scan floor, then the preset's query path; stage seconds and counts.
    ``overlap`` > 0: then, untimed, the first ``overlap`` queries again with each PPR solve
    checked against the exact solver (``ppr_overlap.recording``)."""
    cache = tempfile.TemporaryDirectory(prefix="bench_pipeline-")
    cfg = compose_cfg(preset, list(overrides), cache.name)
    ds, xb, xq = make(n, nq, names=names, avg_degree=2 * edges_per_node, dup_share=dup_share)
    if vectors == "encoder":
        xb, xq = encoded(cfg, ds)
    device = backend.resolve_device(cfg.device)  # device=cuda as an override: FAISS, CuPy diffusion
    t, cpu = {}, {}
    t0, c0 = time.perf_counter(), time.process_time()
    flat = faiss.IndexFlatIP(xb.shape[1])
    flat.add(xb)
    flat.search(xq, 100)
    t["flat scan (floor)"] = time.perf_counter() - t0
    cpu["flat scan (floor)"] = time.process_time() - c0
    del flat  # its copy of the vectors (1.5 GB at 1M nodes) is not held through the query path
    nodes, queries = nodes_and_queries(ds, cfg.get("query_part"))
    log = CpuStageLog()
    given = (xb, ds.nodes["node_id"], xq, ds.queries["query_id"])
    if warm:  # an earlier run over the same nodes with other queries, untimed
        with given_vectors(*given):
            querypath.recall_queries(cfg, ds, nodes, queries[-warm:], device, StageLog())
        keep_only(Path(cache.name), keep)
    with given_vectors(*given):
        start, c0 = time.perf_counter(), time.process_time()
        got = querypath.recall_queries(cfg, ds, nodes, queries, device, log)
        end_to_end = time.perf_counter() - start
        cpu["end-to-end"] = time.process_time() - c0
    cpu |= {f"stage {k}": v for k, v in log.cpu.items()}
    # the stand-in embed stage places the given vectors (no encoder runs): shown, not a stage's work
    t |= {("embed (vectors given)" if k == "embed" else k): v for k, v in log.seconds.items()}
    t["end-to-end"] = end_to_end
    stats = []
    if overlap:
        with given_vectors(*given), ppr_overlap.recording(stats):
            querypath.recall_queries(cfg, ds, nodes, queries[:overlap], device, StageLog())
    cache.cleanup()
    if got.recall["query_id"].n_unique() != nq:
        raise SystemExit(f"only {got.recall['query_id'].n_unique()} of {nq} queries got rows")
    return {
        "n": n,
        "edges": ds.edges.height,
        "t": t,
        "cpu": cpu,
        "rss": rss_mb(),
        "rows": log.rows,
        "overlap": ppr_overlap.summary(stats),
        "digest": hashlib.sha256(got.recall.write_csv().encode()).hexdigest(),
    }


def main() -> int:
    """Parse the arguments, run every size, print the table and the ratio at the largest size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--preset", default="best", help="the preset whose query path runs")
    ap.add_argument("--names", type=int, default=20, help="made-up names per cluster (0: none)")
    ap.add_argument(
        "--edges-per-node",
        type=int,
        default=4,
        help="explicit edges drawn per node (4: the old default; 5: 1M nodes -> ~5M edges)",
    )
    ap.add_argument(
        "--overlap",
        type=int,
        default=0,
        help="then check this many queries' PPR top-keep sets against the exact solver (untimed)",
    )
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="first run the query path untimed on the last N queries (0: a cold run), then remove "
        "its cache folders but --keep",
    )
    ap.add_argument(
        "--keep",
        default="tokens,entities",
        help="the cache folders a --warm run leaves (comma-separated; tokens: the nodes' field "
        "tokens, entities: their entity mentions; none: nothing)",
    )
    ap.add_argument(
        "--dup-share",
        type=float,
        default=0.0,
        help="share of the notes that are exact copies of other notes (0.2: one in five)",
    )
    ap.add_argument(
        "--vectors",
        choices=["synthetic", "encoder"],
        default="synthetic",
        help="the generator's vectors, or the config's encoder's over the texts (e.g. with "
        "embed=hashing), computed before the timing",
    )
    ap.add_argument("overrides", nargs="*", help="config overrides on top of the preset")
    a = ap.parse_args()
    print(
        f"real query path of preset={a.preset} (querypath.recall_queries, query encoding "
        f"excluded) {' '.join(a.overrides)}; queries per size: {a.queries}; names per cluster: "
        f"{a.names}; edges per node: {a.edges_per_node}; duplicate share: {a.dup_share}; "
        f"vectors: {a.vectors}; CPU threads: faiss {faiss.omp_get_max_threads()}"
    )
    print(
        "| nodes | edges | stage | seconds | queries/s | peak RSS MiB |\n|---|---|---|---|---|---|"
    )
    last = None
    for n in a.sizes:
        r = run(
            n,
            a.queries,
            a.preset,
            a.names,
            a.overrides,
            a.overlap,
            a.edges_per_node,
            a.warm,
            a.keep,
            a.dup_share,
            a.vectors,
        )
        for stage, sec in r["t"].items():
            qps = a.queries / sec if sec > 0 else float("inf")
            print(
                f"| {n:,} | {r['edges']:,} | {stage} | {sec:.2f} | {qps:,.0f} | {r['rss']:,.0f} |"
            )
        rows = ", ".join(f"{k} {v:,}" for k, v in sorted(r["rows"].items()))
        print(f"rows at {n:,}: {rows}")
        print(f"recall sha256 at {n:,} (its CSV text): {r['digest']}")
        if r["overlap"]:
            print(f"PPR at {n:,}, first {a.overlap:,} queries:\n{r['overlap']}")
        last = r
        sys.stdout.flush()
    c = last["cpu"]
    print(
        f"CPU seconds (all threads) at {last['n']}: flat scan {c['flat scan (floor)']:.2f}, "
        f"end-to-end {c['end-to-end']:.2f}; ratio by CPU time "
        f"{c['flat scan (floor)'] / c['end-to-end']:.2f}"
    )
    ratio = last["t"]["flat scan (floor)"] / last["t"]["end-to-end"]
    if "channels" in last["t"]:
        ch = last["t"]["flat scan (floor)"] / last["t"]["channels"]
        ch_cpu = c["flat scan (floor)"] / c["stage channels"]
        print(
            f"channels stage / flat-scan throughput at {last['n']}: {ch:.2f} (wall), "
            f"{ch_cpu:.2f} (CPU seconds: channels {c['stage channels']:.2f})"
        )
    print(f"end-to-end / flat-scan throughput at {last['n']}: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
