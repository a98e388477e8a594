"""``data=bme``: an ST-BME graph (export, chat file or sync file) → the data contract.

Nodes, edges and the knowledge gate come from the graph (``pipeline.adapters.bme_nodes``; files
read by ``pipeline.adapters.bme_store``); queries from a JSON Lines file in the BME oracle's shape
(``{"query_id", "text", "context"?: ["[user]: …", "[assistant]: …" | {role, text}], "char_name"?,
"user_name"?}``) plus optional scene state. The scene state per query (what BME resolves at recall
time) is the query's own where given, else the graph's:

- ``viewer`` = ``char_name`` (BME's visibility filter is SillyTavern's ``name2``);
- ``active_owner_keys`` (the knowledge gate's owners) = the query's, else the knowledge owners of
  type character whose name or alias is ``char_name`` (BME's "legacy unique match"; its text and
  recent-owner heuristics are not reproduced); ``active_owners`` = ``char_name`` and those owners'
  names; ``active_user_owners`` = ``user_name``, else ``historyState.activeUserPovOwner``;
- ``active_region`` = ``regionState.manualActiveRegion``, the query's, ``historyState.activeRegion``,
  ``historyState.lastExtractedRegion``, ``regionState.recentRegions[0]`` (the first given; aliases
  resolved, ``resolveActiveRegionContext``) and ``adjacent_regions`` its ``adjacencyMap`` entry;
- ``story_segment`` = the order of ``timelineState.manualActiveSegmentId``, the query's
  ``story_segment`` (a segment id), ``historyState.activeStorySegmentId`` or the first of
  ``timelineState.recentSegmentIds`` (``resolveActiveStoryContext``).

``context`` becomes ``[previous user text, last assistant text]`` from the last three context
lines (BME's ``recallLlmContextMessages`` = 4 lines with the current message), as
``buildContextQueryBlend`` picks them. ``now`` (ISO or ms epoch) is the query's reference time.
Node embeddings go to ``embedding``; ``Dataset.notes["vector_model"]`` names their model
(``vector_model``, else ``vectorIndexState.modelScope``, else ``"st-bme-stored"``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.adapters import bme_nodes as bn
from pipeline.adapters import query_files
from pipeline.adapters.bme_js import as_list, js_string, record, unique_strings
from pipeline.adapters.bme_store import read_graph
from pipeline.adapters.common import EDGE_COLUMNS, finish, no_queries, without_empty_columns
from pipeline.adapters.workspace import qrels_table
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError, require_one_of
from pipeline.contract.schema import conform, dtypes, parse_timestamp

NODE_SCHEMA = dtypes(  # the columns whose type a graph's values may not show
    "nodes",
    (
        "embedding",
        "knowledge",
        "lex_names",
        "lex_fields",
        "scope_regions",
        "visibility",
        "story_time",
        "story_time_end",
        "parent_id",
        "scope_owner_type",
        "scope_owner",
        "scope_owner_key",
        "scope_region",
        "story_tense",
        "description",
        "status",
        "title",
    ),
)
QUERY_SCHEMA = dtypes(
    "queries",
    (
        "query_id",
        "text",
        "context",
        "viewer",
        "now",
        "doc_scope",
        "active_owner_keys",
        "active_owners",
        "active_user_owners",
        "active_region",
        "adjacent_regions",
        "story_segment",
    ),
)


def _state(graph: dict, key: str) -> dict:
    return record(graph.get(key))


def _region(graph: dict, preferred: str | None) -> tuple[str | None, list[str] | None]:
    """``resolveActiveRegionContext`` + ``resolveAdjacentRegions`` (aliases → canonical name), on
    the state as ``normalizeRegionState`` reads it (a scalar list is one item; an entry that is
    not an object has no neighbours or aliases)."""
    rs, hs = _state(graph, "regionState"), _state(graph, "historyState")
    adj = {}
    for name, entry in record(rs.get("adjacencyMap")).items():
        if name.strip():
            adj[name.strip()] = record(entry)
    alias = {}
    for name, entry in adj.items():
        alias[name.lower()] = name
        for a in unique_strings(entry.get("aliases")):
            alias[a.lower()] = name
    recent = unique_strings(rs.get("recentRegions"))
    cands = [
        rs.get("manualActiveRegion"),
        preferred,
        hs.get("activeRegion"),
        hs.get("lastExtractedRegion"),
    ]
    region = next((s for c in [*cands, *recent[:1]] if (s := js_string(c).strip())), "")
    if not region:
        return None, None
    region = alias.get(region.lower(), region)
    near = unique_strings((adj.get(region) or {}).get("adjacent"))
    return region, near or None


def _segment(graph: dict, preferred: str | None, order: dict[str, int]) -> int | None:
    tl, hs = _state(graph, "timelineState"), _state(graph, "historyState")
    cands = [tl.get("manualActiveSegmentId"), preferred, hs.get("activeStorySegmentId")]
    cands += unique_strings(tl.get("recentSegmentIds"))
    return next((order[s] for c in cands if (s := js_string(c).strip()) in order), None)


def _owners(graph: dict, char_name: str | None) -> tuple[list[str], list[str]]:
    """(owner keys, owner names) of the character knowledge owners named ``char_name``."""
    owners = _state(_state(graph, "knowledgeState"), "owners")
    name = (char_name or "").strip().lower()
    keys, names = [], []
    for key in sorted(owners):
        s = record(owners[key])
        aliases = {
            a.lower() for a in unique_strings([s.get("ownerName"), *as_list(s.get("aliases"))])
        }
        if name and s.get("ownerType") == "character" and name in aliases:
            keys.append(key.strip())
            names.append(js_string(s.get("ownerName")).strip())
    return keys, names


def _context(ctx, text: str, where: str, i: int) -> list[str] | None:
    """[previous user text, last assistant text] from the last three context lines."""
    if ctx is None:
        return None
    if not isinstance(ctx, list):
        raise DataError(
            where,
            "'context' must be a list",
            'write "context": ["[user]: ..."]',
            row=i,
            field="context",
        )
    lines = []
    for item in ctx[-3:]:
        if isinstance(item, dict):
            lines.append((str(item.get("role") or "").lower(), bn.strings(item.get("text"))))
        else:
            role, _, body = str(item).partition("]:")
            lines.append((role.strip("[ ").lower(), bn.strings(body)) if body else ("", []))
    assistant = next((t[0] for r, t in reversed(lines) if r == "assistant" and t), "")
    cur = " ".join(text.split()).lower()
    user = next(
        (
            t[0]
            for r, t in reversed(lines)
            if r == "user" and t and " ".join(t[0].split()).lower() != cur
        ),
        "",
    )
    return [user, assistant] if user or assistant else None


def _now(value, where: str, i: int):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return bn.ms(value, where, i, "now")
    return parse_timestamp(value, where, i, "now")


def query_row(r: dict, graph: dict, order: dict[str, int], where: str, i: int) -> dict:
    """One query's contract row with its scene state (the query's, else the graph's)."""
    text = str(r.get("text") or "")
    char = r.get("char_name") or None
    keys, names = _owners(graph, char)
    keys = r["active_owner_keys"] if "active_owner_keys" in r else keys
    region, adjacent = _region(graph, r.get("active_region"))
    user = r.get("user_name") or _state(graph, "historyState").get("activeUserPovOwner") or None
    return {
        "query_id": None if r.get("query_id") is None else str(r["query_id"]),
        "text": text,
        "context": _context(r.get("context"), text, where, i),
        "viewer": r.get("viewer", char),
        "now": _now(r.get("now"), where, i),
        "doc_scope": r.get("doc_scope"),
        "active_owner_keys": keys or None,
        "active_owners": r.get("active_owners")
        or list(dict.fromkeys(n for n in [char, *names] if n))
        or None,
        "active_user_owners": r.get("active_user_owners") or ([user] if user else None),
        "active_region": region,
        "adjacent_regions": r["adjacent_regions"] if "adjacent_regions" in r else adjacent,
        "story_segment": _segment(graph, r.get("story_segment"), order),
    }


def frames(graph: dict, where: str, skipped: Counter) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """(nodes, edges, segment orders) of a checked graph."""
    order = bn.segment_orders(graph, where)
    rows = bn.with_doc_ids(
        [bn.node_row(n, i, where, order) for i, n in enumerate(graph.get("nodes") or [])]
    )
    if not rows:
        raise DataError(
            where, "the graph has no nodes", "pass a graph ST-BME has extracted memories into"
        )
    for r, k in zip(rows, bn.knowledge(graph, rows)):
        r["knowledge"] = k
    nodes = pl.DataFrame(rows, schema_overrides=NODE_SCHEMA, infer_schema_length=None)
    if nodes["embedding"].null_count() == nodes.height:
        nodes = nodes.drop("embedding")
    if nodes["knowledge"].null_count() == nodes.height:
        nodes = nodes.drop("knowledge")
    e = bn.edge_rows(graph, where)
    edges = pl.DataFrame(e, schema=dtypes("edges", (*EDGE_COLUMNS, "inhibit", "valid_to")))
    ids = set(nodes["node_id"])
    keep = (
        edges["src"].is_in(list(ids))
        & edges["dst"].is_in(list(ids))
        & (edges["src"] != edges["dst"])
    )
    if int((~keep).sum()):
        skipped["edge_dangling_or_self"] += int((~keep).sum())
    return conform(nodes, "nodes", where), conform(edges.filter(keep), "edges", where), order


def load_queries(path: str, graph: dict, order: dict[str, int], fmt: str = "auto") -> pl.DataFrame:
    """The queries file's rows (``query_files`` formats; a SillyTavern chat's user messages carry
    its character and user names) with their scene state, in the contract (empty columns dropped)."""
    where = str(path)
    rows = [
        query_row(r, graph, order, where, i)
        for i, r in enumerate(query_files.query_rows(path, fmt))
    ]
    return conform(without_empty_columns(pl.DataFrame(rows, schema=QUERY_SCHEMA)), "queries", where)


def load(
    path: str,
    *,
    name: str = "bme",
    queries: str | None = None,
    qrels: str | None = None,
    limit_queries: int | None = None,
    vector_model: str | None = None,
    vectors: str | bool = "auto",
    queries_format: str = "auto",
) -> Dataset:
    """A Dataset from an ST-BME graph export, chat file (.jsonl) or sync file, with optional
    queries/qrels. ``vectors``: auto (the stored node embeddings when any node has one), true
    (required), false (ignored: the embed stage encodes ``text``)."""
    graph, files, kind = read_graph(path)
    skipped: Counter = Counter()
    nodes, edges, order = frames(graph, str(path), skipped)
    mode = str(vectors).lower()
    require_one_of("data.vectors", mode, ("auto", "true", "false"))
    if mode == "false" and "embedding" in nodes.columns:
        nodes = nodes.drop("embedding")
    if mode == "true" and "embedding" not in nodes.columns:
        raise DataError(
            str(path),
            "no node has an embedding (exportGraph nulls them)",
            "pass the chat or sync file, which keep them, or data.vectors=auto",
            field="embedding",
        )
    q = load_queries(queries, graph, order, queries_format) if queries else no_queries()
    model = (
        vector_model
        or str(_state(graph, "vectorIndexState").get("modelScope") or "")
        or "st-bme-stored"
    )
    notes = {"bme_store": f"{kind} (graph version {graph.get('version')})"}
    if "embedding" in nodes.columns:
        notes["vector_model"] = model
    return finish(
        name,
        nodes,
        q,
        [*files, *(Path(x) for x in (queries, qrels) if x)],
        limit_queries,
        edges=edges,
        qrels=qrels_table(queries, qrels, queries_format, nodes),
        skipped=skipped,
        notes=notes,
    )
