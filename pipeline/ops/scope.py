"""Which nodes a query may see, decided once per group of queries that see the same nodes.

- ``doc_scope``: a node is in scope when its ``doc_id`` equals a scope entry or lies under it
  (``"conv-26"`` covers ``"conv-26/session_3"``); no scope (null) = the whole corpus. An empty list
  is refused at ingest (``schema.conform``); passed in directly it sees nothing, never everything.
- ``visibility``: a node that has a list is seen only by a ``viewer`` it names, or by anyone when
  it names ``"*"``; a query without a viewer sees only nodes without a list (or with ``"*"``).
- ``archived``: archived nodes are left out unless ``include_archived`` (ReMe's flag).

``run_groups`` splits those groups further by reference time: ``runner.run`` runs every stage after
embedding once per such group on its node subset (``pipeline.grouprun``), so nothing invisible can be
recalled, carry graph energy or weigh in a statistic.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl


def in_scope(doc_ids: np.ndarray, scope: tuple[str, ...] | None) -> np.ndarray:
    """Boolean mask over nodes for one scope (None = everything)."""
    if scope is None:
        return np.ones(len(doc_ids), dtype=bool)
    mask = np.zeros(len(doc_ids), dtype=bool)
    docs = doc_ids.astype(str)
    for s in scope:
        mask |= (docs == s) | np.char.startswith(docs, s.rstrip("/") + "/")
    return mask


def visible(visibility: list, viewer: str | None) -> np.ndarray:
    """Boolean mask: nodes a viewer may see (visibility lists may be None)."""
    return np.array([v is None or "*" in v or (viewer is not None and viewer in v) for v in visibility], dtype=bool)


def scope_groups(nodes: pl.DataFrame, queries: pl.DataFrame, include_archived: bool = False) -> list[tuple]:
    """[(key, node indices, query indices)] in first-seen order; key = (scope tuple or None, viewer)."""
    scopes = queries["doc_scope"].to_list() if "doc_scope" in queries.columns else [None] * queries.height
    viewers = queries["viewer"].to_list() if "viewer" in queries.columns else [None] * queries.height
    by_key: dict = {}
    for qi, (s, v) in enumerate(zip(scopes, viewers)):
        key = (None if s is None else tuple(sorted(set(s))), v)
        by_key.setdefault(key, []).append(qi)
    base = np.ones(nodes.height, dtype=bool)
    if "archived" in nodes.columns and not include_archived:
        base &= ~nodes["archived"].fill_null(False).to_numpy()
    doc_ids = nodes["doc_id"].fill_null("").to_numpy().astype(str) if "doc_id" in nodes.columns else None
    vis = nodes["visibility"].to_list() if "visibility" in nodes.columns else None
    out = []
    for (scope, viewer), qs in by_key.items():
        mask = base.copy()
        if scope is not None:
            mask &= in_scope(doc_ids, scope) if doc_ids is not None else False
        if vis is not None:
            mask &= visible(vis, viewer)
        out.append(((scope, viewer), np.flatnonzero(mask).astype(np.int64), np.asarray(qs, dtype=np.int64)))
    return out


STAMPS = ("updated_at", "created_at", "last_access_at")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def latest_stamp(nodes: pl.DataFrame, rows: np.ndarray) -> dt.datetime:
    """The latest node timestamp among ``rows`` (1970-01-01 when none has one)."""
    sub = nodes[rows]
    stamps = [sub[c].max() for c in STAMPS if c in sub.columns and sub[c].null_count() < sub.height]
    return max(stamps) if stamps else EPOCH


def run_groups(nodes: pl.DataFrame, queries: pl.DataFrame, include_archived: bool = False,
               now: dt.datetime | None = None) -> list[tuple]:
    """[(key, node indices, query indices, reference time)]: the ``scope_groups`` split by reference
    time. A query's reference time is ``now`` (the config's) if given, else its own ``now``, else the
    latest timestamp among the nodes its group may see — never another query's, never an invisible
    node's, never the wall clock. key = (scope, viewer, reference time)."""
    qnow = queries["now"].to_list() if "now" in queries.columns else [None] * queries.height
    out = []
    for (scope, viewer), rows, qs in scope_groups(nodes, queries, include_archived):
        fallback = latest_stamp(nodes, rows) if now is None and any(qnow[int(q)] is None for q in qs) else None
        by_time: dict = {}
        for q in qs:
            by_time.setdefault(now or qnow[int(q)] or fallback, []).append(int(q))
        out += [((scope, viewer, t), rows, np.asarray(group, dtype=np.int64), t) for t, group in by_time.items()]
    return out
