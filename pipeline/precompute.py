"""``recall precompute``: the nightly recall cache, recomputing only queries whose key changed.

Layout under ``<cache_dir>/recall/`` (hive-partitioned Parquet, e.g.
``pl.scan_parquet(f"{cache_dir}/recall/**/*.parquet", hive_partitioning=True)``)::

    scope=<scope id>/data.parquet   recall rows of that scope's queries + their key columns
    _keys.arrow                     every entry's key (read on the next run instead of the partitions)
    _manifest.json                  recipe, partitions, hits/misses, tier counts (written last)

With ``signals.enabled`` it also writes the memory-curve tiers of every scope under
``<cache_dir>/tiers/`` (``pipeline.precompute_tiers``: one Parquet per scope, recomputed only for
scopes whose nodes changed) and their counts per scope id in this manifest (``tiers``: {scope id:
{hot, warm, cold, evictable}}; ``tiers_rewritten``: the scope ids recomputed this run).

Each row carries its query's key (``query_hash``, ``scope_version``, ``recipe``), so a partition
is self-describing and written atomically as one file; a query with no recall keeps one row with a
null ``rank`` (still a cache hit). The missed queries run through the local query path
(``querypath.recall_queries``) as one subset of the dataset: only those queries and the nodes their
groups may see. A query's result depends only
on its own group (``pipeline.querypath``: its visible nodes, the edges among them, its reference
time), so the rows served equal those of a full run by construction.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import time
from io import BytesIO
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import DictConfig

from pipeline import backend, cachekeys, io, precompute_tiers, querypath
from pipeline.common import StageLog, call_target
from pipeline.dataset import Dataset
from pipeline.ingest import drop_empty
from pipeline.ops.scope import scope_groups
from pipeline.progress import progress
from pipeline.stages.select import with_node_text

log = logging.getLogger(__name__)
KEY_COLUMNS = ["query_hash", "scope_version", "recipe"]
# every entry's key in one file (not *.parquet, so `recall/**/*.parquet` scans see partitions only)
KEY_INDEX = "_keys.arrow"


def partition_path(root: Path, scope: str) -> Path:
    """The Parquet file of one scope's partition in the recall cache at ``root``."""
    return root / f"scope={scope}" / "data.parquet"


def read_keys(root: Path) -> pl.DataFrame:
    """(query_id, query_hash, scope_version, recipe, scope) of every cached entry: the key index
    when the last run finished (its manifest is there; the index is written just before it), else
    read back from every partition (an unfinished run, or a cache from before the index)."""
    if (root / "_manifest.json").is_file() and (root / KEY_INDEX).is_file():
        return pl.read_ipc(BytesIO((root / KEY_INDEX).read_bytes()))
    return scan_keys(root)


def scan_keys(root: Path) -> pl.DataFrame:
    """:func:`read_keys` from the partitions themselves (one file read per scope)."""
    frames = [
        pl.read_parquet(p, columns=["query_id", *KEY_COLUMNS])
        .unique()
        .with_columns(scope=pl.lit(p.parent.name.split("=", 1)[1]))
        for p in sorted(root.glob("scope=*/data.parquet"))
    ]
    schema = {"query_id": pl.String, **{c: pl.String for c in KEY_COLUMNS}, "scope": pl.String}
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


def served(cache_dir: str | Path) -> pl.DataFrame:
    """The recall rows the cache serves, sorted by query then rank: every partition without the key
    columns and the null-rank rows that stand for "no recall" (comparable to a run's recall.parquet)."""
    parts = [
        pl.read_parquet(p)
        for p in sorted((Path(cache_dir) / "recall").glob("scope=*/data.parquet"))
    ]
    if not parts:
        return pl.DataFrame(schema={"query_id": pl.String, "rank": pl.Int32})
    rows = (
        pl.concat(parts, how="diagonal_relaxed")
        .filter(pl.col("rank").is_not_null())
        .drop(KEY_COLUMNS)
    )
    return rows.sort(["query_id", "rank"], maintain_order=True)


def scope_nodes(cfg: DictConfig, nodes: pl.DataFrame, queries: pl.DataFrame) -> pl.DataFrame:
    """The nodes the given queries' groups may see (``ops.scope.scope_groups``): nothing else can
    change their results, so the other nodes are neither embedded nor read."""
    groups = scope_groups(nodes, queries, bool(cfg.include_archived))
    rows = np.unique(np.concatenate([r for _k, r, _q in groups] + [np.zeros(0, np.int64)]))
    return nodes[rows]


def compute_missing(
    cfg: DictConfig, ds: Dataset, nodes: pl.DataFrame, queries: pl.DataFrame, miss: pl.DataFrame
) -> tuple[pl.DataFrame, dict]:
    """Recall rows (with key columns) of the missed queries, by the local query path on that subset;
    and the stage seconds."""
    missed = queries.filter(pl.col("query_id").is_in(miss["query_id"].implode()))
    sub = ds.part(missed, scope_nodes(cfg, nodes, missed))
    log = StageLog()
    backend.reset()
    sub_nodes, sub_queries = drop_empty(sub)
    rows = querypath.recall_queries(
        cfg, sub, sub_nodes, sub_queries, backend.resolve_device(cfg.device), log
    ).recall
    rows = with_node_text(rows, sub_nodes)  # the columns a run's recall.parquet has
    keyed = miss.drop("scope").join(
        rows, on="query_id", how="left"
    )  # no recall → one null-rank row
    return keyed.select(*rows.columns, *KEY_COLUMNS), log.seconds


def _changed_scopes(hit: pl.DataFrame, cached: pl.DataFrame, scopes: set) -> set:
    """The scopes among ``scopes`` whose cached query set differs from the hits' (queries gone or
    moved): one symmetric anti-join, not a filter per scope (10,000 scopes took minutes)."""
    pairs = ["scope", "query_id"]
    want = hit.select(pairs).filter(pl.col("scope").is_in(list(scopes)))
    have = cached.select(pairs).filter(pl.col("scope").is_in(list(scopes)))
    diff = pl.concat([want.join(have, on=pairs, how="anti"), have.join(want, on=pairs, how="anti")])
    return set(diff["scope"].to_list())


def write_partitions(
    root: Path, keys: pl.DataFrame, hit: pl.DataFrame, new: pl.DataFrame, cached: pl.DataFrame
) -> dict:
    """Rewrite each partition whose entries changed (misses, or queries gone); delete emptied ones.
    ``cached`` is :func:`read_keys` of ``root`` before this run."""
    old_scopes = {p.parent.name.split("=", 1)[1] for p in root.glob("scope=*/data.parquet")}
    cur_scopes = set(keys["scope"].to_list())
    dirty = set(new["scope"].to_list()) if new.height else set()
    dirty |= _changed_scopes(hit, cached, cur_scopes & old_scopes)
    kept = hit.filter(pl.col("scope").is_in(list(dirty))).partition_by("scope", as_dict=True)
    fresh = new.filter(pl.col("scope").is_in(list(dirty))).partition_by("scope", as_dict=True)
    for s in progress(sorted(dirty), "recall cache partitions", unit="scope"):
        keep = kept[(s,)]["query_id"].to_list() if (s,) in kept else []
        parts = [fresh[(s,)].drop("scope") if (s,) in fresh else new.head(0).drop("scope")]
        path = partition_path(root, s)
        if path.exists():
            parts.insert(0, pl.read_parquet(path).filter(pl.col("query_id").is_in(keep)))
        frame = pl.concat([p for p in parts if p.height or p.width], how="diagonal_relaxed")
        io.write_parquet(path, frame.sort(["query_id", "rank"], nulls_last=False))
    for s in sorted(old_scopes - cur_scopes):
        shutil.rmtree(partition_path(root, s).parent)
    return {"rewritten": sorted(dirty), "removed": sorted(old_scopes - cur_scopes)}


def write_key_index(root: Path, keys: pl.DataFrame) -> None:
    """The key index: after :func:`write_partitions` the cache holds exactly this run's ``keys``
    (every query is a hit or was recomputed; a query without recall keeps a null-rank row)."""
    cols = ["query_id", *KEY_COLUMNS, "scope"]
    buf = BytesIO()
    keys.select(pl.col(c).cast(pl.String) for c in cols).sort("scope", "query_id").write_ipc(buf)
    io.atomic_write_bytes(root / KEY_INDEX, buf.getvalue())


def precompute(cfg: DictConfig, dataset: Dataset | None = None) -> dict:
    """Bring ``<cfg.cache_dir>/recall`` up to date; returns hits, misses, partitions and timings."""
    t0 = time.perf_counter()
    root = Path(cfg.cache_dir) / "recall"
    root.mkdir(parents=True, exist_ok=True)
    ds = dataset if dataset is not None else call_target(cfg.data)
    nodes, queries = drop_empty(ds)
    uses_log = (
        "collab" in cfg.channels or cfg.inject.get("beta_item") or cfg.inject.get("beta_user")
    )
    keys = cachekeys.query_keys(cfg, nodes, queries, ds.edges, ds.use_log() if uses_log else None)
    scope_of_q = keys.select("query_id", "scope")
    cached = read_keys(root)
    hit = keys.join(cached, on=["query_id", "scope", *KEY_COLUMNS], how="semi")
    miss = keys.join(hit, on="query_id", how="anti")
    t_keys = time.perf_counter() - t0
    new, run_timings = pl.DataFrame(schema={"query_id": pl.String, "scope": pl.String}), {}
    if miss.height:
        new, run_timings = compute_missing(cfg, ds, nodes, queries, miss)
        new = new.join(scope_of_q, on="query_id", how="left")
    t_run = time.perf_counter() - t0 - t_keys
    (root / "_manifest.json").unlink(missing_ok=True)  # partitions change now; manifest comes last
    changed = write_partitions(root, keys, hit, new, cached)
    write_key_index(root, keys)
    per_scope = keys.group_by("scope", maintain_order=True).agg(
        n=pl.len(), version=pl.col("scope_version").first()
    )
    parts = {
        s: {"doc_scope": None, "queries": n, "scope_version": v}
        for s, n, v in zip(*(per_scope[c].to_list() for c in ("scope", "n", "version")))
    }
    scopes = (
        queries["doc_scope"].to_list()
        if "doc_scope" in queries.columns
        else [None] * queries.height
    )
    for scope in dict.fromkeys(cachekeys.scope_of(s) for s in scopes):
        parts[cachekeys.scope_id(scope)]["doc_scope"] = scope
    tiers = precompute_tiers.manifest_entries(  # before the recall manifest, written last
        cfg, nodes, ds.edges, [cachekeys.scope_of(s) for s in scopes], querypath.config_now(cfg)
    )
    summary = {
        "hits": hit.height,
        "misses": miss.height,
        "recipe": keys["recipe"][0] if keys.height else None,
        "partitions": parts,
        **changed,
        **tiers,
        "timings_s": {
            "keys": round(t_keys, 4),
            "run": round(t_run, 4),
            "total": round(time.perf_counter() - t0, 4),
        },
        "run_timings_s": run_timings,
        "data_notes": dict(ds.notes),
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    io.write_json(root / "_manifest.json", summary)
    return summary
