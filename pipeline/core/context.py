"""The state stages read and extend: ``RunState`` (what a run computes once: config, embeddings of
every node and query part, memo, stage log) and ``RunContext`` (one query group: its nodes, queries,
reference time and sliced vectors, then what each stage adds: candidates, graph, signals, recall)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from omegaconf import DictConfig


@dataclass
class RunState:
    """What a run computes once and every group slices: config, embeddings of all nodes and of
    every query part (``query.plan``), the memo of ``memo.corpus_step`` and the stage log."""

    cfg: DictConfig
    ds: object
    device: str
    log: object  # stagelog.StageLog
    memo: dict | None = None
    encoder: object = None
    cache: object = None
    xb: np.ndarray | None = None
    xparts: np.ndarray | None = None
    part_q: np.ndarray | None = None
    part_w: np.ndarray | None = None
    until: str | None = None  # a stage name: each group stops after it (recall analyze: "novelty")
    edge_index: object = (
        None  # ops.scope.EdgeIndex over the run's nodes: each group's explicit edges
    )
    consts: dict = field(
        default_factory=dict
    )  # per-run values every group reads (params, key prefixes)

    def const(self, name: str, build):
        """A value that depends on the run only (config-derived params, hashes): built once."""
        if name not in self.consts:
            self.consts[name] = build()
        return self.consts[name]


@dataclass
class RunContext:
    """One query group (``ops.scope.run_groups``) and what the stages have added so far."""

    run: RunState
    nodes: pl.DataFrame
    queries: pl.DataFrame
    now: dt.datetime  # the group's reference time
    key: str = ""  # the group's (scope, viewer, reference time), as text
    xb: np.ndarray | None = None
    xb_resident: object = None  # xb on the run's device, made by channels.dense.resident
    xparts: np.ndarray | None = None
    part_q: np.ndarray | None = None
    part_w: np.ndarray | None = None
    xq: np.ndarray | None = None
    edges: pl.DataFrame | None = None  # explicit edges with both ends in the group (None: ds.edges)
    cand: pl.DataFrame | None = None  # channels: one row per (query, node) candidate
    fusion: object = None  # fuse: its FuseParams (scaled), what later components are fused with
    graph: pl.DataFrame | None = None  # graph: the group's weighted edges
    hub_graph: object = None  # graph: the entity hubs (stages.hubs.Hubs) or None
    hub_params: object = None  # graph: the hub layer's parameters (stages.hubs.HubParams)
    scored_nodes: pl.DataFrame | None = (
        None  # signals: nodes with a feedback table's state overlaid
    )
    signals: pl.DataFrame | None = None  # signals: one row per node
    freshness: dict = field(default_factory=lambda: {"status": "disabled"})
    novelty: pl.DataFrame | None = None  # novelty: the per-query novelty table
    anchors: pl.DataFrame | None = (
        None  # exact-name anchors (diffusion seeds, co-occurrence anchors)
    )
    policy: object = None  # score: the scope policy applied (stages.scope_policy.Applied)
    scored: object = None  # score: each candidate's score on the run's device (stages.score.Scored)
    recall: pl.DataFrame | None = None  # select: the group's recall rows
    reused: list = field(default_factory=list)  # stages served from the stage cache
    # several small groups laid end to end (querypath.packs): [(key, node rows, query rows)] in
    # this context's numbering, and the segment of each node and query; None for one group
    segments: list | None = None
    seg: np.ndarray | None = None
    qseg: np.ndarray | None = None

    def segment_tag(self) -> str:
        """ "" for one group; else a tag of the segment sizes (memo keys of per-node-table work)."""
        if self.seg is None:
            return ""
        return "|" + ",".join(str(len(r)) for _k, r, _q in self.segments)

    def diffusion_parts(self, rows: int = 1024) -> list | None:
        """The node and query sets diffusion runs on: runs of consecutive segments of about
        ``rows`` nodes, each solved at once (the graph and hubs join no two segments, and a query's
        seeds are its own segment's; PEDSA's and expand's seed block is a run's nodes × its queries,
        so their runs stay small); else the default (``scope_groups`` of the tables)."""
        if self.segments is None:
            return None
        out, first = [], 0
        for j, (_k, r, _q) in enumerate(self.segments):
            last = j + 1 == len(self.segments)
            if last or self.segments[j + 1][1][0] - self.segments[first][1][0] > rows:
                lo, hi = self.segments[first], self.segments[j]
                out.append(
                    (None, np.arange(lo[1][0], r[-1] + 1), np.arange(lo[2][0], hi[2][-1] + 1))
                )
                first = j + 1
        return out

    @property
    def vectors(self) -> tuple:
        """(query part vectors, part → query, part weight): what ``dense_pairs`` scores against."""
        return self.xparts, self.part_q, self.part_w
