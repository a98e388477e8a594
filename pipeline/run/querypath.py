"""The local query path: one function, :func:`recall_queries`, that ``runner.run``, the recall cache
(``recall precompute``) and every Ray worker call directly.

Embeddings are computed once per run (``stages.embed.embed_run``). Then, for each query group
(``ops.scope.run_groups``: the queries that see the same nodes — ``doc_scope`` ∩ ``visibility`` ∩
not archived — at the same reference time), the stages of :data:`STAGES` run in order on that
group's nodes only, each reading and extending a ``context.RunContext``. A query's result is a
function of its own row, those nodes, the edges among them, the recipe and the code, so every path
gives the same answer. Recall rows come back in query order, whatever the grouping.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from omegaconf import OmegaConf, open_dict

from pipeline.adapters import oks_settings
from pipeline.contract import io
from pipeline.core import backend
from pipeline.core.context import RunContext, RunState
from pipeline.core.memo import memo_scope
from pipeline.core.progress import progress
from pipeline.ops.scope import EdgeIndex, run_groups
from pipeline.run import autopreset, clock, packs
from pipeline.stages import (
    channels,
    cooccur,
    diffuse,
    fuse,
    graph,
    novelty,
    oks_backend,
    score,
    select,
    signals,
)
from pipeline.stages.embed import EmbedParams, embed_run, keyword_channels

# the stages of a query group, in order (docs/architecture.md); each is a pipeline.core.stage.Stage
STAGES = [
    channels.STAGE,
    fuse.STAGE,
    oks_backend.STAGE,
    novelty.STAGE,
    graph.STAGE,
    signals.STAGE,
    diffuse.STAGE,
    cooccur.STAGE,
    score.STAGE,
    select.STAGE,
]


def inserted(stage, after: str) -> list:
    """:data:`STAGES` with ``stage`` right after the stage named ``after``: how a new stage is
    registered (``tests/core/test_toy_stage.py``; a new module of this package edits the list itself)."""
    names = [s.name for s in STAGES]
    at = names.index(after) + 1
    return [*STAGES[:at], stage, *STAGES[at:]]


@dataclass
class Recalled:
    """What the query path computed for a run: recall rows (query order) and the per-run tables."""

    recall: pl.DataFrame
    novelty: pl.DataFrame | None = None
    signals: pl.DataFrame | None = None
    xb: np.ndarray | None = None
    n_embedded: int = 0
    reused: list = field(default_factory=list)
    freshness: dict = field(default_factory=lambda: {"status": "disabled"})
    executor: dict | None = None
    auto: list | None = None  # preset=auto: per-group features and overrides (autopreset.summary)


def run_group(state: RunState, ctx: RunContext, stages: list | None = None) -> RunContext:
    """Every stage after embedding for one group: skip the disabled, time the rest, stop after
    ``state.until``. Parameters are built once per run (``preset=auto``: once per distinct set of
    the group's overrides, ``autopreset.group_state``)."""
    state = autopreset.group_state(state, ctx)
    ctx.run = state
    for stage in STAGES if stages is None else stages:
        if stage.enabled(state.cfg):
            params = state.const(f"params:{stage.name}", lambda: stage.params(state))
            with state.log.stage(stage.name):
                ctx = stage.run(ctx, params)
        if stage.name == state.until:
            break
    return ctx


def slice_group(
    state: RunState,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    key: tuple,
    rows: np.ndarray,
    qs: np.ndarray,
    now: dt.datetime,
) -> RunContext:
    """The group's nodes, queries and embeddings (query parts renumbered to the group's queries)."""
    scope, viewer, _t = key
    ctx = RunContext(
        state,
        nodes[rows],
        queries[qs],
        now,
        f"{list(scope) if scope is not None else None}|{viewer}|{now.isoformat()}",
    )
    return packs.slice_inputs(state, ctx, rows, qs, queries.height)


@dataclass
class GroupOut:
    """What a group's run leaves for the run's outputs (its context, with candidates, graph and
    vectors, is dropped as soon as the group is done)."""

    recall: pl.DataFrame | None
    novelty: pl.DataFrame | None
    signals: pl.DataFrame | None
    reused: list
    freshness: dict

    @classmethod
    def of(cls, ctx: RunContext) -> GroupOut:
        """The outputs of a finished group's context."""
        return cls(ctx.recall, ctx.novelty, ctx.signals, ctx.reused, ctx.freshness)


def run_all_groups(
    state: RunState, nodes: pl.DataFrame, queries: pl.DataFrame, stages: list | None = None
) -> list[GroupOut]:
    """:func:`run_group` for every query group that sees at least one node; small groups run
    together, as the segments of one context (``pipeline.run.packs``), when the config allows it and
    the default stages run. Without a caller's memo,
    the per-node-table steps (graph, hubs, signals) are still shared by the groups that see the same
    nodes at other reference times (``run_groups`` yields them one after another)."""
    own, last, outs = state.memo is None, None, []
    state.memo = {} if own else state.memo
    if state.cfg.diffuse.method != "none" or state.cfg.signals.enabled:
        # each group's explicit edges by lookup, not a scan
        state.edge_index = EdgeIndex(nodes, state.ds.edges)
    now, default = config_now(state.cfg), clock.default_time(state.cfg)
    groups = run_groups(nodes, queries, state.cfg.include_archived, now, default)
    pack = packs.packable(state.cfg, state.ds, state.until) and stages is None
    runs = packs.packs(groups) if pack else [[g] for g in groups]
    for some in progress(runs, "query groups", unit="group"):
        key, rows, qs, now = some[0]
        if own and (len(some) > 1 or last is None or not np.array_equal(last, rows)):
            state.memo.clear()
            last = None if len(some) > 1 else rows
        if len(some) > 1:
            ctx = packs.slice_pack(state, nodes, queries, some)
            outs.append(GroupOut.of(run_group(state, ctx, stages)))
        elif len(rows):
            ctx = slice_group(state, nodes, queries, key, rows, qs, now)
            outs.append(GroupOut.of(run_group(state, ctx, stages)))
    return outs


def config_now(cfg) -> dt.datetime | None:
    """``now=`` from the config (it overrides every query's reference time), or None."""
    if not cfg.get("now"):
        return None
    from pipeline.contract.schema import parse_timestamp

    return parse_timestamp(cfg.now, "config", None, "now")


def no_recall(enabled) -> pl.DataFrame:
    """The recall table when no query can see any node: the contract's columns, no rows."""
    from pipeline.contract.schema import TABLES

    cols = {
        **TABLES["recall"]["required"],
        "channel": pl.String,
        **{c: pl.Float32 for c in enabled},
    }
    return pl.DataFrame(schema=cols)


def in_query_order(frames: list, queries: pl.DataFrame, then: list[str]) -> pl.DataFrame:
    """Per-group frames (with ``query_id``) concatenated, sorted by the queries' order, then ``then``;
    so the bytes do not depend on how queries were grouped."""
    frames = [f for f in frames if f is not None]
    pos = pl.DataFrame(
        {
            "query_id": queries["query_id"].cast(pl.String),
            "_pos": np.arange(queries.height, dtype=np.int64),
        }
    )
    out = (
        pl.concat(frames, how="diagonal_relaxed")
        if frames
        else pl.DataFrame(schema={"query_id": pl.String})
    )
    out = out.join(pos, on="query_id", how="left").sort(["_pos", *then], maintain_order=True)
    return out.drop("_pos")


def keyword_store(cfg, ds):
    """``cfg`` without the dense channel when ``stages.embed.keyword_channels`` drops it (preset
    reme over a store indexed without vectors), else ``cfg`` itself."""
    channels = list(cfg.channels)
    kept = keyword_channels(
        channels, cfg.dense.get("no_query_vector"), ds.notes.get("store_vectors")
    )
    if kept is channels:
        return cfg
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.channels = kept
    return cfg


def scoped_memo(memo: dict | None, cfg, edges: pl.DataFrame | None) -> dict | None:
    """The part of ``memo`` that belongs to this run's config (all of it but ``out_dir`` and
    ``report``), ``edges`` and the ``signals.path`` table (``memo.memo_scope``); None stays None."""
    if memo is None:
        return None
    conf = OmegaConf.to_container(cfg, resolve=True)
    conf = {k: v for k, v in conf.items() if k not in ("out_dir", "report")}
    sig = cfg.signals.get("path") if cfg.signals.get("enabled") else None
    return memo_scope(memo, io.config_hash(conf), edges, sig)


def recall_queries(
    cfg,
    ds,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    device: str,
    log,
    memo: dict | None = None,
    until: str | None = None,
) -> Recalled:
    """Recall of ``queries`` against ``nodes`` (both after ingest): embed once, run every group,
    gather the rows in query order. ``memo`` keeps per-node-table work between calls (a Ray worker
    holds one; :func:`scoped_memo` keeps it to this config and these edges); ``until`` stops
    each group after that stage (``recall analyze``: ``novelty``)."""
    state = RunState(cfg, ds, device, log, scoped_memo(memo, cfg, ds.edges), until=until)
    if ds.settings and (note := oks_settings.backend_note(ds.settings, cfg.lexical.tokenizer)):
        backend.fallback(note)
    n_embedded = embed_run(state, EmbedParams.of_run(cfg), nodes, queries)
    if ds.edges is not None and (cfg.diffuse.method != "none" or cfg.signals.enabled):
        graph.explicit_edges(
            ds.edges, nodes["node_id"], {}, ds.skipped
        )  # dangling/self-loop counts, once
    outs = run_all_groups(state, nodes, queries)
    recall = (
        in_query_order([o.recall for o in outs], queries, ["rank"])
        if outs and not until
        else no_recall(cfg.channels)
    )
    log.rows["recall"] = recall.height
    log.rows["queries_without_results"] = queries.height - recall["query_id"].n_unique()
    return Recalled(
        recall=recall,
        novelty=in_query_order([o.novelty for o in outs], queries, [])
        if cfg.novelty.enabled
        else None,
        signals=signals.merge_groups([o.signals for o in outs]),
        xb=state.xb,
        n_embedded=n_embedded,
        reused=sorted({r for o in outs for r in o.reused}),
        freshness=outs[0].freshness if outs else {"status": "disabled"},
        auto=autopreset.summary(state.consts["auto"]) if "auto" in state.consts else None,
    )
