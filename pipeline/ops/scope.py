"""Which nodes a query may see, decided once per group of queries that see the same nodes.

- ``doc_scope``: a node is in scope when its ``doc_id`` equals a scope entry or lies under it
  (``"conv-26"`` covers ``"conv-26/session_3"``); no scope (null) = the whole corpus. An empty list
  is refused at ingest (``schema.conform``); passed in directly it sees nothing, never everything.
- ``visibility``: a node that has a list is seen only by a ``viewer`` it names, or by anyone when
  it names ``"*"``; a query without a viewer sees only nodes without a list (or with ``"*"``).
- ``archived``: archived nodes are left out unless ``include_archived`` (ReMe's flag).

``run_groups`` splits those groups further by reference time: ``runner.run`` runs every stage after
embedding once per such group on its node subset (``pipeline.run.querypath``), so nothing invisible can be
recalled, carry graph energy or weigh in a statistic.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.ops.sparse_entries import spans
from pipeline.ops.topk import int_order


def in_scope(doc_ids: np.ndarray, scope: tuple[str, ...] | None) -> np.ndarray:
    """Boolean mask over nodes for one scope (None = everything): the rule, by string matching
    (``scope_rows`` computes it for many scopes at once)."""
    if scope is None:
        return np.ones(len(doc_ids), dtype=bool)
    mask = np.zeros(len(doc_ids), dtype=bool)
    docs = doc_ids.astype(str)
    for s in scope:
        mask |= (docs == s) | np.char.startswith(docs, s.rstrip("/") + "/")
    return mask


def visible(visibility: list, viewer: str | None) -> np.ndarray:
    """Boolean mask: nodes a viewer may see (visibility lists may be None)."""
    return np.array(
        [v is None or "*" in v or (viewer is not None and viewer in v) for v in visibility],
        dtype=bool,
    )


def scope_rows(nodes: pl.DataFrame, scopes) -> dict:
    """{scope: sorted node indices} for doc_scope tuples, by the rule of :func:`in_scope` (doc ==
    entry, or doc under ``entry/``) but as joins: nodes × "/"-prefixes of their doc_id against the
    scope entries, so the cost does not grow as nodes × scopes."""
    if "doc_id" not in nodes.columns or not scopes:
        return {s: np.zeros(0, np.int64) for s in scopes}
    docs = nodes.select(doc=pl.col("doc_id").cast(pl.String).fill_null("")).with_row_index("i")
    parts = docs.with_columns(p=pl.col("doc").str.split("/"))
    depth = int(parts["p"].list.len().max())
    under = pl.concat(
        [
            parts.filter(pl.col("p").list.len() > k).select(
                "i", key=pl.col("p").list.slice(0, k).list.join("/")
            )
            for k in range(1, depth)
        ]
        + [pl.DataFrame(schema={"i": pl.UInt32, "key": pl.String})]
    )
    entries = pl.DataFrame(
        [(j, e) for j, s in enumerate(scopes) for e in s],
        schema={"s": pl.Int64, "e": pl.String},
        orient="row",
    )
    hits = pl.concat(
        [
            entries.join(docs.rename({"doc": "e"}), on="e"),
            entries.with_columns(pl.col("e").str.strip_chars_end("/")).join(
                under.rename({"key": "e"}), on="e"
            ),
        ]
    )
    rows = hits.select("s", "i").unique().sort("s", "i").group_by("s", maintain_order=True).agg("i")
    got = dict(zip(rows["s"].to_list(), (x.to_numpy().astype(np.int64) for x in rows["i"])))
    return {s: got.get(j, np.zeros(0, np.int64)) for j, s in enumerate(scopes)}


JOIN_ABOVE = (
    50_000  # scopes × nodes above which membership is one join; below, string matching is cheaper
)


def _members(nodes: pl.DataFrame, scopes: list) -> dict:
    """{scope: node indices}: :func:`scope_rows` (a join) for many scopes over many nodes,
    :func:`in_scope` per scope for a few (a stage run inside one group); the same rows either way."""
    if len(scopes) * nodes.height > JOIN_ABOVE:
        return scope_rows(nodes, scopes)
    docs = (
        nodes["doc_id"].fill_null("").to_numpy().astype(str) if "doc_id" in nodes.columns else None
    )
    return {
        s: np.flatnonzero(in_scope(docs, s)) if docs is not None else np.zeros(0, np.int64)
        for s in scopes
    }


def scope_groups(
    nodes: pl.DataFrame, queries: pl.DataFrame, include_archived: bool = False
) -> list[tuple]:
    """[(key, node indices, query indices)] in first-seen order; key = (scope tuple or None, viewer).
    Scope membership is one join over all scopes (:func:`scope_rows`), visibility one pass per viewer."""
    scopes = (
        queries["doc_scope"].to_list()
        if "doc_scope" in queries.columns
        else [None] * queries.height
    )
    viewers = (
        queries["viewer"].to_list() if "viewer" in queries.columns else [None] * queries.height
    )
    by_key: dict = {}
    for qi, (s, v) in enumerate(zip(scopes, viewers)):
        key = (None if s is None else tuple(sorted(set(s))), v)
        by_key.setdefault(key, []).append(qi)
    base = np.ones(nodes.height, dtype=bool)
    if "archived" in nodes.columns and not include_archived:
        base &= ~nodes["archived"].fill_null(False).to_numpy()
    members = _members(nodes, list(dict.fromkeys(s for s, _v in by_key if s is not None)))
    vis = nodes["visibility"].to_list() if "visibility" in nodes.columns else None
    seen: dict = {}
    everyone = np.arange(nodes.height, dtype=np.int64)
    out = []
    for (scope, viewer), qs in by_key.items():  # a group costs its own nodes, not the corpus
        rows = everyone if scope is None else members[scope]
        rows = rows[base[rows]]
        if vis is not None:
            if viewer not in seen:
                seen[viewer] = visible(vis, viewer)
            rows = rows[seen[viewer][rows]]
        out.append(((scope, viewer), rows, np.asarray(qs, dtype=np.int64)))
    return out


def edge_ends(nodes: pl.DataFrame, edges: pl.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) node index of each explicit edge; -1 for an end that is not a node."""
    if edges is None or edges.height == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    idx = nodes.select(node_id=pl.col("node_id").cast(pl.String)).with_row_index("i")
    src, dst = [
        edges.select(node_id=pl.col(c).cast(pl.String))
        .join(idx, on="node_id", how="left", maintain_order="left")["i"]
        .fill_null(-1)
        .cast(pl.Int64)
        .to_numpy()
        for c in ("src", "dst")
    ]
    return src, dst


class EdgeIndex:
    """The explicit edges by source node, so a group's edges (both ends among its nodes, in the
    edge table's order) cost its own edges, not the whole table's."""

    def __init__(self, nodes: pl.DataFrame, edges: pl.DataFrame | None) -> None:
        self.edges, self.n = edges, nodes.height
        self.src, self.dst = edge_ends(nodes, edges)
        self.order = int_order(self.src)
        self.start = np.searchsorted(self.src[self.order], np.arange(self.n + 1))
        self.inside = np.zeros(self.n + 1, dtype=bool)

    def within(self, rows: np.ndarray) -> pl.DataFrame | None:
        """The edge table's rows with both ends in ``rows`` (sorted node indices), in table order."""
        if self.edges is None or self.edges.height == 0:
            return self.edges
        picks = self.order[spans(np, self.start[rows], self.start[rows + 1])]
        # all False between calls; the extra last slot stands for -1 (not a node)
        inside = self.inside
        inside[rows] = True
        picks = np.sort(picks[inside[self.dst[picks]]])
        inside[rows] = False
        return self.edges[picks]


class RowsByKey:
    """The rows of a table by an integer key column (a query's parts by query index), so a group's
    rows cost its own, not the whole table's. ``of(keys)`` = ``np.flatnonzero(np.isin(key, keys))``."""

    def __init__(self, key: np.ndarray) -> None:
        self.order = int_order(key)
        self.sorted = key[self.order]

    def of(self, keys: np.ndarray) -> np.ndarray:
        """Row positions whose key is in ``keys`` (unique), ascending."""
        lo = np.searchsorted(self.sorted, keys, "left")
        return np.sort(self.order[spans(np, lo, np.searchsorted(self.sorted, keys, "right"))])


STAMPS = ("updated_at", "created_at", "last_access_at")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def latest_stamp(nodes: pl.DataFrame, rows: np.ndarray) -> dt.datetime:
    """The latest node timestamp among ``rows`` (1970-01-01 when none has one)."""
    sub = nodes[rows]
    stamps = [sub[c].max() for c in STAMPS if c in sub.columns and sub[c].null_count() < sub.height]
    return max(stamps) if stamps else EPOCH


def run_groups(
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    include_archived: bool = False,
    now: dt.datetime | None = None,
    default: dt.datetime | None = None,
) -> list[tuple]:
    """[(key, node indices, query indices, reference time)]: the ``scope_groups`` split by reference
    time. A query's reference time is ``now`` (the config's) if given, else its own ``now``, else
    ``default`` (the config's ``default_now``, e.g. the run's start), else the latest timestamp
    among the nodes its group may see — never another query's, never an invisible node's.
    key = (scope, viewer, reference time)."""
    qnow = queries["now"].to_list() if "now" in queries.columns else [None] * queries.height
    out = []
    for (scope, viewer), rows, qs in scope_groups(nodes, queries, include_archived):
        fallback = default or (
            latest_stamp(nodes, rows)
            if now is None and any(qnow[int(q)] is None for q in qs)
            else None
        )
        by_time: dict = {}
        for q in qs:
            by_time.setdefault(now or qnow[int(q)] or fallback, []).append(int(q))
        out += [
            ((scope, viewer, t), rows, np.asarray(group, dtype=np.int64), t)
            for t, group in by_time.items()
        ]
    return out
