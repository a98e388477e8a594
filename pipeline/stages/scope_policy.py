"""Scope policies: per (query, candidate) weights and sort priorities applied before the final score.

``bme`` (BME's ``classifyNodeScopeBucket`` and ``classifyStoryTemporalBucket``; docs/presets.md,
``bme``: Scope policy), vectorised over all candidate rows:

- scope bucket from node ``scope_layer`` (objective | pov), ``scope_owner_type`` (character | user),
  ``scope_owner``, ``scope_region``, ``scope_regions`` and query ``active_owners``,
  ``active_user_owners``, ``active_region``, ``adjacent_regions`` → factor ``bme_scope``;
- story-time bucket from node ``story_time`` (segment order; span start), ``story_time_end`` (span
  end), ``story_tense`` (future | hypothetical | flashback | …), query ``story_segment`` and cue
  words in the query text + context → factor ``bme_story_time``; future nodes are dropped unless a
  future cue is present (with ``soft_directing``);
- with ``sort``: ``scope_priority`` and ``story_priority`` columns that select sorts by before score.

A part whose node column (``scope_layer`` / ``story_time``) is missing is skipped with a warning.
Policies are registered in ``POLICIES``; the runner multiplies the returned factor columns in.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import polars as pl

from pipeline.contract.errors import require_one_of
from pipeline.contract.schema import KNOWLEDGE_TYPE, SCENE_QUERY_COLUMNS, SCOPE_NODE_COLUMNS
from pipeline.core.stage import Params

log = logging.getLogger(__name__)
# index = priority in BME's lexicographic sort (higher first)
SCOPE_BUCKETS = (
    "otherPov",
    "objectiveGlobal",
    "objectiveAdjacentRegion",
    "objectiveCurrentRegion",
    "userPov",
    "characterPov",
)
STORY_BUCKETS = ("future", "distantPast", "flashback", "undated", "adjacentPast", "current")
NODE_COLS = SCOPE_NODE_COLUMNS  # the node columns the policy reads (pipeline.contract.schema)
QUERY_COLS = SCENE_QUERY_COLUMNS  # the query columns (the scene state)


@dataclass(frozen=True)
class ScopeParams(Params):
    """Scope policy settings: bucket weights, cue words and sorting."""

    GROUP: ClassVar[str] = "scope_policy"
    OPTION: ClassVar[str] = "none"  # what Params.defaults() loads
    policy: str  # none | bme
    sort: bool  # BME lexicographic sort: scope priority, story priority, then score
    soft_directing: bool  # BME storyTimeSoftDirecting: story weights + future suppression
    scope_weights: dict  # BME scope-bucket weights
    flashback_cues: list  # query cues that lift past story time
    future_cues: list  # query cues that admit future story time


@dataclass
class Applied:
    """A policy's result: the candidates with its columns, the factor columns and the sort-priority columns."""

    cand: pl.DataFrame
    factors: list[str] = field(default_factory=list)  # columns multiplied into the score
    sort_by: list[str] = field(default_factory=list)  # priority columns sorted (desc) before score


def cue_pattern(cues: list[str]) -> str:
    """Case-insensitive alternation; ASCII cues match whole words, others anywhere."""
    parts = [rf"\b{re.escape(c)}\b" if c.isascii() else re.escape(c) for c in cues if c]
    return "(?i)(" + "|".join(parts) + ")" if parts else "$^"


def gather(frame: pl.DataFrame, idx: pl.Series, cols: dict) -> pl.DataFrame:
    """Rows ``idx`` of ``frame`` restricted to ``cols``, cast to their types; a missing column is all null."""
    have = frame.with_columns(
        [pl.lit(None, dtype=t).alias(c) for c, t in cols.items() if c not in frame.columns]
    )
    have = have.select([pl.col(c).cast(t) for c, t in cols.items()])
    return have[idx.to_numpy()]


def _key(e: pl.Expr) -> pl.Expr:
    return e.str.strip_chars().str.to_lowercase()


def _keys(e: pl.Expr) -> pl.Expr:
    return e.list.eval(pl.element().str.strip_chars().str.to_lowercase()).fill_null(
        pl.lit([], pl.List(pl.String))
    )


def scope_bucket() -> pl.Expr:
    """Bucket priority (index into SCOPE_BUCKETS) from the gathered node/query columns."""
    otype, owner = _key(pl.col("scope_owner_type")).fill_null(""), _key(pl.col("scope_owner"))
    chars, users = _keys(pl.col("active_owners")), _keys(pl.col("active_user_owners"))
    region, active = _key(pl.col("scope_region")), _key(pl.col("active_region")).fill_null("")
    adj, tokens = _keys(pl.col("adjacent_regions")), _keys(pl.col("scope_regions"))
    p = {b: i for i, b in enumerate(SCOPE_BUCKETS)}
    pov = (
        pl.when((otype == "character") & chars.list.contains(owner).fill_null(False))
        .then(p["characterPov"])
        .when((otype == "user") & users.list.contains(owner).fill_null(False))
        .then(p["userPov"])
        .when((otype == "character") & (chars.list.len() == 0))
        .then(p["characterPov"])
        .when((otype == "user") & (users.list.len() == 0))
        .then(p["userPov"])
        .otherwise(p["otherPov"])
    )
    objective = (
        pl.when(active == "")
        .then(p["objectiveGlobal"])
        .when(region == active)
        .then(p["objectiveCurrentRegion"])
        .when(adj.list.contains(region).fill_null(False))
        .then(p["objectiveAdjacentRegion"])
        .when(tokens.list.contains(active) | (tokens.list.set_intersection(adj).list.len() > 0))
        .then(p["objectiveAdjacentRegion"])
        .otherwise(p["objectiveGlobal"])
    )
    return (
        pl.when(_key(pl.col("scope_layer")) == "pov").then(pov).otherwise(objective).cast(pl.Int8)
    )


def story_bucket() -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(priority, weight, suppressed) from story_time/_end/_tense, story_segment and the cue mode."""
    p = {b: i for i, b in enumerate(STORY_BUCKETS)}
    tense, active, cue = (
        _key(pl.col("story_tense")).fill_null(""),
        pl.col("story_segment"),
        pl.col("cue"),
    )
    start = pl.coalesce("story_time", "story_time_end")
    end = pl.coalesce("story_time_end", "story_time")
    dated = (
        pl.col("story_time").is_not_null() | pl.col("story_time_end").is_not_null() | (tense != "")
    )
    fut_cue, back_cue = cue == "future", cue == "flashback"
    rules = [  # (condition, bucket, weight, suppressed), first match wins (BME's order)
        (~dated, "undated", 0.88, False),
        (
            tense.is_in(["future", "hypothetical"]),
            "future",
            pl.when(fut_cue).then(0.72).otherwise(0.2),
            ~fut_cue,
        ),
        (active.is_null(), "undated", 0.92, False),
        (start.is_null(), "undated", 0.9, False),
        ((active >= start) & (active <= end), "current", 1.15, False),
        (
            (end < active) & ((tense == "flashback") | back_cue),
            "flashback",
            pl.when(back_cue).then(1.02).otherwise(0.72),
            False,
        ),
        ((end < active) & (active - end <= 2), "adjacentPast", 1.0, False),
        (end < active, "distantPast", 0.64, False),
        (start > active, "future", pl.when(fut_cue).then(0.74).otherwise(0.22), ~fut_cue),
    ]
    prio, weight, supp = pl.lit(p["undated"]), pl.lit(0.9), pl.lit(False)  # temporal-unknown
    for cond, bucket, w, s in reversed(rules):
        prio = pl.when(cond).then(p[bucket]).otherwise(prio)
        weight = pl.when(cond).then(w).otherwise(weight)
        supp = pl.when(cond).then(s).otherwise(supp)
    return prio.cast(pl.Int8), weight.cast(pl.Float64), supp


def cue_mode(queries: pl.DataFrame, p: ScopeParams) -> pl.Series:
    """Per query: "flashback" if a flashback cue appears in its text + context, else "future" if a
    future cue does, else ""."""
    text = queries["text"].fill_null("")
    if "context" in queries.columns:
        text = pl.concat_str(
            [text, queries["context"].list.join("\n").fill_null("")], separator="\n"
        )
    back, fut = (
        text.str.contains(cue_pattern(p.flashback_cues)),
        text.str.contains(cue_pattern(p.future_cues)),
    )
    return pl.select(
        pl.when(back)
        .then(pl.lit("flashback"))
        .when(fut)
        .then(pl.lit("future"))
        .otherwise(pl.lit(""))
        .alias("cue")
    ).to_series()


FACTOR_COLS = ("bme_scope", "bme_story_time", "bme_knowledge", "bme_owner_coverage")


def knowledge_columns(cand: pl.DataFrame, x: pl.DataFrame, prio: pl.Series | None) -> dict:
    """BME's knowledge gate (``pipeline.bme.knowledge``) per candidate: ``_visible`` (rows to keep),
    the factors ``bme_knowledge`` and ``bme_owner_coverage``, and ``bme_lexical`` (the gate's
    lexical input, reused by the score term)."""
    from pipeline.bme import knowledge, lexcover
    from pipeline.stages.query import lexical_sources

    has_text = {"query_text", "title", "description", "text", "status"} <= set(cand.columns)
    lex = lexcover.column(cand, lexical_sources) if has_text else pl.Series([0.0] * cand.height)
    vec = (
        cand["dense"].fill_null(0.0) if "dense" in cand.columns else pl.Series([0.0] * cand.height)
    )
    if "dense_rank" in cand.columns:
        vec = pl.select(
            pl.when(cand["dense_rank"].is_not_null()).then(vec).otherwise(0.0)
        ).to_series()
    graph = (
        cand["graph"].fill_null(0.0) if "graph" in cand.columns else pl.Series([0.0] * cand.height)
    )
    names = pl.Series(SCOPE_BUCKETS)[prio.cast(pl.Int64).to_numpy()] if prio is not None else None
    g = knowledge.gate(
        pl.DataFrame(
            {
                "knowledge": x["knowledge"],
                "active_owner_keys": x["active_owner_keys"],
                "pov": (x["scope_layer"].fill_null("").str.to_lowercase() == "pov"),
                "bucket": names if names is not None else pl.Series(["objectiveGlobal"] * x.height),
                "vector": vec.cast(pl.Float64),
                "graph": graph.cast(pl.Float64),
                "lexical": lex,
            }
        )
    )
    cols = {
        c: g[c]
        for c in ("bme_knowledge", "bme_owner_coverage", "knowledge_anchored", "knowledge_rescued")
    }
    return {"_visible": g["visible"], "bme_lexical": lex, **cols}


def bme(cand: pl.DataFrame, nodes: pl.DataFrame, queries: pl.DataFrame, p: ScopeParams) -> Applied:
    """BME's scope and story-time buckets for every candidate: factor columns and, with ``sort``, priorities."""
    parts = {"scope": "scope_layer" in nodes.columns, "story": "story_time" in nodes.columns}
    parts["scope"] |= "knowledge" in nodes.columns  # the knowledge gate needs the scope bucket
    for part, ok in parts.items():
        if not ok:
            log.warning(
                "scope_policy.policy=bme: nodes have no %s column; the %s weights are skipped (factor 1)",
                "scope_layer" if part == "scope" else "story_time",
                part,
            )
    out = Applied(cand)
    if not any(parts.values()) or cand.height == 0:
        return out
    q = queries.with_columns(cue=cue_mode(queries, p))
    x = pl.concat(
        [
            gather(nodes, cand["node_idx"], {**NODE_COLS, "knowledge": KNOWLEDGE_TYPE}),
            gather(q, cand["query_idx"], {**QUERY_COLS, "cue": pl.String}),
        ],
        how="horizontal",
    )
    cols, keep = {}, pl.lit(True)
    if parts["scope"]:
        prio = x.select(scope_bucket()).to_series()
        w = [p.scope_weights[b] for b in SCOPE_BUCKETS]
        cols["bme_scope"] = prio.replace_strict(list(range(len(w))), w, return_dtype=pl.Float64)
        cols["scope_priority"] = prio
    if parts["story"]:
        prio, weight, supp = story_bucket()
        s = x.select(prio.alias("p"), weight.alias("w"), supp.alias("s"))
        cols["bme_story_time"] = s["w"] if p.soft_directing else pl.Series([1.0] * x.height)
        cols["story_priority"] = s["p"]
        keep = ~s["s"] if p.soft_directing else keep
    if "knowledge" in nodes.columns:
        cols.update(knowledge_columns(cand, x, cols.get("scope_priority")))
        keep = keep & cols.pop("_visible")
    prios = [c for c in ("scope_priority", "story_priority") if c in cols]
    out.cand = cand.with_columns(
        **{c: v for c, v in cols.items() if p.sort or c not in prios}
    ).filter(keep)
    out.factors = [c for c in FACTOR_COLS if c in cols]
    out.sort_by = prios if p.sort else []
    return out


POLICIES: dict[str, Callable[..., Applied]] = {
    "none": lambda cand, nodes, queries, p: Applied(cand),
    "bme": bme,
}


def apply(
    cand: pl.DataFrame, nodes: pl.DataFrame, queries: pl.DataFrame, p: ScopeParams
) -> Applied:
    """Run the configured policy; the runner multiplies ``factors`` into the score and sorts by ``sort_by``."""
    require_one_of("scope_policy.policy", p.policy, POLICIES)
    return POLICIES[p.policy](cand, nodes, queries, p)
