"""``executor=ray``: the local query path (``querypath.recall_queries``) on query shards under Ray Data.

The driver loads the dataset, cuts the queries into shards and hands them to ``num_workers`` actors through
``ray.data.from_items(shards).map_batches(ShardWorker, batch_size=1)``. Each actor receives the
dataset once, in ``__init__``, and runs every shard it gets through ``querypath.recall_queries`` (all
nodes, only that shard's queries) — the same function a local run calls: each query group
(``ops.scope.run_groups``) runs the stages on its own nodes at its own reference time,
so a shard's answer does not depend on the other shards. Work that does not depend on the
queries (node embeddings with their encoder; per group's node table: the graph, the hubs, the
signals) is computed once per actor through ``memo.corpus_step`` — the embeddings in ``__init__``, the rest on its first
shard — and reused for the shards that follow. The driver merges the
recall rows in query order; export, evaluation and the manifest then run once on the driver
(``outputs.write_outputs``), exactly as for the local executor.

Shards keep every query scope whole when queries carry ``doc_scope`` (each scope's node subset and
index is then built by one shard only); otherwise they are contiguous blocks of queries.
"""

from __future__ import annotations

import io as _io
import json
import logging
import os
import time
from collections import Counter

import numpy as np
import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.contract.errors import ConfigError, require_one_of

log = logging.getLogger(__name__)
EXECUTORS = ("local", "ray")
PER_QUERY_ROWS = (
    "query_parts",
    "candidates",
    "residual_hits",
    "graph_hits",
    "anchors",
    "cooccur_boosts",
)
PER_GROUP_MAX_ROWS = ("graph_edges", "hubs")  # the largest query group's (StageLog.most)
DRIVER_SKIPPED = ("empty_node_text", "empty_query_text")  # counted by the driver's own ingest


def import_ray():
    """The one place ``ray`` is imported; a ConfigError naming the fix when it is missing."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            f"executor=ray needs Ray Data ({e}); install it with "
            "pip install 'recall-pipeline[ray]' (or 'ray[data]>=2.9'), or use executor=local"
        ) from e
    return ray


def shard_queries(queries: pl.DataFrame, n_shards: int) -> list[np.ndarray]:
    """Query indices of each shard (ascending, none empty, at most ``n_shards``).

    With a ``doc_scope`` column, queries of one (scope, viewer) group — the unit of
    ``ops.scope.scope_groups`` — stay in one shard; groups are packed in first-seen order, a shard
    closing once it holds its share of the queries. Otherwise shards are contiguous blocks.
    """
    n = queries.height
    if n_shards < 1:
        raise ConfigError(f"ray.shards={n_shards}; give a positive number of shards")
    if "doc_scope" not in queries.columns:
        return [b for b in np.array_split(np.arange(n, dtype=np.int64), min(n_shards, n)) if len(b)]
    from pipeline.recallcache.recipe import scope_of

    viewers = queries["viewer"].to_list() if "viewer" in queries.columns else [None] * n
    groups: dict = {}
    for qi, (s, v) in enumerate(zip(queries["doc_scope"].to_list(), viewers)):
        groups.setdefault((scope_of(s), v), []).append(qi)
    target, out, cur = -(-n // n_shards), [], []
    for qs in groups.values():
        cur += qs
        if len(cur) >= target:
            out.append(np.sort(np.asarray(cur, dtype=np.int64)))
            cur = []
    if cur:
        out.append(np.sort(np.asarray(cur, dtype=np.int64)))
    return out


def shard_config(cfg: DictConfig) -> dict:
    """The config each shard runs: executor=local, all of its queries (the driver already took any
    ``query_part`` half); outputs are written by the driver only."""
    sub = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    sub.executor, sub.query_part = "local", None
    return OmegaConf.to_container(sub, resolve=True)


def _to_ipc(frame: pl.DataFrame) -> bytes:
    buf = _io.BytesIO()
    frame.write_ipc(buf)
    return buf.getvalue()


class ShardWorker:
    """A Ray Data actor: holds the dataset and the per-node-table work (memo), runs one shard per call."""

    def __init__(self, cfg: dict, dataset_ref: list, cwd: str) -> None:
        from pipeline.contract.dataset import Dataset
        from pipeline.contract.ingest import drop_empty
        from pipeline.core import backend
        from pipeline.core.memo import corpus_step
        from pipeline.run.querypath import scoped_memo
        from pipeline.stages.embed import EmbedParams, embed_nodes

        os.chdir(cwd)  # relative paths in the config (cache_dir, data) mean the driver's
        self.cfg = OmegaConf.create(cfg)
        self.ds = import_ray().get(dataset_ref[0])
        self.device = backend.resolve_device(self.cfg.device)
        # memo.corpus_step: embeddings, graph, hubs, signals, once per worker and node table;
        # keyed by each table's ordered digest, so a shard whose pack holds the same nodes in
        # another order computes its own
        self.memo: dict = {}
        if (
            "dense" in self.cfg.channels
        ):  # the encoder and the node embeddings, before the first shard
            ds = self.ds
            nodes = drop_empty(Dataset(ds.name, ds.nodes, ds.queries, None, None, {}, Counter()))[0]
            corpus_step(
                scoped_memo(self.memo, self.cfg, ds.edges),
                "embed",
                nodes,
                lambda: embed_nodes(EmbedParams.of_run(self.cfg), nodes, self.device),
            )

    def run_shard(self, shard: int, qidx: np.ndarray) -> dict:
        """The local query path (``querypath.recall_queries``) on this shard's queries; its recall,
        novelty and signals tables as IPC bytes and the counts the driver's manifest merges."""
        from pipeline.contract.ingest import drop_empty
        from pipeline.core import backend
        from pipeline.core.stagelog import StageLog, peak_rss_mb
        from pipeline.run import querypath

        ds = self.ds
        sub = ds.part(ds.queries[qidx])
        backend.reset()
        log = StageLog()
        nodes, queries = drop_empty(sub)
        got = querypath.recall_queries(self.cfg, sub, nodes, queries, self.device, log, self.memo)
        frames = {
            "recall": got.recall,
            "novelty": got.novelty,
            "signals": got.signals if self.cfg.signals.get("path") is None else None,
        }
        return {
            "shard": shard,
            "pid": os.getpid(),
            "frames": {k: _to_ipc(v) for k, v in frames.items() if v is not None},
            "manifest": {
                "timings_s": log.seconds,
                "rows": log.rows,
                "skipped": dict(sub.skipped),
                "fallbacks": backend.FALLBACKS[:],
                "embedded_texts": got.n_embedded,
                "reused_stages": got.reused,
                "signals_freshness": got.freshness,
                "peak_rss_mb": peak_rss_mb(),
                "auto": got.auto,
                "graph_algorithms": dict(backend.GRAPH_IMPL),
            },
        }

    def __call__(self, batch: dict) -> dict:
        """Ray Data batch entry: run each (shard, query indices) row and return the encoded results."""
        outs = [
            self.run_shard(int(s), np.asarray(q, dtype=np.int64))
            for s, q in zip(batch["shard"], batch["qidx"])
        ]
        return {
            "shard": np.array([o["shard"] for o in outs]),
            "result": np.array([_encode(o) for o in outs], dtype=object),
        }


def _encode(result: dict) -> str:
    """A shard's result as JSON (no pickle): Arrow IPC frames base64-encoded; other values as
    ``io.write_json`` writes them to the manifest (``default=str``: the in-run signals'
    ``signals_freshness.computed_at`` is a datetime)."""
    import base64

    return json.dumps(
        {
            **result,
            "frames": {k: base64.b64encode(v).decode() for k, v in result["frames"].items()},
        },
        default=str,
    )


def _decode(text: str) -> dict:
    import base64

    res = json.loads(text)
    res["frames"] = {k: pl.read_ipc(base64.b64decode(v)) for k, v in res["frames"].items()}
    return res


def _run_on_ray(
    cfg: DictConfig, ds, queries: pl.DataFrame, shards: list[np.ndarray], sub_cfg: dict
) -> list[dict]:
    ray = import_ray()
    opts = cfg.get("ray") or {}
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=opts.get("address"),
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        # the workers see the driver's (filtered) queries: shard indices refer to them
        from pipeline.contract.dataset import Dataset

        shipped = Dataset(
            ds.name,
            ds.nodes,
            queries,
            ds.edges,
            None,
            ds.fingerprints,
            Counter(),
            ds.notes,
            tables=ds.tables,
            settings=ds.settings,
        )
        ref = [
            ray.put(shipped)
        ]  # in a list, so Ray hands the actor the reference and not the object
        items = [{"shard": i, "qidx": q.tolist()} for i, q in enumerate(shards)]
        workers = max(1, min(int(opts.get("num_workers", 2)), len(shards)))
        out = (
            ray.data.from_items(items, override_num_blocks=len(items))
            .map_batches(
                ShardWorker,
                fn_constructor_args=(sub_cfg, ref, os.getcwd()),
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=float(opts.get("cpus_per_worker", 1)),
                batch_format="numpy",
            )
            .take_all()
        )
    finally:
        if started:
            ray.shutdown()
    return [_decode(row["result"]) for row in sorted(out, key=lambda r: int(r["shard"]))]


def run_shards(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, log, device: str):
    """Recall of every query, computed shard by shard on Ray: a ``querypath.Recalled`` whose tables
    are merged in query order (signals: one row per node, as the local path merges its groups)."""
    from pipeline.run import querypath
    from pipeline.stages import signals

    require_one_of("executor", cfg.executor, EXECUTORS)
    opts = cfg.get("ray") or {}
    shards = shard_queries(queries, int(opts.get("shards", 8)))
    t0 = time.perf_counter()
    with log.stage("shards"):
        results = _run_on_ray(cfg, ds, queries, shards, shard_config(cfg))
    recall = querypath.in_query_order([r["frames"]["recall"] for r in results], queries, ["rank"])
    tables = {
        name: [r["frames"][name] for r in results if name in r["frames"]]
        for name in ("novelty", "signals")
    }
    mans = [r["manifest"] for r in results]
    _merge_counts(log, ds, mans)
    log.rows["recall"] = recall.height
    log.rows["queries_without_results"] = queries.height - recall["query_id"].n_unique()
    info = {
        "name": "ray",
        "shards": len(shards),
        "workers": len({r["pid"] for r in results}),
        "num_workers": int(opts.get("num_workers", 2)),
        "shard_queries": [len(s) for s in shards],
        "wall_s": round(time.perf_counter() - t0, 4),
        "worker_timings_s": _summed_timings(mans),
        "worker_peak_rss_mb": max(m["peak_rss_mb"] for m in mans),
    }
    xb = None
    if cfg.analyze.enabled and "dense" in cfg.channels:  # the topic analysis runs on the driver
        from pipeline.stages.embed import EmbedParams, embed_nodes

        with log.stage("embed"):
            xb = embed_nodes(EmbedParams.of_run(cfg), nodes, device)[2]
    return querypath.Recalled(
        recall=recall,
        novelty=querypath.in_query_order(tables["novelty"], queries, [])
        if tables["novelty"]
        else None,
        signals=signals.merge_groups(tables["signals"]),
        xb=xb,
        n_embedded=sum(m["embedded_texts"] for m in mans),
        reused=sorted({s for m in mans for s in m["reused_stages"]}),
        freshness=mans[0]["signals_freshness"],
        executor=info,
        auto=merge_auto([m.get("auto") for m in mans]),
    )


def merge_auto(parts: list) -> list | None:
    """The shards' ``preset=auto`` summaries as one (group counts added; a query group split over
    shards counts once per shard); None when auto was off."""
    from pipeline.run import autopreset

    if all(p is None for p in parts):
        return None
    counts: dict = {}
    for part in parts:
        for e in part or []:
            key = json.dumps(
                {"features": e["features"], "overrides": e["overrides"]}, sort_keys=True
            )
            counts[key] = counts.get(key, 0) + e["groups"]
    return autopreset.summary(counts)


def _merge_counts(log, ds, mans: list[dict]) -> None:
    """Shard row counts, skips, fallbacks and graph implementations into the driver's."""
    from pipeline.core import backend

    for m in mans:
        for k, v in m["rows"].items():
            if k in PER_QUERY_ROWS:
                log.rows[k] = log.rows.get(k, 0) + v
            elif k in PER_GROUP_MAX_ROWS:
                log.rows[k] = max(log.rows.get(k, 0), v)
            elif k not in log.rows and k not in ("recall", "queries_without_results"):
                log.rows[k] = v
    for k in {k for m in mans for k in m["skipped"]} - set(DRIVER_SKIPPED):
        ds.skipped[k] += max(m["skipped"].get(k, 0) for m in mans)
    fallbacks = {
        json.dumps(f, sort_keys=True, default=str): f for m in mans for f in m["fallbacks"]
    }
    backend.FALLBACKS.extend(f for f in fallbacks.values() if f not in backend.FALLBACKS)
    for m in mans:
        backend.GRAPH_IMPL.update(m["graph_algorithms"])


def _summed_timings(mans: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in mans:
        for k, v in m["timings_s"].items():
            out[k] = round(out.get(k, 0.0) + v, 4)
    return out
