"""Memory-curve tiers per scope for ``recall precompute`` (OKS: hot ≥ 0.7, warm ≥ 0.4, cold ≥
0.15, else evictable; ``stages.signals.memory_score`` and ``signals.tier``), when
``signals.enabled`` (``preset=oks_team``, or ``signals=default``).

Layout under ``<cache_dir>/tiers/<namespace>/`` (beside ``recall/``, so ``recall/**/*.parquet``
scans never see it; the namespace is the recall cache's, ``pipeline.recallcache.keys.namespace``, so
datasets side by side keep their own tiers; hive-partitioned,
``pl.scan_parquet(f"{cache_dir}/tiers/{namespace}/**/*.parquet", hive_partitioning=True)``)::

    scope=<scope id>/data.parquet   node_id, memory_score, tier, now (one row per node of the scope)
    _manifest.json                  {scope id: {doc_scope, key, now, counts}} (written last)

A scope is a query ``doc_scope`` (the recall partitions' scope ids; ``all`` = no scope). Its nodes
are every node under that scope, archived ones included (their score is 0: evictable); viewer
visibility is not applied (a tier is the node's, not a reader's). The reference time is the
config's ``now=`` if given, else the latest node timestamp of the scope (never the wall clock, never
another scope's node): run the nightly job with ``now=<tonight>`` to get tiers as of tonight.
With ``signals.path`` (a ``recall feedback`` table) its access columns are overlaid first, as in
a run.
A scope's partition is recomputed only when its key changes: the hash of its nodes' rows and the
edges touching them (``recipe.scope_versions``), ``now=``, the signals and code versions. So one
scope's nodes never change another scope's rows, and after an edit only the edited scope's file is
rewritten; the others keep their bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl
from omegaconf import DictConfig

from pipeline.contract import io
from pipeline.core import version
from pipeline.ops.scope import latest_stamp, scope_rows
from pipeline.recallcache import recipe
from pipeline.stages import signals

TIER_NAMES = ("hot", "warm", "cold", "evictable")


def _utc(when: dt.datetime) -> dt.datetime:
    return when.astimezone(dt.timezone.utc) if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def feedback_tables(params: signals.SignalsParams) -> Callable:
    """``when → table | None``: the ``signals.path`` feedback table if it is fresh at ``when``
    (``signals.load``), read once per reference time; always None without a path."""
    memo: dict = {}

    def at(when: dt.datetime) -> pl.DataFrame | None:
        if not (params.enabled and params.path):
            return None
        if when not in memo:
            memo[when] = signals.load(params.path, when, params.max_age_days)[0]
        return memo[when]

    return at


def tier_table(
    nodes: pl.DataFrame, now: dt.datetime | None, feedback: Callable | None = None
) -> pl.DataFrame:
    """(node_id, memory_score, tier, now) of ``nodes`` at ``now`` (None: their latest timestamp).
    A feedback table (``feedback(when)``, :func:`feedback_tables`) has its access columns overlaid
    on the nodes first, as the query path does (``signals.for_group``)."""
    when = now or latest_stamp(nodes, np.arange(nodes.height))
    table = feedback(when) if feedback is not None else None
    if table is not None:
        nodes = signals.overlay(nodes, table)
    score = signals.memory_score(nodes, when)
    return pl.DataFrame(
        {
            "node_id": nodes["node_id"].cast(pl.String),
            "memory_score": pl.Series(score, dtype=pl.Float64),
            "tier": pl.Series(signals.tier(score), dtype=pl.String),
            "now": pl.Series([_utc(when)] * nodes.height, dtype=pl.Datetime("us", "UTC")),
        }
    ).sort("node_id")


def counts(table: pl.DataFrame) -> dict:
    """{tier: nodes} in the order hot, warm, cold, evictable (zeros included)."""
    got = dict(table["tier"].value_counts().iter_rows())
    return {t: int(got.get(t, 0)) for t in TIER_NAMES}


def _key(scope_version: str, now: dt.datetime | None) -> str:
    stamp = now.isoformat() if now else ""
    parts = [scope_version, stamp, str(signals.SIGNALS_VERSION), version.code_version()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _old_manifest(root: Path) -> dict:
    path = root / "_manifest.json"
    return json.loads(path.read_text()).get("scopes", {}) if path.is_file() else {}


def write_tiers(
    cache_dir: str | Path,
    cfg: DictConfig,
    nodes: pl.DataFrame,
    edges: pl.DataFrame | None,
    scopes: list,
    now: dt.datetime | None,
    namespace: str = "",
) -> dict:
    """Bring ``<cache_dir>/tiers/<namespace>`` up to date for ``scopes`` (doc_scope tuples or
    None); returns {scopes: {id: {doc_scope, key, now, counts}}, rewritten, removed}. Partitions
    first, the manifest last (removed before the partitions change)."""
    root = Path(cache_dir) / "tiers" / namespace
    root.mkdir(parents=True, exist_ok=True)
    old = _old_manifest(root)
    distinct = list(dict.fromkeys(scopes))
    versions = recipe.scope_versions(nodes, edges, distinct, cfg)
    rows = scope_rows(nodes, [s for s in distinct if s is not None])
    feedback = feedback_tables(signals.SignalsParams.from_cfg(cfg.signals, "signals"))
    (root / "_manifest.json").unlink(missing_ok=True)
    out, rewritten = {}, []
    for s in distinct:
        sid, key = recipe.scope_id(s), _key(versions[s], now)
        path = root / f"scope={sid}" / "data.parquet"
        if old.get(sid, {}).get("key") == key and path.is_file():
            out[sid] = old[sid]
            continue
        table = tier_table(nodes if s is None else nodes[rows[s]], now, feedback)
        io.write_parquet(path, table)
        stamp = table["now"][0].isoformat() if table.height else None
        out[sid] = {"doc_scope": s, "key": key, "now": stamp, "counts": counts(table)}
        rewritten.append(sid)
    removed = sorted(set(old) - set(out))
    for sid in removed:
        shutil.rmtree(root / f"scope={sid}", ignore_errors=True)
    io.write_json(root / "_manifest.json", {"scopes": out, "tier_thresholds": signals.TIERS})
    return {"scopes": out, "rewritten": sorted(rewritten), "removed": removed}


def manifest_entries(
    cfg: DictConfig,
    nodes: pl.DataFrame,
    edges: pl.DataFrame | None,
    scopes: list,
    now: dt.datetime | None,
    namespace: str = "",
) -> dict:
    """:func:`write_tiers` under ``cfg.cache_dir`` (in ``namespace``) when ``signals.enabled``; the recall manifest's
    entries: ``tiers`` {scope id: {hot, warm, cold, evictable}} and ``tiers_rewritten`` (ids
    recomputed this run). {} (nothing written) when signals are off."""
    if not cfg.signals.enabled:
        return {}
    got = write_tiers(cfg.cache_dir, cfg, nodes, edges, scopes, now, namespace)
    counts_ = {k: v["counts"] for k, v in got["scopes"].items()}
    return {"tiers": counts_, "tiers_rewritten": got["rewritten"]}
