"""ST-BME's graph as ST-BME keeps it on disk, read into one graph dict (ST-BME @ 590da3b).

Three files hold a graph (``docs/presets.md``, ``bme``: store field → pipeline step):

- an export ``st-bme-graph-<ts>.json`` (``graph/graph.js::exportGraph``): the graph itself,
  ``version`` 9, embeddings nulled;
- a SillyTavern chat file ``<chat>.jsonl`` whose first line holds ``chat_metadata.st_bme_graph``
  (``graph/graph-persistence.js::GRAPH_METADATA_KEY``; the value is the graph object or its JSON
  string, as ``index.js::readLegacyGraphFromChatMetadata`` accepts both);
- a sync file ``ST-BME_sync_<chat>.json`` (``sync/bme-sync.js``): a snapshot ``{meta, nodes,
  edges, tombstones, state}`` (format 1) or a format-2 manifest ``{kind: "st-bme-sync",
  formatVersion: 2, chunks: [{kind, filename}]}`` whose chunk files lie next to it; the graph-level
  state is in ``meta`` (``knowledgeState``, ``regionState``, ``timelineState``,
  ``runtimeSummaryState``, ``runtimeHistoryState``, ``runtimeGraphVersion``), as
  ``sync/bme-db.js::buildGraphFromSnapshot`` reads it.

The file is only read (``recall run`` never writes a store; ``recall feedback --format bme`` writes
a new export).
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.adapters import fields
from pipeline.adapters.common import read_json, read_text, require_file
from pipeline.contract.errors import DataError

GRAPH_VERSION = 9  # graph/graph.js GRAPH_VERSION at 590da3b
GRAPH_METADATA_KEY = "st_bme_graph"
FIX_SYNC = "sync the chat again with ST-BME 590da3b (or pass its graph export)"
SYNC_STATE_KEYS = {  # graph key ← sync snapshot meta key (sync/bme-db.js BME_RUNTIME_*_META_KEY)
    "knowledgeState": "knowledgeState",
    "regionState": "regionState",
    "timelineState": "timelineState",
    "summaryState": "runtimeSummaryState",
    "historyState": "runtimeHistoryState",
}


def _chat_graph(path: Path) -> dict:
    """The graph in a chat file's first line (``chat_metadata.st_bme_graph``)."""
    # the first line ends at "\n" only (common.read_jsonl): JSON.stringify leaves U+2028 raw
    first = read_text(path).split("\n", 1)[0].rstrip("\r")
    try:
        head = json.loads(first) if first else None
    except json.JSONDecodeError as exc:
        raise DataError(
            str(path), f"first line is not JSON ({exc.msg})", "pass a SillyTavern chat .jsonl"
        ) from None
    meta = head.get("chat_metadata") if isinstance(head, dict) else None
    graph = meta.get(GRAPH_METADATA_KEY) if isinstance(meta, dict) else None
    if graph in (None, ""):
        raise DataError(
            str(path),
            f"the first line has no chat_metadata.{GRAPH_METADATA_KEY}",
            "open the chat with ST-BME enabled (or pass its graph export / sync file)",
            row="line 1",
        )
    if isinstance(graph, str):
        try:
            graph = json.loads(graph)
        except json.JSONDecodeError as exc:
            raise DataError(
                str(path),
                f"chat_metadata.{GRAPH_METADATA_KEY} is a string but not JSON ({exc.msg})",
                "re-save the chat from SillyTavern",
                row="line 1",
            ) from None
    return graph


def _manifest_snapshot(path: Path, manifest: dict) -> tuple[dict, list[Path]]:
    """A format-2 sync manifest's snapshot, read from its chunk files (same folder)."""
    snap: dict = {"meta": {}, "nodes": [], "edges": [], "tombstones": []}
    files = []
    for i, chunk in enumerate(manifest.get("chunks") or []):
        fields.check(chunk, fields.BME_SYNC_CHUNK, str(path), f"chunks[{i}]", FIX_SYNC)
        name = str(chunk.get("filename") or "").strip()
        if not name:
            continue
        p = path.parent / Path(name).name
        if not p.is_file():
            raise DataError(
                str(path),
                f"chunk file {name!r} not found next to the manifest",
                "copy every ST-BME_sync_*.__*.json chunk with the manifest",
                row=f"chunks[{i}]",
            )
        files.append(p)
        doc = fields.check(read_json(p) or {}, fields.BME_CHUNK_FILE, str(p), "document", FIX_SYNC)
        records = doc.get("records") or []
        kind = str(chunk.get("kind") or "")
        if kind in ("nodes", "edges", "tombstones"):
            snap[kind] += records
        elif kind == "runtime-meta" and records and isinstance(records[0], dict):
            snap["meta"] = {**records[0], **snap["meta"]}
    snap["meta"] = {**snap["meta"], **(manifest.get("meta") or {})}
    return snap, files


def _snapshot_graph(snap: dict) -> dict:
    """The graph a sync snapshot holds (``buildGraphFromSnapshot``: state from ``meta``)."""
    meta = snap.get("meta") if isinstance(snap.get("meta"), dict) else {}
    graph = {
        "version": meta.get("runtimeGraphVersion", GRAPH_VERSION),
        "nodes": snap.get("nodes") or [],
        "edges": snap.get("edges") or [],
    }
    for key, meta_key in SYNC_STATE_KEYS.items():
        if isinstance(meta.get(meta_key), dict):
            graph[key] = meta[meta_key]
    return graph


def check_version(graph: object, where: str) -> dict:
    """``graph`` when it is a graph of a version this reader knows (1–9), else a DataError."""
    if not isinstance(graph, dict):
        raise DataError(
            where, "is not an ST-BME graph object", "pass a graph export, chat or sync file"
        )
    v = graph.get("version")
    if not fields.finite_number(v) or v != int(v) or not 1 <= v <= GRAPH_VERSION:
        raise DataError(
            where,
            f"ST-BME graph version {v!r} is not one this reader knows (1–{GRAPH_VERSION}, ST-BME 590da3b)",
            "export the graph again from ST-BME (graph panel → export), or upgrade the pipeline",
            field="version",
        )
    fix = "export the graph again from ST-BME (graph panel → export)"
    fields.check(graph, fields.BME_GRAPH, where, "graph", fix)
    for i, node in enumerate(graph.get("nodes") or []):
        fields.check(node, fields.BME_NODE, where, f"nodes[{i}]", fix)
    return graph


def read_graph(path: str | Path) -> tuple[dict, list[Path], str]:
    """(graph, files read, kind: export | chat | sync) from an export, chat or sync file."""
    p = require_file(path, "ST-BME graph file")
    if p.suffix == ".jsonl":
        return check_version(_chat_graph(p), str(p)), [p], "chat"
    doc = read_json(p)
    if isinstance(doc, dict) and doc.get("kind") == "st-bme-sync":
        fields.check(doc, fields.BME_SYNC_MANIFEST, str(p), "manifest", FIX_SYNC)
        if doc["formatVersion"] != 2:
            raise DataError(
                str(p),
                f"sync manifest formatVersion {doc.get('formatVersion')!r} is not 2",
                "sync the chat again with ST-BME 590da3b",
                field="formatVersion",
            )
        snap, chunks = _manifest_snapshot(p, doc)
        return check_version(_snapshot_graph(snap), str(p)), [p, *chunks], "sync"
    if isinstance(doc, dict) and "version" not in doc and isinstance(doc.get("meta"), dict):
        return check_version(_snapshot_graph(doc), str(p)), [p], "sync"
    return check_version(doc, str(p)), [p], "export"
