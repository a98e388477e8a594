"""Recall-cache keys: (query text key, version of the query's scope of the corpus, recipe hash).

- **text key**: ``pipeline.recallcache.keys.query_key`` (a documented hash of the normalised text and the
  query fields that change its recall; any client can recompute it).
- **scope**: a query's ``doc_scope`` (sorted, deduplicated) or the whole corpus; ``scope_id`` names
  the partition. Its **version** hashes everything the query's group reads (``pipeline.run.querypath``):
  the nodes inside the scope (every column, so visibility, archived and timestamps — the reference
  time falls back to the latest of them; the rows of a ``signals.path`` table are joined in) and the
  explicit edges touching them. Every statistic (hub counts, signals, kNN edges, BM25 idf) is
  computed per group from those nodes, so no scope's version depends on another scope.
- **recipe**: the resolved config (``now=`` included) without paths, data location and outputs
  that do not change the recall table, plus the code/hash versions.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.core import version
from pipeline.ops.scope import edge_ends, scope_rows

ALL = "all"
NOT_RECIPE = (
    "device",  # where a run computes, not what: one answer across devices (docs/reliability.md)
    "out_dir",
    "cache_dir",
    "data_dir",
    "data",
    "report",
    "evaluate",
    "inject",
    "analyze",
    "namespace",
    "serve",
    "bme_cards",
)


def _sha(*chunks: bytes) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.hexdigest()[:16]


def recipe_hash(cfg: DictConfig, versions: bool = True) -> str:
    """Hash of the resolved config less the keys that do not change recall (NOT_RECIPE,
    signals.path), with the code and polars versions (``versions=False``: the settings alone, what
    names a cache namespace across code upgrades and run starts: without ``default_now``)."""
    conf = OmegaConf.to_container(cfg, resolve=True)
    conf = {k: v for k, v in conf.items() if k not in NOT_RECIPE}
    if not versions or conf.get("default_now") is None:  # pipeline/run/clock.py: a run's time
        conf.pop(
            "default_now", None
        )  # names no namespace; unset, it leaves older hashes as they were
    conf["signals"] = {k: v for k, v in conf.get("signals", {}).items() if k != "path"}
    if versions:
        conf["_versions"] = [version.code_version(), pl.__version__]
    return _sha(json.dumps(conf, sort_keys=True, default=str).encode())


def namespace_parts(cfg: DictConfig) -> dict:
    """What of a config names its cache namespace (``keys.namespace``'s keyword arguments): the
    resolved ``data`` and ``inject`` nodes, :func:`recipe_hash` without versions, ``namespace=``."""
    return {
        "data": OmegaConf.to_container(cfg.data, resolve=True),
        "recipe": recipe_hash(cfg, versions=False),
        "inject": OmegaConf.to_container(cfg.inject, resolve=True),
        "given": cfg.get("namespace"),
    }


def scope_of(doc_scope) -> tuple[str, ...] | None:
    """A query's ``doc_scope`` as a sorted tuple of unique scopes; None (no scope) stays None."""
    return (
        None if doc_scope is None else tuple(sorted(set(doc_scope)))
    )  # [] sees nothing (ops.scope)


def scope_id(scope: tuple[str, ...] | None) -> str:
    """Short stable id of a scope tuple for cache partition names; ``all`` for no scope."""
    return ALL if scope is None else _sha(json.dumps(list(scope)).encode())[:12]


def _node_hashes(nodes: pl.DataFrame, signals_path: str | None) -> np.ndarray:
    if signals_path and Path(signals_path).is_file():
        sig = pl.read_parquet(signals_path)
        nodes = nodes.join(sig, on="node_id", how="left", suffix="_signal", maintain_order="left")
    return nodes.hash_rows(seed=0).to_numpy()


def _edge_ends(
    nodes: pl.DataFrame, edges: pl.DataFrame | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src index, dst index, row hash) of each explicit edge; -1 for an end that is not a node."""
    if edges is None or edges.height == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.uint64)
    return *edge_ends(nodes, edges), edges.hash_rows(seed=0).to_numpy()


def scope_versions(
    nodes: pl.DataFrame, edges: pl.DataFrame | None, scopes: list, cfg: DictConfig
) -> dict:
    """{scope: version} for each scope (a doc_scope tuple or None); ``nodes`` sorted by node_id."""
    nh = _node_hashes(nodes, cfg.signals.get("path") if cfg.signals.enabled else None)
    src, dst, eh = _edge_ends(nodes, edges)
    whole = _sha(nh.tobytes(), eh.tobytes())
    digest = (
        nh.copy()
    )  # node row hash + the hashes of the explicit edges touching the node (mod 2^64)
    for end in (src, dst):
        np.add.at(digest, end[end >= 0], eh[end >= 0])
    rows = scope_rows(nodes, [s for s in scopes if s is not None])
    return {s: whole if s is None else _sha(digest[rows[s]].tobytes()) for s in scopes}


def _team(df: pl.DataFrame) -> pl.Series:
    return (
        df["team"].cast(pl.String).fill_null("")
        if "team" in df.columns
        else pl.Series([""] * df.height, dtype=pl.String)  # typed: an empty log has no rows
    )


def team_log_versions(log: pl.DataFrame | None, queries: pl.DataFrame) -> list[str]:
    """Per query: the hash of its team's injection-log rows in log order (``team``, absent = one
    team), what the collab channel and the CF boosts read; "" without a log."""
    if log is None:
        return [""] * queries.height
    teams = _team(log)
    by_team = {}
    for t in dict.fromkeys(_team(queries).to_list()):
        rows = log.filter(teams == t)
        by_team[t] = _sha(rows.hash_rows(seed=0).to_numpy().tobytes(), str(rows.height).encode())
    return [by_team[t] for t in _team(queries).to_list()]


def query_keys(
    cfg: DictConfig,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    edges: pl.DataFrame | None,
    log: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per query: query_id, scope (partition id), scope_version, recipe (the text key is
    ``pipeline.recallcache.keys.query_key``, added by ``pipeline.run.precompute``).
    With ``log`` (read by the collab channel), a query's scope version also covers its team's rows
    of the log, so a new log row misses exactly that team's queries."""
    scopes = [
        scope_of(s)
        for s in (
            queries["doc_scope"].to_list()
            if "doc_scope" in queries.columns
            else [None] * queries.height
        )
    ]
    distinct = list(dict.fromkeys(scopes))
    versions = scope_versions(nodes, edges, distinct, cfg)
    ids = {s: scope_id(s) for s in distinct}
    return pl.DataFrame(
        {
            "query_id": queries["query_id"].cast(pl.String),
            "scope": [ids[s] for s in scopes],
            "scope_version": [
                versions[s] if not t else _sha(versions[s].encode(), t.encode())
                for s, t in zip(scopes, team_log_versions(log, queries), strict=True)
            ],
            "recipe": recipe_hash(cfg),
        }
    )
