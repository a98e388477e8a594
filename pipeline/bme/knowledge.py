"""ST-BME's knowledge gate (``graph/knowledge-state.js::computeKnowledgeGateForNode`` @ 590da3b) for
(query, node) rows, and the weights ``retriever.js::retrieve`` takes from it.

Per active owner key of the query (deduplicated), from the node's ``knowledge`` entry for that owner
(``pipeline.adapters.bme_nodes.knowledge``):

- no entry (the owner has no state, or there is no owner): visible, visibility 0;
- manual-hidden, or objective and mistaken: invisible (visibility 0, not anchored);
- anchored (known) → visibility ≥ 1; else the stored visibility score;
- rescued (objective, not anchored, not mistaken, and vector ≥ 0.82 or lexical ≥ 0.85 or graph
  ≥ 1.1 or, in the current region, vector ≥ 0.48 or graph ≥ 0.82) → visibility ≥ 0.68;
- visible if anchored, rescued or visibility ≥ threshold (POV 0.18, current region 0.34, adjacent
  0.42, global 0.56 — 0 with ``low_confidence`` —, else 0.4).

Over owners: visible if any owner sees it; anchored / rescued if a seeing owner does; visibility =
the best over all owners; coverage = seeing owners / owners (1 with at most one owner, if visible).
Weights: ``knowledge`` = 1.18 anchored, 0.92 rescued, else max(0.35, 0.55 + 0.6 × visibility);
``coverage`` = 1 + 0.08 × max(0, coverage − 1 / max(1, owners)).
"""

from __future__ import annotations

import polars as pl

THRESHOLDS = {
    "objectiveCurrentRegion": 0.34,
    "objectiveAdjacentRegion": 0.42,
    "objectiveGlobal": 0.56,
}


def _per_owner(x: pl.DataFrame, low_confidence: bool) -> pl.DataFrame:
    """One row per (row ``_r``, active owner): the single-owner gate."""
    owners = (
        x.select("_r", owner=pl.col("active_owner_keys").list.eval(pl.element().str.strip_chars()))
        .explode("owner")
        .filter(pl.col("owner").is_not_null() & (pl.col("owner") != ""))
        .unique(["_r", "owner"], maintain_order=True)
    )
    ent = x.select("_r", k="knowledge").explode("k").filter(pl.col("k").is_not_null()).unnest("k")
    per = owners.join(ent, on=["_r", "owner"], how="left").join(
        x.select("_r", "pov", "bucket", "vector", "graph", "lexical"), on="_r"
    )
    state, pov = pl.col("known").is_not_null(), pl.col("pov")
    hard = state & (pl.col("hidden") | (~pov & pl.col("mistaken")))
    anchored = state & ~hard & pl.col("known")
    v, g, lx = pl.col("vector"), pl.col("graph"), pl.col("lexical")
    current = pl.col("bucket") == "objectiveCurrentRegion"
    strong = (v >= 0.82) | (lx >= 0.85) | (g >= 1.1) | (current & ((v >= 0.48) | (g >= 0.82)))
    rescued = state & ~hard & ~anchored & ~pov & ~pl.col("mistaken") & strong
    base = (
        pl.when(anchored).then(pl.max_horizontal(pl.col("score"), 1.0)).otherwise(pl.col("score"))
    )
    score = (
        pl.when(~state | hard)
        .then(0.0)
        .when(rescued)
        .then(pl.max_horizontal(base, 0.68))
        .otherwise(base)
    )
    glob = 0.0 if low_confidence else THRESHOLDS["objectiveGlobal"]
    th = (
        pl.when(pov).then(0.18)
        .when(current).then(0.34)
        .when(pl.col("bucket") == "objectiveAdjacentRegion").then(0.42)
        .when(pl.col("bucket") == "objectiveGlobal").then(glob)
        .otherwise(0.4)
    )  # fmt: skip
    return per.with_columns(
        vis=score,
        anchored=anchored,
        rescued=rescued,
        visible=~state | (~hard & (anchored | rescued | (score >= th))),
    )


def gate(x: pl.DataFrame, low_confidence: bool = False) -> pl.DataFrame:
    """``x`` (``knowledge``, ``active_owner_keys``, ``pov`` bool, ``bucket`` name, ``vector``,
    ``graph``, ``lexical``; one row per (query, node)) → ``visible``, ``bme_knowledge``,
    ``bme_owner_coverage``, ``knowledge_anchored``, ``knowledge_rescued``, in row order."""
    x = x.with_row_index("_r")
    per = _per_owner(x, low_confidence)
    agg = per.group_by("_r").agg(
        n=pl.len(),
        seen=pl.col("visible").sum(),
        anchored=(pl.col("anchored") & pl.col("visible")).any(),
        rescued=(pl.col("rescued") & pl.col("visible")).any(),
        vis=pl.col("vis").max(),
    )
    out = x.select("_r").join(agg, on="_r", how="left", maintain_order="left")
    n = pl.col("n").fill_null(0)
    visible = pl.when(n == 0).then(True).otherwise(pl.col("seen") > 0)
    cover = pl.when(n <= 1).then(visible.cast(pl.Float64)).otherwise(pl.col("seen") / n)
    anchored, rescued = pl.col("anchored").fill_null(False), pl.col("rescued").fill_null(False)
    weight = (
        pl.when(anchored).then(1.18)
        .when(rescued).then(0.92)
        .otherwise(pl.max_horizontal(pl.lit(0.35), 0.55 + 0.6 * pl.col("vis").fill_null(0.0)))
    )  # fmt: skip
    coverage = 1.0 + 0.08 * pl.max_horizontal(pl.lit(0.0), cover - 1.0 / pl.max_horizontal(n, 1))
    return out.select(
        visible=visible,
        bme_knowledge=weight,
        bme_owner_coverage=coverage,
        knowledge_anchored=anchored,
        knowledge_rescued=rescued,
    )
