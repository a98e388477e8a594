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
from omegaconf import DictConfig, OmegaConf

from pipeline import backend, feedback, io
from pipeline.errors import ConfigError, choose
from pipeline.stages import (analyze, anchors, channels, dense, diffuse, evaluate, fuse, graph, hubs, inject, novelty,
                             cooccur, probrecall, query, score, scope_policy, signals)
from pipeline.stages.select import SelectParams, select
from pipeline.stages.embed import EmbeddingCache, embed_cached

log = logging.getLogger(__name__)
VERSIONS = ("recall-pipeline", "numpy", "polars", "pyarrow", "torch", "faiss-cpu", "bm25s", "ranx",
            "sentence-transformers", "hydra-core")


def call_target(spec: DictConfig | dict, **extra):
    """Call ``spec._target_`` (which must live in ``pipeline.``) with the remaining keys as kwargs."""
    from hydra.utils import get_method

    spec = OmegaConf.to_container(spec, resolve=True) if isinstance(spec, DictConfig) else dict(spec)
    target = spec.pop("_target_", None)
    if not isinstance(target, str) or not target.startswith("pipeline."):
        raise ConfigError(f"_target_={target!r}: only targets inside the 'pipeline.' package are allowed")
    return get_method(target)(**spec, **extra)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def versions() -> dict[str, str]:
    out = {}
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
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
        self.seconds[name] = round(time.perf_counter() - t0, 4)


def embed_texts(nodes: pl.DataFrame, include_title: bool) -> list[str]:
    texts = nodes["text"].to_list()
    if not include_title or "title" not in nodes.columns:
        return texts
    return [t if not ti or t.startswith(ti) else f"{ti}\n{t}" for t, ti in zip(texts, nodes["title"].to_list())]


def to_recall(sel: pl.DataFrame, ds_nodes: pl.DataFrame, queries: pl.DataFrame, enabled: list[str],
              extra: list[str] = (), group_docs: bool = False) -> pl.DataFrame:
    found = [pl.when(pl.col(f"{c}_rank").is_not_null()).then(pl.lit(c)) for c in enabled]
    for comp in ("residual", "graph"):
        if comp in sel.columns:
            found.append(pl.when(pl.col(comp) > 0).then(pl.lit(comp)))
    if "probabilistic" in sel.columns:
        found.append(pl.when(pl.col("probabilistic")).then(pl.lit("probabilistic")))
    out = sel.with_columns(
        query_id=pl.Series(queries["query_id"].to_numpy()[sel["query_idx"].to_numpy()], dtype=pl.String),
        node_id=pl.Series(ds_nodes["node_id"].to_numpy()[sel["node_idx"].to_numpy()], dtype=pl.String),
        channel=pl.concat_str(found, separator="+", ignore_nulls=True),
    )
    cols = ["query_id", "rank", "node_id", "score", "channel", *enabled, "fused",
            *[c for c in ("residual", "graph") if c in sel.columns], *extra,
            *(["dpp_gain"] if "dpp_gain" in sel.columns else [])]
    if "doc_id" in ds_nodes.columns:
        out = out.with_columns(doc_id=pl.Series(ds_nodes["doc_id"].to_numpy()[sel["node_idx"].to_numpy()], dtype=pl.String))
        cols.insert(3, "doc_id")
        if group_docs:  # ReMe node-level surface: the document's front-matter name and description
            for src, dst in (("title", "doc_title"), ("description", "doc_summary")):
                if src in ds_nodes.columns:
                    out = out.with_columns(pl.Series(dst, ds_nodes[src].to_numpy()[sel["node_idx"].to_numpy()],
                                                     dtype=pl.String))
                    cols.insert(cols.index("doc_id") + 1, dst)
    return out.select(cols)


def add_component(cand: pl.DataFrame, g: pl.DataFrame, column: str, enabled: list[str], xb, parts,
                  fusion: dict) -> pl.DataFrame:
    """Join a new score component (graph energy, residual similarity) onto the candidates; nodes it
    alone found get their exact cosine (when the dense channel is on) and are fused again with the
    other components at 0."""
    out = cand.join(g, on=["query_idx", "node_idx"], how="full", coalesce=True)
    if "dense" in enabled:
        new = out["dense"].is_null().to_numpy()
        if new.any():
            qi, ni = out["query_idx"].to_numpy()[new], out["node_idx"].to_numpy()[new]
            d = out["dense"].to_numpy().copy()
            d[new] = channels.dense_pairs(*parts, xb, qi, ni)
            out = out.with_columns(dense=pl.Series(d, dtype=pl.Float32))
    out = fuse.fuse(out.drop("fused"), enabled, fusion["method"], **{k: v for k, v in fusion.items() if k != "method"})
    return out.with_columns(pl.col(column).fill_null(0.0))


def stage_key(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, keys: list[str]) -> str:
    """Fingerprint of a stage's inputs: the config keys it reads, the input files, the node and
    query tables. Finished stages are cached under it and reused by a rerun (after a crash, say)."""
    import hashlib

    h = hashlib.sha256(io.config_hash({k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k])
                                       else cfg[k] for k in keys}).encode())
    h.update(io.config_hash(OmegaConf.to_container(cfg.data, resolve=True)).encode())
    h.update(io.config_hash(sorted(ds.fingerprints.items())).encode())
    for frame in (nodes, queries):
        h.update(str(frame.hash_rows(seed=0).sum()).encode() + str(frame.shape).encode())
    return h.hexdigest()[:20]


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


def corpus_step(memo: dict | None, name: str, nodes: pl.DataFrame, compute):
    """Query-independent work on the corpus (embeddings, graph, hubs, signals): computed once per
    node table when ``memo`` is given. A Ray worker keeps one memo across the shards it runs."""
    if memo is None:
        return compute()
    key = (name, nodes.shape, tuple(nodes.columns), int(nodes.hash_rows(seed=0).sum()))
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def embed_nodes(cfg: DictConfig, nodes: pl.DataFrame, device: str):
    """(encoder, cache, node embeddings (n, d), number of texts actually encoded)."""
    encoder = call_target(cfg.embed.encoder)
    cache = EmbeddingCache(Path(cfg.cache_dir) / f"emb-{encoder.model_id}.sqlite", encoder.dim) \
        if cfg.embed.cache else None
    texts = embed_texts(nodes, cfg.embed.include_title)
    if cfg.dense.get("index") == "blocked":  # kept on disk as a memmapped .npy, keyed by content hash
        from pipeline.stages.blocked import memmap_cached

        xb, n = memmap_cached(Path(cfg.cache_dir), f"{encoder.model_id}-d{encoder.dim}", texts,
                              lambda t: embed_cached(encoder, t, cache, device))
        return encoder, cache, xb, n
    xb, n = embed_cached(encoder, texts, cache, device)
    return encoder, cache, xb, n


def write_analysis(out_dir: Path, frames: dict[str, pl.DataFrame]) -> None:
    for name, frame in frames.items():
        io.write_parquet(Path(out_dir) / f"{name}.parquet", frame)


def analyze_run(run_dir: str | Path) -> list[str]:
    """``recall analyze <run_dir>``: the corpus topic analysis for a finished run (embeddings come
    back from the cache); writes topics / node_topics / recall_topics Parquet files and the report."""
    import json

    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ConfigError(f"{run_dir}: no manifest.json; pass a finished run directory")
    cfg = OmegaConf.create(json.loads((run_dir / "manifest.json").read_text())["config"])
    device = backend.resolve_device(cfg.device)
    nodes, _queries = drop_empty(call_target(cfg.data))
    _enc, _cache, xb, _n = embed_nodes(cfg, nodes, device)
    a = cfg.get("analyze", {"topics": 20, "top": 5, "mode": "abs"})
    frames = analyze.analyze(nodes, xb, pl.read_parquet(run_dir / "recall.parquet"), a["topics"], a["top"], a["mode"], device)
    write_analysis(run_dir, frames)
    from pipeline.report import run_report

    run_report(run_dir)
    return [f"{n}.parquet" for n in frames]


def run_now(cfg: DictConfig, nodes: pl.DataFrame, queries: pl.DataFrame) -> dt.datetime:
    """The run's reference time: ``now=`` if set, else the latest query ``now``, else the latest node
    timestamp, else 1970-01-01 — never the wall clock, so reruns give the same bytes."""
    if cfg.get("now"):
        from pipeline.schema import parse_timestamp

        return parse_timestamp(cfg.now, "config", None, "now")
    for frame, cols in ((queries, ["now"]), (nodes, ["updated_at", "created_at", "last_access_at"])):
        stamps = [frame[c].max() for c in cols if c in frame.columns and frame[c].null_count() < frame.height]
        if stamps:
            return max(stamps)
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def run(cfg: DictConfig, out_dir: str | Path, dataset=None, memo: dict | None = None) -> dict:
    """Run every stage; ``dataset`` (a ``Dataset``) replaces ``cfg.data`` when given (tests, API use);
    ``memo`` keeps the corpus-wide steps between runs over the same nodes (see ``corpus_step``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "manifest.json").unlink(missing_ok=True)  # no stale "finished" marker while we work
    timer = Timer()
    reused: list[str] = []
    backend.FALLBACKS.clear()
    device = backend.resolve_device(cfg.device)
    enabled = list(cfg.channels)

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

    xb = xq = xparts = part_q = part_w = None
    n_embedded = 0
    if "dense" in enabled:
        with timer.stage("embed"):
            encoder, cache, xb, n1 = corpus_step(memo, "embed", nodes, lambda: embed_nodes(cfg, nodes, device))
            qplan = query.plan(queries, cfg.query.blend, cfg.query.intent_split, tuple(cfg.query.weights),
                               cfg.query.max_segments)
            xparts, n2 = embed_cached(encoder, qplan["text"].to_list(), cache, device)
            part_q, part_w = qplan["query_idx"].to_numpy(), qplan["weight"].to_numpy()
            first = np.r_[0, np.flatnonzero(np.diff(part_q)) + 1]
            xq = xparts[first]  # each query's current text (rewrite) vector
            n_embedded = n1 + n2
        timer.rows["query_parts"] = qplan.height

    with timer.stage("channels"):
        key = stage_key(cfg, ds, nodes, queries, ["channels", "dense", "lexical", "embed", "query", "include_archived",
                                                  "seed"])
        cand_path = Path(cfg.cache_dir) / "candidates" / f"{key}.parquet"
        if cand_path.exists():
            cand = pl.read_parquet(cand_path)
            reused.append("channels")
        else:
            cand = channels.generate(nodes, queries, enabled, xb, xparts, channels.DenseParams(**cfg.dense),
                                     channels.LexicalParams(**OmegaConf.to_container(cfg.lexical, resolve=True)), device,
                                     cfg.seed, cfg.include_archived, part_q, part_w)
            io.write_parquet(cand_path, cand)
    timer.rows["candidates"] = cand.height

    with timer.stage("fuse"):
        params = OmegaConf.to_container(cfg.fusion, resolve=True)
        cand = fuse.fuse(cand, enabled, params["method"], **{k: v for k, v in params.items() if k != "method"})

    if cfg.novelty.enabled:
        if xb is None:
            raise ConfigError("novelty.enabled needs embeddings: enable the dense channel")
        with timer.stage("novelty"):
            nov_p = novelty.NoveltyParams(**{k: v for k, v in OmegaConf.to_container(cfg.novelty).items()
                                             if k != "seed_diffusion"})
            table, hits = novelty.run(cand, nodes, queries, xb, xq, nov_p, device, cfg.include_archived)
            io.write_parquet(out_dir / "novelty.parquet", table)
            cand = add_component(cand, hits, "residual", enabled, xb, (xparts, part_q, part_w), params)
        timer.rows["residual_hits"] = hits.height

    edges = hub_graph = None
    if cfg.diffuse.method != "none" or cfg.signals.enabled:
        with timer.stage("graph"):
            gp = graph.GraphParams(**OmegaConf.to_container(cfg.graph, resolve=True))
            edges = corpus_step(memo, "graph", nodes, lambda: graph.build(nodes, ds.edges, gp, xb, ds.skipped))
            hub_p = hubs.HubParams(**gp.hubs)
            if cfg.diffuse.method != "none":
                embed = (lambda t: embed_cached(encoder, t, cache, device)[0]) if "dense" in enabled else None
                hub_graph = corpus_step(memo, "hubs", nodes, lambda: hubs.build(nodes, hub_p, embed))
        timer.rows["graph_edges"] = edges.height
        timer.rows["hubs"] = 0 if hub_graph is None else hub_graph.size

    freshness, sig_table = {"status": "disabled"}, None
    if cfg.signals.enabled:
        with timer.stage("signals"):
            sig_p = signals.SignalsParams(**OmegaConf.to_container(cfg.signals, resolve=True))
            now = run_now(cfg, nodes, queries)  # the signals' reference time, the same as the score stage's
            nodes, sig_table, freshness = corpus_step(memo, "signals", nodes,
                                                      lambda: feedback.resolve(nodes, edges, now, sig_p))
            if sig_table is not None and cfg.signals.path is None:
                io.write_parquet(out_dir / "signals.parquet", sig_table)

    found = None  # exact-name anchors: diffusion seeds and co-occurrence anchors, found once
    if cfg.diffuse.method != "none":
        with timer.stage("diffuse"):
            dp = diffuse.DiffusionParams(**cfg.diffuse)
            extra = []
            if "residual" in cand.columns and cfg.novelty.seed_diffusion:
                extra.append(cand.filter(pl.col("residual") > 0).select("query_idx", "node_idx", energy="residual"))
            if cfg.query.anchors:
                found = anchors.find(nodes, queries, min_len=cfg.query.anchor_min_len,
                                     energy=cfg.query.anchor_energy, include_archived=cfg.include_archived)
                extra.append(found)
                timer.rows["anchors"] = found.height
                if cfg.query.cross_recall:
                    extra.append(anchors.cross(found, edges, nodes, queries, mult=cfg.query.cross_mult,
                                               include_archived=cfg.include_archived))
            seeds_extra = pl.concat([x.cast(anchors.SCHEMA) for x in extra]) if extra else None
            hub_seeds = hubs.query_seeds(queries, hub_graph, hub_p) if dp.entity_seed_share > 0 else None
            g = diffuse.run(cand, nodes, queries, edges, dp, device, cfg.include_archived, seeds_extra,
                            hub_graph, hub_seeds)
            cand = add_component(cand, g, "graph", enabled, xb, (xparts, part_q, part_w), params)
        timer.rows["graph_hits"] = g.height

    if cfg.query.cooccur.enabled:
        with timer.stage("cooccur"):
            if found is None and cfg.query.anchors:
                found = anchors.find(nodes, queries, min_len=cfg.query.anchor_min_len, energy=cfg.query.anchor_energy,
                                     include_archived=cfg.include_archived)
            bonus = cooccur.boost(cand, nodes, queries, found, cooccur.CooccurParams(**cfg.query.cooccur),
                                  cfg.include_archived)
            cand = cooccur.merge(cand, bonus)
        timer.rows["cooccur_boosts"] = bonus.height

    with timer.stage("score"):
        terms, factors = dict(cfg.score.terms), list(cfg.score.factors)
        names = [n for n, w in terms.items() if w] + factors
        cand = score.attach(cand, nodes, queries, sig_table, names, run_now(cfg, nodes, queries))
        pol = scope_policy.apply(cand, nodes, queries, scope_policy.ScopeParams(**cfg.scope))
        cand = score.compute(pol.cand, terms, factors + pol.factors, bool(cfg.score.normalize))

    with timer.stage("select"):
        doc_idx = nodes["doc_id"].fill_null(nodes["node_id"]).rank("dense").to_numpy() if "doc_id" in nodes.columns else None
        sel = select(cand, int(cfg.k), SelectParams(**{k: v for k, v in cfg.select.items() if k != "prob_recall"},
                                                    sort_by=tuple(pol.sort_by)), xb, device, doc_idx)
        pr = cfg.select.prob_recall
        if pr.enabled:
            sel = probrecall.append(sel, nodes, queries, int(cfg.k), p=pr.p, min_importance=pr.min_importance,
                                    seed=cfg.seed, include_archived=cfg.include_archived)
        extra = [n for n in names if n in score.TERMS or n in score.FACTORS] + pol.factors + pol.sort_by
        extra += ["cooccur"] if "cooccur" in sel.columns else []
        recall = to_recall(sel, nodes, queries, enabled, extra, bool(cfg.select.top_chunks_per_doc))
    timer.rows["recall"] = recall.height
    timer.rows["queries_without_results"] = queries.height - recall["query_id"].n_unique()
    return finish(cfg, out_dir, ds, nodes, queries, recall, timer, device, xb, n_embedded, reused, freshness)


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
            metrics = evaluate.evaluate_run(recall, qrels, queries, ds.qrels_level, list(cfg.eval.metrics))
            io.write_json(out_dir / "metrics.json", metrics)

    container = OmegaConf.to_container(cfg, resolve=True)
    manifest = {
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": container, "config_hash": io.config_hash(container),
        "dataset": ds.name, "inputs": ds.fingerprints, "versions": versions(),
        "device": device, "executor": executor or {"name": "local"}, "timings_s": timer.seconds, "rows": timer.rows,
        "skipped": {k: v for k, v in sorted(ds.skipped.items()) if v}, "fallbacks": backend.FALLBACKS[:],
        "embedded_texts": n_embedded, "reused_stages": reused, "peak_rss_mb": peak_rss_mb(), "signals_freshness": freshness,
        "outputs": sorted(p.name for p in out_dir.iterdir() if p.is_file() and not p.name.startswith(".")),
    }
    io.write_json(out_dir / "manifest.json", manifest)
    if cfg.report:
        from pipeline.report import run_report

        with timer.stage("report"):
            run_report(out_dir)  # a view of the finished run, written after the manifest
    return {"out_dir": str(out_dir), "metrics": metrics, "manifest": manifest}
