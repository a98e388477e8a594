"""``doc_scope``: a query sees only nodes whose ``doc_id`` equals a scope entry or lies under it
(``"conv-26"`` covers ``"conv-26/session_3"``). Queries sharing a scope are processed together."""
from __future__ import annotations

import numpy as np


def in_scope(doc_ids: np.ndarray, scope: tuple[str, ...] | None) -> np.ndarray:
    """Boolean mask over nodes for one scope (None = everything)."""
    if scope is None:
        return np.ones(len(doc_ids), dtype=bool)
    mask = np.zeros(len(doc_ids), dtype=bool)
    docs = doc_ids.astype(str)
    for s in scope:
        mask |= (docs == s) | np.char.startswith(docs, s.rstrip("/") + "/")
    return mask


def scope_groups(n_nodes: int, doc_ids: np.ndarray | None, scopes: list) -> list[tuple]:
    """[(scope, node indices, query indices)] in first-seen order. ``doc_ids`` holds "" for nodes
    without one (visible only to unscoped queries)."""
    by_scope: dict = {}
    for qi, s in enumerate(scopes):
        key = None if s is None or len(s) == 0 else tuple(sorted(set(s)))
        by_scope.setdefault(key, []).append(qi)
    out = []
    for key, qs in by_scope.items():
        if key is None:
            nodes = np.arange(n_nodes)
        elif doc_ids is None:
            nodes = np.zeros(0, np.int64)
        else:
            nodes = np.flatnonzero(in_scope(doc_ids, key))
        out.append((key, nodes.astype(np.int64), np.asarray(qs, dtype=np.int64)))
    return out
