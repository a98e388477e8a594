"""BME's ``selectedNodeIds`` for ``inject.format=bme`` (``inject.scene``): each query's first
``max_nodes`` recalled nodes, the active owners' POV nodes put in front and the scene rebuilt
around them (``pipeline.bme.scene``), over the nodes and stored edges the query may see (sealed:
BME walks the whole graph). The recall layer is not changed: this is what BME injects and
reinforces (``recall feedback --format bme`` reads it from ``injection.parquet``'s ``selected``).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.bme import scene
from pipeline.ops.scope import scope_groups


def _column(nodes: pl.DataFrame, name: str, default, dtype) -> np.ndarray:
    if name not in nodes.columns:
        return np.full(nodes.height, default, dtype)
    return nodes[name].fill_null(default).cast(dtype).to_numpy()


def _neighbours(
    nodes: pl.DataFrame, edges: pl.DataFrame | None, visible: np.ndarray
) -> list[list[int]]:
    """Per node, the other ends of its usable stored edges (no ``valid_to``, not the synthetic
    ``temporal`` links) among ``visible`` nodes, in edge order."""
    nbrs: list[list[int]] = [[] for _ in range(nodes.height)]
    if edges is None or edges.height == 0:
        return nbrs
    e = edges
    if "relation" in e.columns:
        e = e.filter(pl.col("relation").fill_null("") != "temporal")
    if "valid_to" in e.columns:
        e = e.filter(pl.col("valid_to").is_null())
    idx = dict(zip(nodes["node_id"].to_list(), range(nodes.height)))
    ok = set(visible.tolist())
    for a, b in zip(e["src"].to_list(), e["dst"].to_list()):
        i, j = idx.get(a), idx.get(b)
        if i in ok and j in ok:
            nbrs[i].append(j)
            nbrs[j].append(i)
    return nbrs


def selected(
    recall: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    edges: pl.DataFrame | None,
    cap: int,
    include_archived: bool,
) -> dict[str, list[str]]:
    """query_id → BME's selectedNodeIds (node ids, at most ``cap``)."""
    ids = nodes["node_id"].to_list()
    pos = dict(zip(ids, range(len(ids))))
    types = nodes["type"].to_list() if "type" in nodes.columns else [None] * nodes.height
    seq = (
        _column(nodes, "floor", 0, pl.Int64)
        if "floor" in nodes.columns
        else _column(nodes, "seq", 0, pl.Int64)
    )
    recency, imp = _column(nodes, "seq", 0, pl.Int64), _column(nodes, "importance", 0.0, pl.Float64)
    archived = _column(nodes, "archived", False, pl.Boolean)
    key = (
        nodes["scope_owner_key"].to_list()
        if "scope_owner_key" in nodes.columns
        else [None] * nodes.height
    )
    pov = [k if t == "pov_memory" and not a else None for k, t, a in zip(key, types, archived)]
    owners = (
        queries["active_owner_keys"].to_list() if "active_owner_keys" in queries.columns else None
    )
    ranked = {
        q: g["node_id"].to_list()
        for (q,), g in recall.sort("rank").group_by("query_id", maintain_order=True)
    }
    qids, out = queries["query_id"].to_list(), {}
    for _key, visible, qs in scope_groups(nodes, queries, include_archived):
        nbrs = _neighbours(nodes, edges, visible)
        events = np.array([i for i in visible if types[i] == "event" and not archived[i]], np.int64)
        for qi in qs:
            r = [pos[n] for n in ranked.get(qids[qi], [])]
            seeds = scene.augment_pov(r, cap, pov, (owners[qi] if owners else None) or [])
            got = scene.reconstruct(seeds, cap, types, seq, recency, imp, archived, nbrs, events)
            out[qids[qi]] = [ids[i] for i in got]
    return out
