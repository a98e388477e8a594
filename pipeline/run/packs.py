"""Many small query groups in one pass (issue #16): groups laid end to end as the segments of one
context, so every stage runs once for them all instead of once per group.

A nightly cache over many workspaces has thousands of groups of tens of nodes: per group the
stages' arithmetic is tiny and their fixed cost (building frames, matrices, indexes) is all.
:func:`packs` puts consecutive small groups (at most :data:`SMALL` nodes each, with no node in
common) together until a pack holds :data:`TARGET` nodes; a bigger group runs alone, as before.
:func:`slice_pack` builds the pack's context: the groups' nodes one after another, each query with
its group's reference time in ``now``, and ``RunContext.segments``/``seg``/``qseg``. Every stage
that counts or links across nodes keeps to a segment: BM25 columns and statistics per segment
(``channels.segvocab``), dense search per segment, no edge and no hub across segments
(``graph.build``, ``hubs.build``), and diffusion never crosses a component. A query's rows are
therefore byte for byte the rows of its group run alone (``tests/run/test_packs.py``); configs that
read anything else across nodes (:func:`packable`) run group by group.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.context import RunContext, RunState
from pipeline.ops.scope import RowsByKey

SMALL = 512  # a group with at most this many nodes may share a pack
TARGET = 16384  # a pack closes once it holds this many nodes


def packable(cfg, ds, until: str | None) -> bool:
    """Whether the config's stages all keep to a segment: no per-node-table step beyond the graph
    and hubs (signals, novelty, co-occurrence, anchors, probabilistic recall, scope policy,
    ``preset=auto``), no edge or hub that joins nodes by text across the table (mentions, kNN,
    hub synonyms), PPR or no diffusion, a flat dense index, no per-document selection (spread
    gap, chunks per document), and no edge whose validity depends on the reference time."""
    g, edges = cfg.graph, getattr(ds, "edges", None)
    return (
        until is None
        and not cfg.get("auto", {}).get("enabled", False)
        and not any(cfg[k].enabled for k in ("signals", "novelty", "cooccur", "anchors"))
        and not cfg.prob_recall.enabled
        and cfg.scope_policy.policy == "none"
        and not g.mentions
        and int(g.knn_k) == 0
        and not (g.hubs.entities and int(g.hubs.synonym_k) > 0)
        and cfg.diffuse.method in ("none", "ppr")
        and cfg.dense.index == "flat"
        and cfg.select.method in ("topk", "dpp", "mmr")
        and not cfg.select.top_chunks_per_doc
        and not float(cfg.select.spread_gap)
        and (edges is None or not {"valid_from", "valid_to"} & set(edges.columns))
    )


def packs(groups: list) -> list[list]:
    """[(key, rows, qs, now)] → lists of groups run together: a group with more than
    :data:`SMALL` nodes (or none) alone; small ones in order, a pack closing at :data:`TARGET`
    nodes or before a group that shares a node with it."""
    out, cur, used, size = [], [], set(), 0
    for g in groups:
        rows = g[1]
        if len(rows) == 0 or len(rows) > SMALL:
            out.append([g])
            continue
        if cur and (size >= TARGET or not used.isdisjoint(rows.tolist())):
            out.append(cur)
            cur, used, size = [], set(), 0
        cur.append(g)
        used.update(rows.tolist())
        size += len(rows)
    return out + ([cur] if cur else [])


def slice_pack(
    state: RunState, nodes: pl.DataFrame, queries: pl.DataFrame, pack: list
) -> RunContext:
    """One context for the groups of ``pack``: their nodes and queries one group after another,
    each query's ``now`` its group's reference time, embeddings and query parts sliced alike."""
    rows = np.concatenate([g[1] for g in pack])
    qs = np.concatenate([g[2] for g in pack])
    sizes, qsizes = [len(g[1]) for g in pack], [len(g[2]) for g in pack]
    nows = pl.Series(
        "now",
        [g[3] for g, n in zip(pack, qsizes) for _ in range(n)],
        dtype=pl.Datetime("us", "UTC"),
    )
    sub = queries[qs]
    sub = (
        sub.with_columns(nows)
        if "now" not in sub.columns
        else sub.with_columns(pl.col("now").cast(pl.Datetime("us", "UTC")).fill_null(nows))
    )
    ctx = RunContext(state, nodes[rows], sub, pack[0][3], f"pack of {len(pack)}")
    starts, qstarts = np.cumsum([0, *sizes]), np.cumsum([0, *qsizes])
    ctx.segments = [
        (g[0], np.arange(starts[j], starts[j + 1]), np.arange(qstarts[j], qstarts[j + 1]))
        for j, g in enumerate(pack)
    ]
    ctx.seg = np.repeat(np.arange(len(pack), dtype=np.int64), sizes)
    ctx.qseg = np.repeat(np.arange(len(pack), dtype=np.int64), qsizes)
    return slice_inputs(state, ctx, rows, qs, queries.height)


def slice_inputs(
    state: RunState, ctx: RunContext, rows: np.ndarray, qs: np.ndarray, n_queries: int
) -> RunContext:
    """The context's explicit edges (both ends among ``rows``), node embeddings (``rows``, in that
    order) and query parts (those of ``qs``, in that order, renumbered to it): for one group
    (``querypath.slice_group``, rows and queries ascending) and for a pack alike."""
    if state.edge_index is not None:
        ctx.edges = state.edge_index.within(np.sort(rows))
    if state.xb is not None:
        # the whole corpus in its own order keeps the run's array (a memmap); a pack may hold
        # every node in another order
        same = len(rows) == len(state.xb) and bool((rows == np.arange(len(rows))).all())
        ctx.xb = state.xb if same else np.ascontiguousarray(state.xb[rows])
        pos = np.full(n_queries, -1, np.int64)
        pos[qs] = np.arange(len(qs))
        sel = state.const("parts_by_query", lambda: RowsByKey(state.part_q)).of(np.sort(qs))
        sel = sel[np.argsort(pos[state.part_q[sel]], kind="stable")]
        ctx.xparts, ctx.part_w = state.xparts[sel], state.part_w[sel]
        ctx.part_q = pos[state.part_q[sel]]
        ctx.xq = ctx.xparts[np.r_[0, np.flatnonzero(np.diff(ctx.part_q)) + 1]]
    return ctx
