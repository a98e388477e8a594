"""BME's co-occurrence boost on the graph score (docs/presets.md, ``bme``), batched over all queries.

Our data has no extraction ``batchJournal``: a *batch* is a run of at most ``max_per_batch``
eligible nodes of one ``doc_id`` (a session), consecutive in ``seq`` order (node_id order without
``seq``); nodes without a ``doc_id`` co-occur with nothing. The index is built once per run.
Anchors per query: exact-name anchors (their anchor energy, 2.0) and the first ``supplemental``
eligible dense hits (cosine > 0) that are not exact anchors (weight = the dense score). Every
anchor adds ``weight · ln(1 + count) · scale`` to the graph score of its first ``max_neighbors``
neighbours; nodes not yet candidates enter with dense 0 and fused 0. Only nodes the query may see
are boosted. The bonus is also kept as the ``cooccur`` column.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from pipeline.bme.eligible import eligible
from pipeline.core.stage import Params, Stage
from pipeline.ops import cooccur
from pipeline.ops.scope import scope_groups

log = logging.getLogger(__name__)
SCHEMA = {"query_idx": pl.Int64, "node_idx": pl.Int64, "cooccur": pl.Float64}


@dataclass(frozen=True)
class CooccurParams(Params):
    """Co-occurrence boost settings: anchors, neighbours and the boost scale."""

    GROUP: ClassVar[str] = "cooccur"
    OPTION: ClassVar[str] = "default"  # what Params.defaults() loads
    enabled: bool
    scale: float
    max_neighbors: int
    max_per_batch: int
    supplemental: int  # first eligible dense hits (cosine > 0) used as extra anchors
    require_title: bool  # BME: indexed / supplemental anchor nodes need a name/title
    exclude_types: list
    include_archived: bool = field(default=False, metadata={"runtime": True})  # the run's rule
    anchors: Any = field(default=None, metadata={"runtime": True})  # anchors.AnchorParams


def anchor_weights(
    cand: pl.DataFrame, exact: pl.DataFrame | None, ok: np.ndarray, supplemental: int
) -> pl.DataFrame:
    """(query_idx, node_idx, weight): exact anchors, then the first eligible dense hits."""
    parts = (
        []
        if exact is None
        else [exact.select("query_idx", "node_idx", weight=pl.col("energy").cast(pl.Float64))]
    )
    if supplemental > 0 and "dense_rank" in cand.columns and cand.height:
        hits = cand.filter(
            pl.col("dense_rank").is_not_null()
            & (pl.col("dense") > 0)  # BME keeps cosine > 0
            & pl.Series(ok[cand["node_idx"].to_numpy()])
        )
        if parts:
            hits = hits.join(parts[0], on=["query_idx", "node_idx"], how="anti")
        parts.append(
            hits.sort(["query_idx", "dense_rank", "node_idx"])
            .group_by("query_idx", maintain_order=True)
            .head(supplemental)
            .select("query_idx", "node_idx", weight=pl.col("dense").cast(pl.Float64))
        )
    if not parts:
        return pl.DataFrame(
            schema={"query_idx": pl.Int64, "node_idx": pl.Int64, "weight": pl.Float64}
        )
    return (
        pl.concat(parts)
        .group_by("query_idx", "node_idx")
        .agg(pl.col("weight").max())
        .sort("query_idx", "node_idx")
    )


def boost(
    cand: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    exact: pl.DataFrame | None,
    p: CooccurParams,
    include_archived: bool = False,
) -> pl.DataFrame:
    """(query_idx, node_idx, cooccur) bonus for every boosted node the query may see."""
    if "doc_id" not in nodes.columns:
        log.warning(
            "cooccur: nodes have no doc_id column, so no co-occurrence batches; boost skipped"
        )
        return pl.DataFrame(schema=SCHEMA)
    ok = eligible(nodes, p.require_title, p.exclude_types)
    docs = nodes["doc_id"].rank("dense").fill_null(0).to_numpy().astype(np.int64)
    ok &= docs > 0
    order = (
        nodes["seq"].fill_null(0).to_numpy() if "seq" in nodes.columns else np.arange(nodes.height)
    )
    nbr = cooccur.neighbours(cooccur.index(docs, order, ok, p.max_per_batch), p.max_neighbors)
    aw = anchor_weights(cand, exact, ok, p.supplemental)
    if aw.height == 0 or nbr.nnz == 0:
        return pl.DataFrame(schema=SCHEMA)
    b = cooccur.boost(
        aw["query_idx"].to_numpy(),
        aw["node_idx"].to_numpy(),
        aw["weight"].to_numpy(),
        nbr,
        queries.height,
        p.scale,
    )
    out = pl.DataFrame(
        {"query_idx": b.row.astype(np.int64), "node_idx": b.col.astype(np.int64), "cooccur": b.data}
    )
    keep = [
        out.filter(pl.col("query_idx").is_in(qs.tolist()) & pl.col("node_idx").is_in(vis.tolist()))
        for _key, vis, qs in scope_groups(nodes, queries, include_archived)
    ]
    return pl.concat(keep).filter(pl.col("cooccur") > 0).sort("query_idx", "node_idx").cast(SCHEMA)


def merge(cand: pl.DataFrame, bonus: pl.DataFrame) -> pl.DataFrame:
    """Adds the bonus to ``graph`` (creating it at 0 where absent); new nodes get dense 0, fused 0."""
    if "graph" not in cand.columns:
        cand = cand.with_columns(graph=pl.lit(0.0, dtype=pl.Float32))
    out = cand.join(bonus, on=["query_idx", "node_idx"], how="full", coalesce=True)
    fill = {c: pl.col(c).fill_null(0.0) for c in ("dense", "fused", "cooccur") if c in out.columns}
    out = out.with_columns(**fill).with_columns(
        graph=(pl.col("graph").fill_null(0.0) + pl.col("cooccur")).cast(cand.schema["graph"])
    )
    return out.sort("query_idx", "node_idx")


def run_stage(ctx, p: CooccurParams) -> object:
    """BME co-occurrence boost from the exact-name anchors (found here when diffusion did not)."""
    from pipeline.stages import anchors

    if ctx.anchors is None and p.anchors is not None and p.anchors.enabled:
        ctx.anchors = anchors.of_group(ctx, p.anchors)
    bonus = boost(ctx.cand, ctx.nodes, ctx.queries, ctx.anchors, p, p.include_archived)
    ctx.cand = merge(ctx.cand, bonus)
    ctx.run.log.add("cooccur_boosts", bonus.height)
    return ctx


def _params(run) -> CooccurParams:
    """The ``cooccur`` group, with the ``anchors`` settings (anchors are found here when diffusion
    did not find them) and the run's ``include_archived``."""
    from pipeline.stages import anchors

    return CooccurParams.from_cfg(
        run.cfg.cooccur,
        "cooccur",
        include_archived=bool(run.cfg.include_archived),
        anchors=anchors.params_of(run.cfg)[0],
    )


STAGE = Stage("cooccur", run_stage, enabled=lambda cfg: bool(cfg.cooccur.enabled), params=_params)
