"""Per-node maintenance signals: ReMe's designed centrality / community / recency / archived signals
(docs/presets.md, ``reme_design``) and OKS's Memory Curve (docs/presets.md, ``oks``).

``compute`` turns the node table and the index-based edge frame (``graph.build``) into one row per
node; ``write``/``load`` keep that table on disk with a version and ``computed_at``; a missing, stale
or other-version file loads as ``None`` (downstream: factor 1, no filter). ``inbound_factor``,
``same_community`` and ``recency_decay`` are the multipliers scoring applies; each is 1 where the
signal is missing.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.contract.io import write_parquet
from pipeline.core.stage import Params, Stage
from pipeline.ops import graphalgo
from pipeline.ops.oks_native import DECAY_LAMBDA, OTHER_LAMBDA, PIN_BONUS

log = logging.getLogger(__name__)

SIGNALS_VERSION = 1
DAY_US = 86_400 * 1_000_000
RECENCY_DAYS = 60.0  # ReMe: exp(-Δt / 60 d)
ARCHIVE_BELOW = 0.15  # ReMe: archived = recency_score < 0.15
TIERS = ((0.7, "hot"), (0.4, "warm"), (0.15, "cold"))  # else "evictable"


@dataclass(frozen=True)
class SignalsParams(Params):
    """Signals settings: Leiden resolution and seed, age window, a precomputed table."""

    GROUP: ClassVar[str] = "signals"
    OPTION: ClassVar[str] = "default"  # what Params.defaults() loads
    enabled: bool
    resolution: float  # Leiden (RB configuration model; 1.0 = modularity)
    seed: int
    max_age_days: float
    path: str | None  # None: compute in-run; else load a precomputed table
    device: str = field(
        default="cpu", metadata={"runtime": True}
    )  # the run's device, set by the stage


def _utc(now: dt.datetime) -> dt.datetime:
    return (
        now.replace(tzinfo=dt.timezone.utc)
        if now.tzinfo is None
        else now.astimezone(dt.timezone.utc)
    )


def _col(nodes: pl.DataFrame, name: str, dtype, default) -> np.ndarray:
    """Column as numpy with nulls (or a missing column) replaced by ``default``."""
    if name not in nodes.columns:
        return np.full(nodes.height, default, dtype=object if dtype is pl.String else None)
    return nodes[name].cast(dtype).fill_null(default).to_numpy()


def _age_days(nodes: pl.DataFrame, name: str, now: dt.datetime) -> np.ndarray:
    """Days from ``nodes[name]`` to ``now`` (NaN where missing), never negative."""
    if name not in nodes.columns:
        return np.full(nodes.height, np.nan)
    us = nodes[name].dt.epoch("us").cast(pl.Float64).to_numpy()
    return np.maximum((_utc(now).timestamp() * 1e6 - us) / DAY_US, 0.0)


def _live_edges(edges: pl.DataFrame, now: dt.datetime) -> pl.DataFrame:
    """Non-inhibitory edges whose validity window (if any) contains ``now``."""
    from pipeline.stages.graph import in_window

    e = edges.filter(~pl.col("inhibit").fill_null(False)) if "inhibit" in edges.columns else edges
    return in_window(e, now)


def memory_score(nodes: pl.DataFrame, now: dt.datetime) -> np.ndarray:
    """OKS Memory Curve on OKS's 0–1 importance: the contract's 0–10 ``importance`` / 10
    (a 0–1 input was scaled once at ingest, ``schema.importance_to_10``); missing = 5, OKS's 0.5.
    A missing ``status`` counts as active (OKS front-matter default)."""
    imp = _col(nodes, "importance", pl.Float64, 5.0) / 10.0
    days = np.floor(np.nan_to_num(_age_days(nodes, "created_at", now), nan=0.0))
    lam = (
        nodes["type"]
        .cast(pl.String)
        .replace_strict(DECAY_LAMBDA, default=OTHER_LAMBDA, return_dtype=pl.Float64)
        .to_numpy()
        if "type" in nodes.columns
        else np.full(nodes.height, OTHER_LAMBDA)
    )
    hits = _col(nodes, "access_count", pl.Int64, 0).astype(np.float64)
    score = (
        imp * np.exp(-lam * days)
        + 0.5 * np.log1p(hits)
        + PIN_BONUS * _col(nodes, "pinned", pl.Boolean, False)
    )
    status = _col(nodes, "status", pl.String, "active")
    score = np.where(status == "active", score * 1.2, score)
    return np.where(_col(nodes, "archived", pl.Boolean, False) | (status == "dropped"), 0.0, score)


def tier(score: np.ndarray) -> np.ndarray:
    """hot ≥ 0.7, warm ≥ 0.4, cold ≥ 0.15, else evictable."""
    out = np.full(len(score), "evictable", dtype=object)
    for thr, name in reversed(TIERS):
        out[score >= thr] = name
    return out


def _stored_communities(nodes: pl.DataFrame) -> np.ndarray:
    """A store's community ids (``community_id``) as numbers: the rank of the id among the sorted
    ids, NaN where the node has none (its factor is 1)."""
    ids = nodes["community_id"].cast(pl.String)
    codes = {c: i for i, c in enumerate(sorted(ids.drop_nulls().unique().to_list()))}
    return np.array([np.nan if c is None else codes[c] for c in ids.to_list()], dtype=np.float64)


def compute(
    nodes: pl.DataFrame, edges: pl.DataFrame, now: dt.datetime, params: SignalsParams
) -> pl.DataFrame:
    """One row per node (row i of ``nodes`` is node index i in ``edges``).

    ReMe's ``hits_30d`` is the node column of that name when present (an access log's 30-day count,
    ``pipeline.run.feedback``), else ``access_count`` (the node table only carries a lifetime total).
    A store's own signals (``data=reme``: node columns ``community_id``, ``archived_store``) replace
    the computed Leiden communities and recency archive, nulls included (no boost / no filter).
    """
    n, e = nodes.height, _live_edges(edges, now)
    src, dst = e["src"].to_numpy().astype(np.int64), e["dst"].to_numpy().astype(np.int64)
    w = (
        e["weight"].cast(pl.Float64).fill_null(1.0).to_numpy()
        if "weight" in e.columns
        else np.ones(len(src))
    )
    inbound = np.bincount(dst, minlength=n).astype(np.int64)
    pr = graphalgo.pagerank(src, dst, w, n, device=params.device)
    age = _age_days(nodes, "updated_at", now)
    if "created_at" in nodes.columns:
        age = np.where(np.isnan(age), _age_days(nodes, "created_at", now), age)
    hits = _col(
        nodes, "hits_30d" if "hits_30d" in nodes.columns else "access_count", pl.Int64, 0
    ).astype(np.float64)
    rec = np.exp(-age / RECENCY_DAYS) * (1 + np.log1p(hits)) * (1 + np.log1p(inbound) / 10)
    score = memory_score(nodes, now)
    return pl.DataFrame(
        {
            "node_id": nodes["node_id"],
            "in_degree": inbound,
            "inbound": inbound,
            "pagerank": pr,
            "community": _stored_communities(nodes)
            if "community_id" in nodes.columns
            else graphalgo.leiden(
                src, dst, n, resolution=params.resolution, seed=params.seed, device=params.device
            ),
            "recency": rec,
            "archived_signal": rec < ARCHIVE_BELOW,
            "memory_score": score,
            "tier": pl.Series(tier(score), dtype=pl.String),
        },
        nan_to_null=True,
    ).with_columns(
        nodes["archived_store"].alias("archived_signal")
        if "archived_store" in nodes.columns
        else pl.when(pl.col("recency").is_null())
        .then(None)
        .otherwise(pl.col("archived_signal"))
        .alias("archived_signal"),
        version=pl.lit(SIGNALS_VERSION, pl.Int32),
        computed_at=pl.lit(_utc(now), pl.Datetime("us", "UTC")),
    )


def write(table: pl.DataFrame, path: str | Path) -> None:
    """Atomic Parquet write (temp file + rename)."""
    write_parquet(path, table)


def load(
    path: str | Path,
    now: dt.datetime,
    max_age_days: float = 14.0,
    expect_version: int = SIGNALS_VERSION,
) -> tuple[pl.DataFrame | None, dict]:
    """(table, freshness). A missing, stale or other-version file gives ``None`` and a warning."""
    fresh = {"status": "missing", "computed_at": None, "age_days": None}
    if not Path(path).is_file():
        log.warning(
            "signals file %s is missing; signal factors are 1 and nothing is filtered", path
        )
        return None, fresh
    table = pl.read_parquet(path)
    if "computed_at" in table.columns and table.height:
        fresh["computed_at"] = table["computed_at"][0]
        fresh["age_days"] = (_utc(now) - _utc(fresh["computed_at"])).total_seconds() / 86_400
    version = table["version"][0] if "version" in table.columns and table.height else None
    if version != expect_version:
        fresh["status"] = "version_mismatch"
        log.warning(
            "signals file %s has version %s, expected %s; ignoring it",
            path,
            version,
            expect_version,
        )
        return None, fresh
    if fresh["age_days"] is None or fresh["age_days"] > max_age_days:
        fresh["status"] = "stale"
        log.warning(
            "signals file %s is stale (computed %s, older than %s days); ignoring it",
            path,
            fresh["computed_at"],
            max_age_days,
        )
        return None, fresh
    fresh["status"] = "fresh"
    return table, fresh


def resolve(
    nodes: pl.DataFrame, edges: pl.DataFrame, now: dt.datetime, params: SignalsParams
) -> tuple[pl.DataFrame | None, dict]:
    """The run's signals: ``None`` if disabled, computed in-run if ``path`` is None, else ``load``ed."""
    if not params.enabled:
        return None, {"status": "disabled", "computed_at": None, "age_days": None}
    if params.path is None:
        return compute(nodes, edges, now, params), {
            "status": "fresh",
            "computed_at": _utc(now),
            "age_days": 0.0,
        }
    return load(params.path, now, params.max_age_days)


def _f64(x) -> np.ndarray:
    return (
        x.cast(pl.Float64).to_numpy()
        if isinstance(x, pl.Series)
        else np.asarray(x, dtype=np.float64)
    )


def inbound_factor(inbound) -> np.ndarray:
    """ReMe: 1 + 0.15·ln(1 + inbound); 1 where missing (NaN/None)."""
    x = _f64(inbound)
    return np.where(np.isnan(x), 1.0, 1.0 + 0.15 * np.log1p(np.where(np.isnan(x), 0.0, x)))


def same_community(candidate_comm, seed_comms) -> np.ndarray:
    """ReMe: 1.2 where the candidate's community is one of the seed paths' communities, else 1.0."""
    c, s = _f64(candidate_comm), _f64(list(seed_comms))
    return np.where(np.isin(c, s[~np.isnan(s)]), 1.2, 1.0)


def recency_decay(age_days) -> np.ndarray:
    """ReMe: exp(−Δt / 60 d) with Δt in days (negative Δt counts as 0); 1 where missing."""
    x = _f64(age_days)
    return np.where(np.isnan(x), 1.0, np.exp(-np.maximum(np.nan_to_num(x), 0.0) / RECENCY_DAYS))


OVERLAY = ("access_count", "importance", "hits_30d")  # node columns a feedback table overrides


def overlay(nodes: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """Nodes with ``OVERLAY`` columns taken from the feedback table where it has a value."""
    cols = [c for c in OVERLAY if c in table.columns]
    if not cols:
        return nodes
    j = nodes.join(
        table.select("node_id", *[pl.col(c).alias(f"{c}__fb") for c in cols]),
        on="node_id",
        how="left",
        maintain_order="left",
    )
    return j.with_columns(
        [
            pl.coalesce(f"{c}__fb", c).alias(c)
            if c in nodes.columns
            else pl.col(f"{c}__fb").alias(c)
            for c in cols
        ]
    ).drop([f"{c}__fb" for c in cols])


def for_group(nodes: pl.DataFrame, edges: pl.DataFrame, now: dt.datetime, params) -> tuple:
    """:func:`resolve` on the nodes and edges one query group sees. A loaded table
    (``signals.path``, fresh at ``now``) gives per-node state only: its access columns are overlaid
    on the nodes and every signal is recomputed on them with this group's graph, so PageRank,
    communities and degrees never count nodes or edges the group cannot see (sealed scopes).
    Returns (nodes, table, freshness)."""
    table, fresh = resolve(nodes, edges, now, params)
    if table is None or params.path is None:
        return nodes, table, fresh
    table = table.filter(pl.col("node_id").is_in(nodes["node_id"].implode()))
    nodes = overlay(nodes, table)
    keep = [
        c for c in ("last_access_at", "access_days", "hits_30d", "revision") if c in table.columns
    ]
    fresh_table = compute(nodes, edges, now, params)
    out = fresh_table.join(
        table.select("node_id", *keep), on="node_id", how="left", maintain_order="left"
    )
    return (
        nodes,
        out,
        {
            **fresh,
            **(
                {"revision": int(table["revision"].max())}
                if "revision" in table.columns and table.height
                else {}
            ),
        },
    )


def run_stage(ctx, p: SignalsParams) -> object:
    """Per-node signals of the group at its reference time (memoised per node table); the table
    carries ``group_key`` (see :func:`merge_groups`) and score/select read the overlaid nodes."""
    from pipeline.core.memo import corpus_step

    ctx.scored_nodes, table, ctx.freshness = corpus_step(
        ctx.run.memo,
        f"signals@{ctx.now.isoformat()}",
        ctx.nodes,
        lambda: for_group(ctx.nodes, ctx.graph, ctx.now, p),
    )
    ctx.signals = (
        None if table is None else table.with_columns(group_key=pl.lit(ctx.key, pl.String))
    )
    return ctx


def merge_groups(parts: list) -> pl.DataFrame | None:
    """One signals row per node: a node several groups see keeps the row of the group whose
    ``group_key`` (scope, viewer, reference time) sorts first, whichever way the queries were run."""
    frames = [p for p in parts if p is not None and p.height]
    if not frames:
        return None
    return (
        pl.concat(frames, how="diagonal_relaxed")
        .sort("node_id", "group_key")
        .unique("node_id", keep="first", maintain_order=True)
    )


STAGE = Stage(
    "signals",
    run_stage,
    enabled=lambda cfg: bool(cfg.signals.enabled),
    params=lambda run: SignalsParams.from_cfg(run.cfg.signals, "signals", device=run.device),
)
