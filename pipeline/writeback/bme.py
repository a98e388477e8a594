"""``recall feedback RUN --format bme``: a run's recall reinforces the ST-BME graph it read, written
as a **new** graph file (ST-BME @ 590da3b, ``retrieval/dynamics.js::reinforceAccessBatch``).

For each query in the run's order, each node BME selected (``injection.parquet``'s ``selected``
when the run had ``inject.format=bme``: BME's ``selectedNodeIds`` after scene reconstruction; else
ranks 1 … ``inject.max_nodes``, BME's ``maxRecallNodes`` 12; once per query) is reinforced exactly as ``reinforceAccess`` does:
``accessCount = (accessCount || 0) + 1``, ``importance = min(10, (importance || 5) + 0.1)`` (so a
stored 0 restarts at 5, as JavaScript's ``||`` does), ``lastAccessTime = now`` (ms epoch). One
addition per access, in order, so the floats are the ones ST-BME's replay of the same recalls gives.
After each query's recall, ``historyState.activeRecallOwnerKey`` and ``recentRecallOwnerKeys`` are
written as ``retrieve`` writes them (:func:`record_owners`), from the owners the run used.
Deviation: ST-BME reinforces after each recall and the next recall sees it; a batch run recalls
every query against the stored graph, and the reinforcement is applied afterwards.

The graph is read with ``pipeline.adapters.bme_store.read_graph`` (export, chat file or sync file)
and written as a graph object in ``exportGraph``'s layout (``JSON.stringify(graph, null, 2)``;
everything else, embeddings included, kept as read) to ``--out`` (default
``<run_dir>/st-bme-graph-feedback.json``) through a temporary file and a rename. An ``--out`` equal
to the store itself, or to any file that exists, is refused.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl

from pipeline.adapters.bme_js import unique_strings
from pipeline.adapters.bme_store import read_graph
from pipeline.contract.errors import UserError
from pipeline.contract.io import atomic_write_bytes
from pipeline.writeback.common import store_root

MAX_RECALL_NODES = 12  # settings-defaults.js recallMaxNodes
RECENT_RECALL_OWNER_LIMIT = 8  # graph/knowledge-state.js


def record_owners(graph: dict, keys: list[str]) -> None:
    """What ``retrieve`` writes after a recall (retriever.js): ``historyState.activeRecallOwnerKey``
    = the first active owner (else ""), each owner pushed, last to first, onto
    ``recentRecallOwnerKeys`` (``pushRecentRecallOwner``: newest first, unique, at most 8). A graph
    without ``historyState`` is left as it is, as BME does."""
    hs = graph.get("historyState")
    if not isinstance(hs, dict):
        return
    hs["activeRecallOwnerKey"] = keys[0] if keys else ""
    for key in reversed(keys):
        k = str(key or "").strip()
        if k:
            recent = hs.get("recentRecallOwnerKeys") or []
            hs["recentRecallOwnerKeys"] = unique_strings([k, *recent])[:RECENT_RECALL_OWNER_LIMIT]
            hs["activeRecallOwnerKey"] = k


def owner_keys(data: dict, order: list[str]) -> list[list[str]]:
    """Per query of ``order``, the active owner keys the run used (the queries file read again
    by the adapter: the query's own, else the owners of its ``char_name``); [] without one."""
    if not data.get("queries"):
        return [[] for _ in order]
    from pipeline.adapters import bme as adapter

    ds = adapter.load(str(data["path"]), queries=str(data["queries"]))
    if "active_owner_keys" not in ds.queries.columns:
        return [[] for _ in order]
    by_q = dict(zip(ds.queries["query_id"].to_list(), ds.queries["active_owner_keys"].to_list()))
    return [list(by_q.get(q) or []) for q in order]


def reinforce(node: dict, now_ms: int) -> None:
    """``reinforceAccess`` on one node dict, in place."""
    node["accessCount"] = (node.get("accessCount") or 0) + 1
    node["importance"] = min(10, (node.get("importance") or 5) + 0.1)
    node["lastAccessTime"] = now_ms


def selected(recall: pl.DataFrame, cap: int) -> list[list[str]]:
    """Per query (in recall order), the node ids of ranks 1 … ``cap`` in rank order, unique."""
    top = recall.filter(pl.col("rank") <= cap).sort("rank", maintain_order=True)
    out = []
    for (_q,), g in top.group_by("query_id", maintain_order=True):
        out.append(list(dict.fromkeys(g["node_id"].to_list())))
    return out


def picks(run_dir: Path, rows: pl.DataFrame, cap: int) -> list[list[str]]:
    """What BME reinforces per query: ``injection.parquet``'s ``selected`` (BME's
    ``selectedNodeIds`` after scene reconstruction, ``inject.format=bme``) where the run wrote it,
    in the recall's query order; else ranks 1 … ``cap`` of the recall rows."""
    inj = run_dir / "injection.parquet"
    sel = pl.read_parquet(inj) if inj.is_file() else None
    if sel is None or "selected" not in sel.columns:
        return selected(rows, cap)
    by_q = dict(zip(sel["query_id"].to_list(), sel["selected"].to_list()))
    order = rows["query_id"].unique(maintain_order=True).to_list()
    return [list(by_q.get(q) or []) for q in order]


def apply(graph: dict, picks: list[list[str]], now_ms: int) -> dict:
    """``graph`` with ``reinforceAccessBatch`` applied per query's picks, in order (mutates it)."""
    by_id = {n.get("id"): n for n in graph.get("nodes") or [] if isinstance(n, dict)}
    for ids in picks:
        for nid in ids:
            if nid in by_id:
                reinforce(by_id[nid], now_ms)
    return graph


def write_back(
    run_dir: Path, cfg: dict, rows: pl.DataFrame, now: dt.datetime, out: str | None
) -> Path:
    """Reinforce the store a finished ``data=bme`` run read with its recall ``rows``; returns the
    new file's path (``pipeline.cli.feedback.WRITERS``)."""
    store = store_root(run_dir, cfg, "bme", "an ST-BME store", "--format bme needs one")
    data = cfg["data"]
    target = Path(out) if out else Path(run_dir) / "st-bme-graph-feedback.json"
    if target.resolve() == store.resolve():
        raise UserError(
            f"--out {target} is the store the run read; write the reinforced graph to a new file"
        )
    if target.exists():
        raise UserError(f"{target} exists; feedback never overwrites a file (pass a new --out)")
    graph, _files, _kind = read_graph(store)
    cap = (cfg.get("inject") or {}).get("max_nodes") or MAX_RECALL_NODES
    now_ms = int(round(now.timestamp() * 1000))
    order = rows["query_id"].unique(maintain_order=True).to_list()
    owners = owner_keys(data, order)
    for q_picks, keys in zip(picks(Path(run_dir), rows, int(cap)), owners):
        record_owners(graph, keys)  # retrieve() sets the owners, then reinforces its selection
        apply(graph, [q_picks], now_ms)
    atomic_write_bytes(target, json.dumps(graph, ensure_ascii=False, indent=2).encode("utf-8"))
    return target
