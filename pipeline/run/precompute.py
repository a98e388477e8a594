"""``recall precompute``: the nightly recall cache, recomputing only queries whose key changed.

The cache of one dataset under one recipe is a namespace under ``<cache_dir>/recall/``
(``pipeline.recallcache.keys.namespace``; ``namespace=`` overrides it), so one ``cache_dir`` holds any
number of datasets and recipes side by side. A run takes the namespace's lock, writes a new
generation and switches the ``CURRENT`` pointer to it (``pipeline.recallcache.layout``): a reader
(``pipeline.serve.RecallCache``, ``recall serve``) sees the old build or the new one, never a mix.
In a generation (hive-partitioned Parquet, e.g.
``pl.scan_parquet(f"{generation}/**/*.parquet", hive_partitioning=True)``)::

    scope=<scope id>/data.parquet   one row per (query, rank): query_id, text, the key columns
                                    (text_key, scope_version, recipe), injection, the recall row
    _keys.arrow                     every entry's key (the next run reads it, not the partitions)
    _manifest.json                  recipe, partitions (queries, bytes, sha256), hits/misses, tier
                                    counts (written last)

The keys (``text_key``: a documented hash of the normalised text; the scope id; the recipe) are
those of ``pipeline.recallcache.keys``, which any client can recompute. The next run trusts
``_keys.arrow`` only when the manifest is there and every partition it lists has the bytes and
sha256 the manifest records (else it reads the keys back from the partitions): keys never say
"new" over rows that are old. A partition whose entries did not change is a hard link to the
previous generation's file.

With ``signals.enabled`` it also writes the memory-curve tiers of every scope under
``<cache_dir>/tiers/<namespace>/`` (``pipeline.run.precompute_tiers``) and their counts per scope id
in this manifest (``tiers``, ``tiers_rewritten``).

A query with no recall keeps one row with a null ``rank`` (still a cache hit). With
``inject.format`` set, ``injection`` holds the query's injection block (the text of a run's
``injection.parquet``, rendered over every query's rows as a run does; a partition whose blocks
changed is rewritten). The missed queries run through the local query path
(``querypath.recall_queries``) as one subset of the dataset: only those queries and the nodes their
groups may see. A query's result depends only on its own group (``pipeline.run.querypath``), so the
rows served equal those of a full run by construction.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import DictConfig

from pipeline.contract import io
from pipeline.contract.dataset import Dataset, require_queries
from pipeline.contract.errors import ConfigError
from pipeline.contract.ingest import drop_empty
from pipeline.contract.registry import call_target
from pipeline.core import backend
from pipeline.core.stagelog import StageLog
from pipeline.inject import formats
from pipeline.ops.scope import scope_groups
from pipeline.recallcache import keys as serve_keys
from pipeline.recallcache import layout, partitions, recipe
from pipeline.recallcache.partitions import ENTRY_COLUMNS, KEY_COLUMNS, KEY_INDEX, read_keys
from pipeline.run import clock, precompute_tiers, querypath
from pipeline.run.querypath import keyword_store
from pipeline.stages.select import with_node_text

__all__ = ["precompute", "served", "injections", "live", "KEY_COLUMNS", "ENTRY_COLUMNS"]
__all__ += ["KEY_INDEX", "read_keys", "compute_missing", "recall_rows"]


def live(cache_dir: str | Path, namespace: str | None = None) -> Path | None:
    """The live generation folder of ``namespace`` (None: the only namespace of ``cache_dir``; a
    ConfigError naming them when there are several); None before its first build."""
    if namespace is None:
        names = layout.namespaces(cache_dir)
        if len(names) > 1:
            raise ConfigError(
                f"{layout.recall_root(cache_dir)} holds several namespaces {names}; name one "
                "(namespace=<name>)"
            )
        if not names:
            return None
        namespace = names[0]
    ns_dir = layout.namespace_dir(cache_dir, namespace)
    gen = layout.current(ns_dir)
    return ns_dir / gen if gen else None


def _partitions(cache_dir: str | Path, namespace: str | None) -> pl.DataFrame | None:
    gen = live(cache_dir, namespace)
    paths = sorted(gen.glob("scope=*/data.parquet")) if gen else []
    if not paths:
        return None
    return pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")


def served(cache_dir: str | Path, namespace: str | None = None) -> pl.DataFrame:
    """The recall rows the live generation serves, sorted by query then rank: every partition
    without the key and entry columns and the null-rank rows that stand for "no recall"
    (comparable to a run's recall.parquet)."""
    parts = _partitions(cache_dir, namespace)
    if parts is None:
        return pl.DataFrame(schema={"query_id": pl.String, "rank": pl.Int32})
    rows = parts.filter(pl.col("rank").is_not_null()).drop(KEY_COLUMNS + ENTRY_COLUMNS)
    return rows.sort(["query_id", "rank"], maintain_order=True)


def injections(cache_dir: str | Path, namespace: str | None = None) -> pl.DataFrame:
    """(query_id, text) of every cached injection block, by query_id (comparable to the
    ``query_id`` and ``text`` of a run's injection.parquet)."""
    parts = _partitions(cache_dir, namespace)
    if parts is None:
        return pl.DataFrame(schema={"query_id": pl.String, "text": pl.String})
    one = parts.unique("query_id", keep="first", maintain_order=True)
    one = one.filter(pl.col("injection").is_not_null())
    return one.select("query_id", text="injection").sort("query_id")


def scope_nodes(cfg: DictConfig, nodes: pl.DataFrame, queries: pl.DataFrame) -> pl.DataFrame:
    """The nodes the given queries' groups may see (``ops.scope.scope_groups``): nothing else can
    change their results, so the other nodes are neither embedded nor read."""
    groups = scope_groups(nodes, queries, bool(cfg.include_archived))
    rows = np.unique(np.concatenate([r for _k, r, _q in groups] + [np.zeros(0, np.int64)]))
    return nodes[rows]


def recall_rows(
    cfg: DictConfig, ds: Dataset, nodes: pl.DataFrame, queries: pl.DataFrame, memo=None
) -> tuple[pl.DataFrame, dict]:
    """(recall rows of ``queries``, stage seconds) by the local query path on the subset of the
    dataset they may see; ``memo`` (``querypath.recall_queries``) keeps per-node-table work."""
    sub = ds.part(queries, scope_nodes(cfg, nodes, queries))
    log = StageLog()
    backend.reset()
    cfg = keyword_store(cfg, ds)  # keys and namespaces stay the given recipe's (serve's too)
    sub_nodes, sub_queries = drop_empty(sub)
    got = querypath.recall_queries(
        cfg, sub, sub_nodes, sub_queries, backend.resolve_device(cfg.device), log, memo
    )
    return with_node_text(got.recall, sub_nodes), log.seconds  # a run's recall.parquet columns


def injection_blocks(
    cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, old, hit, new
) -> pl.DataFrame | None:
    """(query_id, injection) of every query under ``inject.format``, rendered over every query's
    rows (the hits' from the previous generation, the misses' new) as a run renders
    injection.parquet; None when the format is ``none``."""
    if cfg.inject.format == "none":
        return None
    prev = partitions.old_rows(old, set(hit["scope"].to_list()))
    parts = (
        [] if prev is None else [prev.filter(pl.col("query_id").is_in(hit["query_id"].implode()))]
    )
    parts += [new.drop("scope")] if new.height else []
    rows = pl.concat(
        [p.drop(KEY_COLUMNS + ENTRY_COLUMNS, strict=False) for p in parts], how="diagonal_relaxed"
    )
    rows = querypath.in_query_order([rows.filter(pl.col("rank").is_not_null())], queries, ["rank"])
    blocks = formats.render(
        rows,
        nodes,
        cfg.inject.format,
        queries=queries,
        include_archived=bool(cfg.include_archived),
        edges=ds.edges,
        log=ds.use_log(),
        **{k: v for k, v in cfg.inject.items() if k != "format"},
    )
    return blocks.select("query_id", injection="text")


def compute_missing(
    cfg: DictConfig, ds: Dataset, nodes: pl.DataFrame, queries: pl.DataFrame, miss: pl.DataFrame
) -> tuple[pl.DataFrame, dict]:
    """Recall rows (with key and text columns) of the missed queries, by :func:`recall_rows`;
    and the stage seconds."""
    missed = queries.filter(pl.col("query_id").is_in(miss["query_id"].implode()))
    rows, seconds = recall_rows(cfg, ds, nodes, missed)
    keyed = miss.drop("scope").join(rows, on="query_id", how="left")  # no recall → null rank
    return keyed.select(*rows.columns, *KEY_COLUMNS, "query_text"), seconds


def uses_log(cfg: DictConfig) -> bool:
    """True when the recipe reads the injection log (the collab channel, the CF boosts)."""
    return bool(
        "collab" in cfg.channels or cfg.inject.get("beta_item") or cfg.inject.get("beta_user")
    )


def keys_log(cfg: DictConfig, ds: Dataset) -> pl.DataFrame | None:
    """The injection log a scope version covers (read by the collab channel and the CF boosts),
    else None."""
    return ds.use_log() if uses_log(cfg) else None


def entry_keys(cfg: DictConfig, ds: Dataset, nodes: pl.DataFrame, queries: pl.DataFrame):
    """One row per query: query_id, scope, scope_version, recipe (``recipe.query_keys``), its
    text and text key (``pipeline.recallcache.keys.query_key``)."""
    keys = recipe.query_keys(cfg, nodes, queries, ds.edges, keys_log(cfg, ds))
    fields = [c for c in queries.columns if c in serve_keys.RESULT_FIELDS]
    rows = queries.select("text", *fields).to_dicts()
    text_keys = [serve_keys.query_key(r["text"], r) for r in rows]
    return keys.with_columns(
        text_key=pl.Series(text_keys, dtype=pl.String), query_text=queries["text"].cast(pl.String)
    )


def precompute(cfg: DictConfig, dataset: Dataset | None = None) -> dict:
    """Bring the dataset's namespace under ``<cfg.cache_dir>/recall`` up to date (under its lock, as
    a new generation); returns hits, misses, partitions, namespace, generation and timings."""
    cfg = clock.resolve(cfg)  # default_now: start → this run's start, recorded in the manifest
    ds = dataset if dataset is not None else call_target(cfg.data)
    require_queries(cfg.data.name, ds.queries)
    namespace = serve_keys.namespace(ds.name, **recipe.namespace_parts(cfg))
    ns_dir = layout.namespace_dir(cfg.cache_dir, namespace)
    with layout.locked(ns_dir):
        return _build(cfg, ds, namespace, ns_dir)


def _build(cfg: DictConfig, ds: Dataset, namespace: str, ns_dir: Path) -> dict:
    """:func:`precompute` once the lock is held."""
    t0 = time.perf_counter()
    nodes, queries = drop_empty(ds)
    keys = entry_keys(cfg, ds, nodes, queries)
    live_gen = layout.current(ns_dir)
    old, cached = partitions.usable_keys(ns_dir / live_gen if live_gen else None)
    hit = keys.join(cached, on=["query_id", "scope", *KEY_COLUMNS], how="semi")
    miss = keys.join(hit, on="query_id", how="anti")
    t_keys = time.perf_counter() - t0
    new, run_timings = pl.DataFrame(schema={"query_id": pl.String, "scope": pl.String}), {}
    if miss.height:
        new, run_timings = compute_missing(cfg, ds, nodes, queries, miss)
        new = new.join(keys.select("query_id", "scope"), on="query_id", how="left")
    t_run = time.perf_counter() - t0 - t_keys
    tmp, name = layout.begin(ns_dir)
    inj = injection_blocks(cfg, ds, nodes, queries, old, hit, new)
    changed = partitions.write_partitions(tmp, old, keys, hit, new, cached, inj)
    partitions.write_key_index(tmp, keys)
    summary = _summary(cfg, ds, nodes, queries, keys, changed, hit, miss, namespace)
    summary |= {"namespace": namespace, "generation": name, "root": str(ns_dir / name)}
    summary["timings_s"] = {
        "keys": round(t_keys, 4),
        "run": round(t_run, 4),
        "total": round(time.perf_counter() - t0, 4),
    }
    summary["run_timings_s"] = run_timings
    io.write_json(tmp / "_manifest.json", summary)  # last: a generation without it is unfinished
    layout.publish(ns_dir, tmp, name)
    return summary


def _summary(cfg, ds, nodes, queries, keys, changed: dict, hit, miss, namespace: str) -> dict:
    """The manifest's body: hits, misses, recipe, partitions (with their files' bytes and sha256),
    rewritten/removed scope ids, tiers."""
    per_scope = keys.group_by("scope", maintain_order=True).agg(
        n=pl.len(), version=pl.col("scope_version").first()
    )
    parts = {
        s: {"doc_scope": None, "queries": n, "scope_version": v, **changed["files"][s]}
        for s, n, v in zip(*(per_scope[c].to_list() for c in ("scope", "n", "version")))
    }
    scopes = (
        queries["doc_scope"].to_list()
        if "doc_scope" in queries.columns
        else [None] * queries.height
    )
    for scope in dict.fromkeys(recipe.scope_of(s) for s in scopes):
        parts[recipe.scope_id(scope)]["doc_scope"] = scope
    tiers = precompute_tiers.manifest_entries(  # before the recall manifest, written last
        cfg,
        nodes,
        ds.edges,
        [recipe.scope_of(s) for s in scopes],
        querypath.config_now(cfg) or clock.default_time(cfg),
        namespace,
    )
    return {
        "hits": hit.height,
        "misses": miss.height,
        "recipe": keys["recipe"][0] if keys.height else None,
        "partitions": parts,
        "rewritten": changed["rewritten"],
        "removed": changed["removed"],
        **tiers,
        "default_now": cfg.get("default_now"),  # the reference time rule or time (run/clock.py)
        "data_notes": dict(ds.notes),
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
