"""Run the stages in order, time them, write recall.parquet, metrics.json and (last) manifest.json."""
from __future__ import annotations

import datetime as dt
import importlib.metadata
import logging
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl
import yaml
from omegaconf import DictConfig, OmegaConf

from pipeline import backend, grouprun, io, registry, rundir, version
from pipeline.errors import ConfigError, choose
from pipeline.grouprun import corpus_step, stage_key, to_recall  # noqa: F401  (runner.*: public API)
from pipeline.ops.scope import EdgeIndex, run_groups
from pipeline.stages import analyze, evaluate, graph, inject, query
from pipeline.stages.embed import EmbeddingCache, cache_tag, embed_cached

log = logging.getLogger(__name__)
CONF = Path(__file__).resolve().parents[1] / "conf"
VERSIONS = ("recall-pipeline", "numpy", "polars", "pyarrow", "torch", "bm25s", "rjieba", "pytrec-eval-terrier",
            "sentence-transformers", "hydra-core")


def call_target(spec: DictConfig | dict, where: str | None = None, **extra):
    """Call the registered callable named by ``spec._target_`` (``pipeline.registry``) with the
    remaining keys as kwargs; ``where`` names the config key for errors (default: the node's key)."""
    if where is None:
        where = (spec._get_full_key(None) if isinstance(spec, DictConfig) else None) or "config"
    spec = OmegaConf.to_container(spec, resolve=True) if isinstance(spec, DictConfig) else spec
    return registry.call(spec, where, **extra)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def versions() -> dict[str, str]:
    """Versions of the main packages, and of the FAISS / CuPy / cuGraph distributions actually imported."""
    out = backend.distributions()
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    out["recall-pipeline-code"] = version.code_version()  # package version + hash of the source
    return out


class Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rows: dict[str, int] = {}

    @contextmanager
    def stage(self, name: str):
        io.fault_point(f"stage:{name}")
        t0 = time.perf_counter()
        log.info("stage %s ...", name)
        yield
        # a stage that runs once per query group adds up
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 4)


def embed_texts(nodes: pl.DataFrame, include_title: bool) -> list[str]:
    texts = nodes["text"].to_list()
    if not include_title or "title" not in nodes.columns:
        return texts
    return [t if not ti or t.startswith(ti) else f"{ti}\n{t}" for t, ti in zip(texts, nodes["title"].to_list())]


def drop_empty(ds) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes sorted by node_id; nodes and queries whose text is empty or whitespace are skipped and
    counted (``skipped.empty_node_text`` / ``skipped.empty_query_text``)."""
    blank = pl.col("text").str.strip_chars().str.len_chars() == 0
    nodes, queries = ds.nodes.filter(~blank), ds.queries.filter(~blank)
    ds.skipped["empty_node_text"] += ds.nodes.height - nodes.height
    ds.skipped["empty_query_text"] += ds.queries.height - queries.height
    if nodes.height == 0:
        raise ConfigError(f"data={ds.name}: no node has any text; nothing can be recalled")
    return nodes.sort("node_id"), queries


def query_half(queries: pl.DataFrame, part: str) -> pl.DataFrame:
    """A fixed half of the queries by a hash of ``query_id``: ``a`` or ``b`` (tune on one, check on the other)."""
    import hashlib

    choose("query_part", part, ("a", "b"))
    bit = [hashlib.sha1(q.encode()).digest()[0] & 1 for q in queries["query_id"].cast(pl.String).to_list()]
    return queries.filter(pl.Series(bit) == (0 if part == "a" else 1))


def embed_nodes(cfg: DictConfig, nodes: pl.DataFrame, device: str):
    """(encoder, cache, node embeddings (n, d), number of texts actually encoded)."""
    encoder = call_target(cfg.embed.encoder)
    cache = EmbeddingCache(Path(cfg.cache_dir) / f"emb-{encoder.model_id}.sqlite", encoder.dim) \
        if cfg.embed.cache else None
    texts = embed_texts(nodes, cfg.embed.include_title)
    if cfg.dense.get("index") == "blocked":  # kept on disk as a memmapped .npy, keyed by content hash
        from pipeline.channels.blocked import memmap_cached

        xb, n = memmap_cached(Path(cfg.cache_dir), cache_tag(encoder), texts,
                              lambda t: embed_cached(encoder, t, cache, device))
        return encoder, cache, xb, n
    xb, n = embed_cached(encoder, texts, cache, device)
    return encoder, cache, xb, n


def write_analysis(out_dir: Path, frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        io.write_parquet(Path(out_dir) / f"{name}.parquet", frame)


def analyze_run(run_dir: str | Path) -> list[str]:
    """``recall analyze <run_dir>``: the analyses of a finished run, computed afterwards as the run
    would have (embeddings and candidates come back from the caches): topics / node_topics /
    recall_topics, and novelty.parquet (``novelty=bme``'s settings) when the run did not write it.
    Then the manifest's output list and the report are brought up to date."""
    import json

    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ConfigError(f"{run_dir}: no manifest.json; pass a finished run directory")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cfg = OmegaConf.create(manifest["config"])
    device = backend.resolve_device(cfg.device)
    ds = call_target(cfg.data, f"{run_dir / 'manifest.json'}: config.data")
    nodes, queries = drop_empty(ds)
    queries = query_half(queries, cfg.query_part) if cfg.get("query_part") else queries
    _encoder, _cache, xb, _n = embed_nodes(cfg, nodes, device)
    a = cfg.get("analyze", {"topics": 20, "top": 5, "mode": "abs"})
    frames = analyze.analyze(nodes, xb, pl.read_parquet(run_dir / "recall.parquet"), a["topics"], a["top"], a["mode"], device)
    if not (run_dir / "novelty.parquet").is_file():
        table = novelty_afterwards(cfg, ds, nodes, queries, device)
        if table is not None:
            frames["novelty"] = table
    write_analysis(run_dir, frames)
    io.write_json(run_dir / "manifest.json", {**manifest, "outputs": rundir.outputs(run_dir, cfg)})
    from pipeline.report import run_report

    run_report(run_dir)
    return [f"{n}.parquet" for n in frames]


def novelty_afterwards(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame,
                       device: str) -> pl.DataFrame | None:
    """The ``novelty.parquet`` a run of ``cfg`` with ``novelty=bme`` writes: ``novelty=bme``'s
    settings (the run's own novelty keys over them), the same query groups, stopped after the
    novelty stage (embeddings and candidates come back from the caches)."""
    if "dense" not in cfg.channels:
        log.warning("no novelty analysis: the run has no dense channel (its hits are the novelty basis)")
        return None
    conf = yaml.safe_load((CONF / "novelty" / "bme.yaml").read_text())
    conf |= {k: v for k, v in OmegaConf.to_container(cfg.novelty, resolve=True).items() if k != "enabled"}
    cfg = OmegaConf.merge(cfg, {"novelty": conf})
    sh, _n = embed_run(cfg, ds, nodes, queries, device, Timer(), None)
    sh.until = "novelty"
    return in_query_order([o.novelty for o in run_all_groups(sh, nodes, queries)], queries, [])


def run(cfg: DictConfig, out_dir: str | Path, dataset=None, memo: dict | None = None) -> dict:
    """Run every stage; ``dataset`` (a ``Dataset``) replaces ``cfg.data`` when given (tests, API use);
    ``memo`` keeps the per-node-table steps between runs over the same nodes (see ``corpus_step``).
    Node and query embeddings are computed once; everything after runs per group of queries that see
    the same nodes (``pipeline.grouprun``), and the recall rows come back in query order."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rundir.clear(out_dir, cfg)  # the manifest first, then every output a previous run left here
    timer = Timer()
    backend.reset()
    device = backend.resolve_device(cfg.device)

    with timer.stage("ingest"):
        ds = dataset if dataset is not None else call_target(cfg.data)
        nodes, queries = drop_empty(ds)
        if cfg.get("query_part"):
            queries = query_half(queries, cfg.query_part)
    timer.rows |= {"nodes": nodes.height, "queries": queries.height,
                   "edges": 0 if ds.edges is None else ds.edges.height}
    if queries.height == 0:
        raise ConfigError(f"data={cfg.data.name}: the dataset has no queries; give it a queries file")
    if cfg.get("executor", "local") != "local":  # query shards on Ray workers: pipeline/executor.py
        from pipeline import executor

        recall, state = executor.run_shards(cfg, ds, nodes, queries, timer, out_dir, device)
        return finish(cfg, out_dir, ds, nodes, queries, recall, timer, device, **state)

    sh, n_embedded = embed_run(cfg, ds, nodes, queries, device, timer, memo)
    if ds.edges is not None and (cfg.diffuse.method != "none" or cfg.signals.enabled):
        graph.explicit_edges(ds.edges, nodes["node_id"], {}, ds.skipped)  # dangling/self-loop counts, once
    outs = run_all_groups(sh, nodes, queries)
    recall = in_query_order([o.recall for o in outs], queries, ["rank"]) if outs else no_recall(enabled=cfg.channels)
    if cfg.novelty.enabled:
        io.write_parquet(out_dir / "novelty.parquet", in_query_order([o.novelty for o in outs], queries, []))
    sig = grouprun.merge_signals([o.signals for o in outs])
    if sig is not None and cfg.signals.path is None:
        io.write_parquet(out_dir / "signals.parquet", sig)
    timer.rows["recall"] = recall.height
    timer.rows["queries_without_results"] = queries.height - recall["query_id"].n_unique()
    reused = sorted({r for o in outs for r in o.reused})
    freshness = outs[0].freshness if outs else {"status": "disabled"}
    return finish(cfg, out_dir, ds, nodes, queries, recall, timer, device, sh.xb, n_embedded, reused, freshness)


def run_all_groups(sh: grouprun.Shared, nodes: pl.DataFrame, queries: pl.DataFrame) -> list:
    """``grouprun.run_group`` for every query group that sees at least one node. Without a caller's
    memo, the per-node-table steps (graph, hubs, signals) are still shared by the groups that see the
    same nodes at other reference times (``run_groups`` yields them one after another)."""
    own, last, outs = sh.memo is None, None, []
    sh.memo = {} if own else sh.memo
    if sh.cfg.diffuse.method != "none" or sh.cfg.signals.enabled:
        sh.edge_index = EdgeIndex(nodes, sh.ds.edges)  # each group's explicit edges by lookup, not a scan
    for key, rows, qs, now in run_groups(nodes, queries, sh.cfg.include_archived, config_now(sh.cfg)):
        if own and (last is None or not np.array_equal(last, rows)):
            sh.memo.clear()
            last = rows
        if len(rows):
            outs.append(grouprun.run_group(sh, grouprun.slice_group(sh, nodes, queries, key, rows, qs, now)))
    return outs


def config_now(cfg: DictConfig) -> dt.datetime | None:
    """``now=`` from the config (it overrides every query's reference time), or None."""
    if not cfg.get("now"):
        return None
    from pipeline.schema import parse_timestamp

    return parse_timestamp(cfg.now, "config", None, "now")


def no_recall(enabled) -> pl.DataFrame:
    """The recall table when no query can see any node: the contract's columns, no rows."""
    from pipeline.schema import TABLES

    cols = {**TABLES["recall"]["required"], "channel": pl.String, **{c: pl.Float32 for c in enabled}}
    return pl.DataFrame(schema=cols)


def in_query_order(frames: list, queries: pl.DataFrame, then: list[str]) -> pl.DataFrame:
    """Per-group frames (with ``query_id``) concatenated, sorted by the queries' order, then ``then``;
    so the bytes do not depend on how queries were grouped."""
    frames = [f for f in frames if f is not None]
    pos = pl.DataFrame({"query_id": queries["query_id"].cast(pl.String),
                        "_pos": np.arange(queries.height, dtype=np.int64)})
    out = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema={"query_id": pl.String})
    out = out.join(pos, on="query_id", how="left").sort(["_pos", *then], maintain_order=True)
    return out.drop("_pos")


def embed_run(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, device: str, timer: Timer,
              memo: dict | None) -> tuple[grouprun.Shared, int]:
    """The run's shared state: node embeddings (once, content-hash cached) and every query part's."""
    sh = grouprun.Shared(cfg, ds, device, timer, memo)
    if "dense" not in cfg.channels:
        return sh, 0
    with timer.stage("embed"):
        sh.encoder, sh.cache, sh.xb, n1 = corpus_step(memo, "embed", nodes, lambda: embed_nodes(cfg, nodes, device))
        qplan = query.plan(queries, cfg.query.blend, cfg.query.intent_split, tuple(cfg.query.weights),
                           cfg.query.max_segments)
        sh.xparts, n2 = embed_cached(sh.encoder, qplan["text"].to_list(), sh.cache, device)
        sh.part_q, sh.part_w = qplan["query_idx"].to_numpy(), qplan["weight"].to_numpy()
    timer.rows["query_parts"] = qplan.height
    return sh, n1 + n2


def finish(cfg: DictConfig, out_dir: Path, ds, nodes: pl.DataFrame, queries: pl.DataFrame, recall: pl.DataFrame,
           timer: Timer, device: str, xb=None, n_embedded: int = 0, reused: list[str] = (), freshness: dict | None = None,
           executor: dict | None = None) -> dict:
    """Export, analysis, evaluation, the manifest (last) and the report: run once per run, on the
    driver, whichever executor computed ``recall``."""
    with timer.stage("export"):
        io.write_parquet(out_dir / "recall.parquet", recall)
        if cfg.inject.format != "none":
            io.write_parquet(out_dir / "injection.parquet",
                             inject.render(recall, nodes, cfg.inject.format, queries=queries,
                                           include_archived=bool(cfg.include_archived),
                                           **{k: v for k, v in cfg.inject.items() if k != "format"}))

    if cfg.analyze.enabled and xb is not None:
        with timer.stage("analyze"):
            write_analysis(out_dir, analyze.analyze(nodes, xb, recall, cfg.analyze.topics, cfg.analyze.top,
                                                    cfg.analyze.mode, device))

    metrics = None
    if ds.qrels is not None and ds.qrels.height:
        with timer.stage("evaluate"):
            qrels = ds.qrels.filter(pl.col("query_id").is_in(queries["query_id"].implode())) if cfg.get("query_part") else ds.qrels
            metrics, per_query = evaluate.evaluate(recall, qrels, queries, ds.qrels_level, cfg.eval.metrics, nodes)
            io.write_json(out_dir / "metrics.json", metrics)
            io.write_parquet(out_dir / "per_query.parquet", per_query)

    container = OmegaConf.to_container(cfg, resolve=True)
    manifest = {
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": container, "config_hash": io.config_hash(container),
        "dataset": ds.name, "inputs": ds.fingerprints, "versions": versions(),
        "device": device, "executor": executor or {"name": "local"}, "timings_s": timer.seconds, "rows": timer.rows,
        "skipped": {k: v for k, v in sorted(ds.skipped.items()) if v}, "data_notes": dict(ds.notes),
        "fallbacks": backend.FALLBACKS[:],
        "graph_algorithms": dict(backend.GRAPH_IMPL),
        "embedded_texts": n_embedded, "reused_stages": reused, "peak_rss_mb": peak_rss_mb(), "signals_freshness": freshness,
        "outputs": rundir.outputs(out_dir, cfg),
    }
    io.write_json(out_dir / "manifest.json", manifest)
    if cfg.report:
        from pipeline.report import run_report

        with timer.stage("report"):
            run_report(out_dir)  # a view of the finished run, written after the manifest
    return {"out_dir": str(out_dir), "metrics": metrics, "manifest": manifest}
