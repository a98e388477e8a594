"""BME's exact-entity anchors and cross recall (docs/presets.md, ``bme``: exact anchors, cross recall).

An anchor is a node whose title (trimmed, at least ``min_len`` characters) appears, case-sensitively,
in the query's current text; it seeds diffusion with energy 2.0. Cross recall adds, for every
anchor, each neighbour over a normal stored edge (not the temporal chain, nor a mention or kNN
edge the graph stage derived: BME walks ``graph.edges`` only) that is a non-archived ``event``
node, with energy 1.5 × edge weight, over edges whose validity window contains the
reference time. Only nodes the query may see are anchors or cross seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.core.stage import Params
from pipeline.ops.scope import scope_groups
from pipeline.ops.titles import TitleFinder
from pipeline.stages.graph import in_window

SCHEMA = {"query_idx": pl.Int64, "node_idx": pl.Int64, "energy": pl.Float32}
DERIVED = [
    "temporal",
    "mention",
    "knn",
]  # graph-stage edges: BME's cross recall walks stored edges only


@dataclass(frozen=True)
class AnchorParams(Params):
    """Exact-name anchor settings (the ``anchors`` group) and the run's ``include_archived``."""

    GROUP: ClassVar[str] = "anchors"
    enabled: bool
    energy: float  # seed energy of an anchor
    min_len: int  # shortest title matched
    include_archived: bool = field(default=False, metadata={"runtime": True})


@dataclass(frozen=True)
class CrossRecallParams(Params):
    """Cross recall settings (the ``cross_recall`` group)."""

    GROUP: ClassVar[str] = "cross_recall"
    enabled: bool
    mult: float  # a cross seed's energy is mult × edge weight


def params_of(cfg) -> tuple[AnchorParams, CrossRecallParams]:
    """The ``anchors`` and ``cross_recall`` parameters of a (query group's) config: what the
    diffuse and cooccur stages read besides their own group."""
    return (
        AnchorParams.from_cfg(cfg.anchors, "anchors", include_archived=bool(cfg.include_archived)),
        CrossRecallParams.from_cfg(cfg.cross_recall, "cross_recall"),
    )


def find(
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    *,
    min_len: int = 2,
    energy: float = 2.0,
    include_archived: bool = False,
) -> pl.DataFrame:
    """(query_idx, node_idx, energy) for every title found in a query text (Aho–Corasick, one pass)."""
    if "title" not in nodes.columns:
        return pl.DataFrame(schema=SCHEMA)
    finder = TitleFinder(nodes["title"].to_list(), min_len)
    if not finder:
        return pl.DataFrame(schema=SCHEMA)
    rows = []
    for _key, visible, qs in scope_groups(nodes, queries, include_archived):
        ok = np.zeros(nodes.height, dtype=bool)
        ok[visible] = True
        for q in qs:
            rows += [
                (int(q), j, energy)
                for t in finder.find(queries["text"][int(q)])
                for j in finder.nodes[t]
                if ok[j]
            ]
    return pl.DataFrame(rows, schema=SCHEMA, orient="row").unique(
        ["query_idx", "node_idx"], maintain_order=True
    )


def cross(
    anchor: pl.DataFrame,
    edges: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    *,
    mult: float = 1.5,
    include_archived: bool = False,
    now=None,
) -> pl.DataFrame:
    """Event neighbours of the anchors over normal edges live at ``now`` (``graph.in_window``),
    energy ``mult`` × edge weight."""
    if anchor.height == 0 or "type" not in nodes.columns or edges is None or edges.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    stored = ~pl.col("relation").is_in(DERIVED) if "relation" in edges.columns else pl.lit(True)
    e = in_window(edges, now).filter(~pl.col("inhibit") & stored).select("src", "dst", "weight")
    both = pl.concat([e, e.select(src="dst", dst="src", weight="weight")])
    is_event = (nodes["type"] == "event").fill_null(False).to_numpy()
    if "archived" in nodes.columns:
        is_event &= ~nodes["archived"].fill_null(False).to_numpy()
    hop = anchor.join(both, left_on="node_idx", right_on="src").select(
        "query_idx", node_idx="dst", energy=(pl.col("weight") * mult).cast(pl.Float32)
    )
    hop = hop.filter(
        pl.Series(is_event[hop["node_idx"].to_numpy()]) if hop.height else pl.lit(True)
    )
    keep = []
    for _key, visible, qs in scope_groups(nodes, queries, include_archived):
        keep.append(
            hop.filter(
                pl.col("query_idx").is_in(qs.tolist()) & pl.col("node_idx").is_in(visible.tolist())
            )
        )
    out = pl.concat(keep) if keep else pl.DataFrame(schema=SCHEMA)
    return (
        out.group_by("query_idx", "node_idx")
        .agg(pl.col("energy").max())
        .sort("query_idx", "node_idx")
        .cast(SCHEMA)
    )


def of_group(ctx, p: AnchorParams) -> pl.DataFrame:
    """The exact-name anchors of a query group (``RunContext``) with the ``anchors`` group's
    settings: what diffusion seeds from and co-occurrence anchors on."""
    return find(
        ctx.nodes,
        ctx.queries,
        min_len=p.min_len,
        energy=p.energy,
        include_archived=p.include_archived,
    )
