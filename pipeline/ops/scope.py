"""Which nodes a query may see, decided once per group of queries that see the same nodes.

- ``doc_scope``: a node is in scope when its ``doc_id`` equals a scope entry or lies under it
  (``"conv-26"`` covers ``"conv-26/session_3"``); no scope = the whole corpus.
- ``visibility``: a node that has a list is seen only by a ``viewer`` it names, or by anyone when
  it names ``"*"``; a query without a viewer sees only nodes without a list (or with ``"*"``).
- ``archived``: archived nodes are left out unless ``include_archived`` (ReMe's flag).

Channels and diffusion work on each group's node subset, so nothing invisible can be recalled or
carry graph energy.
"""
from __future__ import annotations

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
        key = (None if s is None or len(s) == 0 else tuple(sorted(set(s))), v)
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
