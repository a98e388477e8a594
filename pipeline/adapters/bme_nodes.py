"""ST-BME graph nodes and edges → the contract's node and edge rows (ST-BME @ 590da3b).

Field by field (``docs/presets.md``, ``bme``: store field → pipeline step):

- ``id`` → ``node_id``; ``type``; ``importance`` (0–10, missing 5 as ``createNode``);
  ``createdTime`` / ``updatedAt`` / ``lastAccessTime`` (ms epoch) → ``created_at`` /
  ``updated_at`` / ``last_access_at``; ``accessCount`` → ``access_count``; ``archived``;
  ``seqRange[1]`` (else ``seq``) → ``seq`` (BME orders by ``seqRange[1]``), ``seq`` → ``floor``
  (the chat floor; scene reconstruction's nearest events);
- ``fields`` kept whole as JSON (``fields``), and split as BME reads them: ``name``/``title`` →
  ``title`` and ``lex_names``; ``summary``/``insight``/``state``/``traits``/``participants``/
  ``status`` → ``lex_fields`` (``retriever.js::computeLexicalScore``'s two field lists, arrays
  expanded); ``summary`` (else ``insight``) → ``description``; ``status``; ``visibility`` (list or
  comma string) → ``visibility``; ``text`` = the fields as ``vector-index.js::buildNodeVectorText``
  lays them out (without its scope suffix);
- ``embedding`` → ``embedding`` (float32; bring your own vectors);
- ``level`` / ``parentId`` → ``level`` / ``parent_id`` (summary hierarchy); ``doc_id`` = the path
  of ids along ``parentId`` from the topmost summary down to the node (``sum1/ev1``; a node without
  a parent: its id), so a ``doc_scope`` of a summary covers what it summarises;
- ``scope`` → ``scope_layer``, ``scope_owner_type``, ``scope_owner`` (ownerName, else ownerId),
  ``scope_owner_key`` (``memory-scope.js::getScopeOwnerKey``), ``scope_region`` (regionPrimary),
  ``scope_regions`` (regionPrimary + regionPath + regionSecondary);
- ``storyTime.segmentId`` / ``storyTimeSpan.{start,end}SegmentId`` (strings) → ``story_time`` /
  ``story_time_end`` through ``timelineState.segments[].order`` (``getTimelineSegmentOrder``: an
  unknown id or order 0 is no order); ``storyTime.tense`` → ``story_tense``, only for a node that
  has a story time (segment id or label), as ``classifyStoryTemporalBucket`` checks that first.

Edges: ``fromId``/``toId`` → ``src``/``dst``, ``strength`` → ``weight`` (null: the graph stage's
default, BME's 0.8), ``edgeType`` 255 → ``inhibit``, ``relation``, the earlier of ``invalidAt`` /
``expiredAt`` → ``valid_to`` (``graph.js::isEdgeActive``; ``validAt`` is not checked by BME), and
every ``prevId``/``nextId`` pair once as a ``temporal`` edge of weight 0.2
(``buildTemporalAdjacencyMap``'s synthetic links; the graph stage then derives no chain of its own).
"""

from __future__ import annotations

import datetime as dt
import json
import math

from pipeline.adapters import fields
from pipeline.adapters.bme_js import js_number, js_string, record, region_list, unique_ids
from pipeline.contract.errors import DataError

LEX_NAMES = ("name", "title")  # retriever.js computeLexicalScore primary fields
LEX_FIELDS = ("summary", "insight", "state", "traits", "participants", "status")
VECTOR_KEYS = (  # vector-index.js buildNodeVectorText preferredKeys
    "summary", "insight", "title", "name", "state", "traits", "constraint", "goal",
    "participants", "suggestion", "status", "scope",
)  # fmt: skip
INHIBIT_EDGE_TYPE = 255
TEMPORAL_LINK_STRENGTH = 0.2  # settings-defaults.js recallTemporalLinkStrength
FLOAT32_MAX = 3.4028234663852886e38  # the embedding column's float32


def ms(value, where: str, row, field: str) -> dt.datetime | None:
    """A ms-epoch number as a UTC datetime (None stays None); anything else, or a time outside
    the years 1–9999 (``1e20``), is a DataError."""
    if value is None:
        return None
    if not fields.finite_number(value):
        raise DataError(
            where, f"'{field}' is {value!r}, not a ms epoch", "write a number", row=row, field=field
        )
    t = fields.epoch_utc(value / 1000.0)
    if t is None:
        raise DataError(
            where,
            f"'{field}' is {value!r}, not a ms epoch of years 1–9999",
            "write the time in milliseconds since 1970 (what Date.now() gives)",
            row=row,
            field=field,
        )
    return t


def strings(value) -> list[str]:
    """BME's ``collectNodeLexicalTexts`` for one field: a trimmed string, or an array's strings."""
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    return []


def _vector_part(key: str, value, preferred: bool) -> str | None:
    if value is None or value == "" or (isinstance(value, list) and not value):
        return None
    if isinstance(value, list):
        body = ", ".join(map(str, value))
    elif isinstance(value, dict):
        body = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        body = str(value)
    return body if preferred else f"{key}: {body}"


def vector_text(fields: dict) -> str:
    """The fields part of ``buildNodeVectorText``: preferred keys first, then the rest as ``key: value``."""
    parts = [_vector_part(k, fields.get(k), True) for k in VECTOR_KEYS]
    parts += [
        _vector_part(k, v, False)
        for k, v in fields.items()
        if k not in VECTOR_KEYS and k != "embedding"
    ]
    return " | ".join(p for p in parts if p).strip()


def _path(nid: str, parent: dict[str, str | None]) -> str:
    """``root/…/parent/nid`` along ``parentId`` (an unknown parent or a cycle ends the path)."""
    path, cur = [nid], nid
    while parent.get(cur) and parent[cur] in parent and parent[cur] not in path:
        cur = parent[cur]
        path.append(cur)
    return "/".join(reversed(path))


def _scope(scope) -> dict:
    """``normalizeMemoryScope`` (the parts recall reads): layer, owner, region tokens."""
    s = record(scope)
    layer = "pov" if s.get("layer") == "pov" else "objective"
    otype = js_string(s.get("ownerType")).strip() if layer == "pov" else ""
    otype = otype if otype in ("character", "user") else ""
    oid = js_string(s.get("ownerId") or s.get("ownerName")).strip() if otype else ""
    oname = js_string(s.get("ownerName")).strip() if otype else ""
    prim, path = region_list(s.get("regionPrimary")), region_list(s.get("regionPath"))
    path = path or (prim if len(prim) > 1 else [])
    region = prim[-1] if prim else (path[-1] if path else "")
    taken = {t.lower() for t in [region, *path]}
    sec = [t for t in region_list(s.get("regionSecondary")) if t.lower() not in taken]
    tokens = list(dict.fromkeys([region, *path, *sec]) if region or path or sec else [])
    return {
        "scope_layer": layer,
        "scope_owner_type": otype or None,
        "scope_owner": (oname or oid) or None,
        "scope_owner_key": f"{otype}:{oid.lower()}" if otype and oid else None,
        "scope_region": region or None,
        "scope_regions": [t for t in tokens if t] or None,
    }


def _story(node: dict, order: dict[str, int]) -> dict:
    st = node.get("storyTime") if isinstance(node.get("storyTime"), dict) else {}
    span = node.get("storyTimeSpan") if isinstance(node.get("storyTimeSpan"), dict) else {}
    seg, start, end = (
        js_string(x).strip()
        for x in (st.get("segmentId"), span.get("startSegmentId"), span.get("endSegmentId"))
    )
    dated = any(
        js_string(x).strip()
        for x in (seg, st.get("label"), start, span.get("startLabel"), end, span.get("endLabel"))
    )
    point = order.get(seg)
    first = order.get(start, point) if start in order else point
    last = order.get(end, point) if end in order else point
    both = dated and first is not None and last is not None  # else BME's "temporal-unknown"
    return {
        "story_time": first if both else None,
        "story_time_end": last if both else None,
        "story_tense": (str(st.get("tense") or "unknown").strip() or "unknown") if dated else None,
    }


def segment_orders(graph: dict, where: str) -> dict[str, int]:
    """``timelineState.segments`` as ``normalizeTimelineState`` keeps them: id → order. A segment
    needs an id and a label (the first of an id wins); its order is ``max(1, trunc(order))``, 1 when
    not a number; ``segments`` that is not a list holds none. An order past 2^53 is a DataError."""
    tl = record(graph.get("timelineState"))
    out: dict[str, int] = {}
    segs = tl.get("segments") if isinstance(tl.get("segments"), list) else []
    for i, seg in enumerate(segs):
        sid = js_string(record(seg).get("id")).strip()
        if not sid or not js_string(record(seg).get("label")).strip() or sid in out:
            continue
        o = js_number(seg.get("order")) if "order" in seg else math.nan
        if math.isfinite(o) and abs(o) > 2**53:
            raise DataError(
                where,
                f"segment order {seg.get('order')!r} is past 2^53",
                "number the segments 1, 2, 3, ... (ST-BME's own order)",
                row=f"timelineState.segments[{i}]",
                field="order",
            )
        out[sid] = max(1, math.trunc(o)) if math.isfinite(o) else 1
    return out


def _embedding(value, where: str, row: str) -> list[float] | None:
    """The stored vector; not a non-empty list of numbers, or one past float32's range (the
    column's width: ``1e40`` would be ``inf`` and poison every cosine), is a DataError."""
    if value is None:
        return None
    ok = isinstance(value, list) and value and all(map(fields.finite_number, value))
    if not ok:
        raise DataError(
            where,
            "'embedding' is not a list of finite numbers",
            "write null or a float array",
            row=row,
            field="embedding",
        )
    big = next((x for x in value if abs(x) > FLOAT32_MAX), None)
    if big is not None:
        raise DataError(
            where,
            f"'embedding' holds {big!r}, past float32's range",
            "write the vector ST-BME's embedding model returned",
            row=row,
            field="embedding",
        )
    return [float(x) for x in value]


def _number(value, default, where: str, row: str, field: str, integer: bool = False):
    """A finite number (``default`` when absent); with ``integer``, one of magnitude at most 2^53
    (JavaScript's exact integers; the columns are 64-bit). Anything else is a DataError."""
    if value is None:
        return default
    if not fields.finite_number(value):
        raise DataError(
            where,
            f"'{field}' is {value!r}, not a number",
            f"write {field} as a number",
            row=row,
            field=field,
        )
    if integer and abs(value) > 2**53:
        raise DataError(
            where,
            f"'{field}' is {value!r}, past 2^53",
            f"write {field} as a whole number below 2^53",
            row=row,
            field=field,
        )
    return value


def node_row(node: dict, i: int, where: str, order: dict[str, int]) -> dict:
    """One node's contract row (without ``doc_id`` and ``knowledge``)."""
    if not isinstance(node, dict) or not isinstance(node.get("id"), str) or not node["id"].strip():
        raise DataError(
            where, "node has no string 'id'", "give every node an id", row=f"nodes[{i}]", field="id"
        )
    f, row = record(node.get("fields")), f"nodes[{i}]"
    rng = node.get("seqRange")
    seq = _number(node.get("seq"), 0, where, row, "seq", True)
    end = rng[1] if isinstance(rng, list) and len(rng) == 2 else seq
    vis = f.get("visibility")
    vis = [v.strip() for v in vis.split(",") if v.strip()] if isinstance(vis, str) else vis
    names, lex = (
        [x for k in LEX_NAMES for x in strings(f.get(k))],
        [x for k in LEX_FIELDS for x in strings(f.get(k))],
    )
    return {
        "node_id": node["id"],
        "text": vector_text(f),
        "title": (strings(f.get("title")) or strings(f.get("name")) or [None])[0],
        "description": (strings(f.get("summary")) or strings(f.get("insight")) or [None])[0],
        "status": (strings(f.get("status")) or [None])[0],
        "type": None if node.get("type") is None else str(node["type"]),
        "importance": float(_number(node.get("importance"), 5.0, where, row, "importance")),
        "created_at": ms(node.get("createdTime"), where, row, "createdTime"),
        "updated_at": ms(node.get("updatedAt"), where, row, "updatedAt"),
        "last_access_at": ms(
            node.get("lastAccessTime", node.get("createdTime")), where, row, "lastAccessTime"
        ),
        "access_count": int(_number(node.get("accessCount"), 0, where, row, "accessCount", True)),
        "archived": bool(node.get("archived")),
        "visibility": [str(v) for v in vis] if isinstance(vis, list) else None,
        "seq": int(_number(end, seq, where, row, "seqRange[1]", True)),
        "floor": int(seq),
        "level": int(_number(node.get("level"), 0, where, row, "level", True)),
        "parent_id": node.get("parentId") or None,
        "lex_names": names,
        "lex_fields": lex,
        "fields": json.dumps(f, ensure_ascii=False, sort_keys=True),
        "embedding": _embedding(node.get("embedding"), where, row),
        **_scope(node.get("scope")),
        **_story(node, order),
    }


def with_doc_ids(rows: list[dict]) -> list[dict]:
    """Each row's ``doc_id``: its ancestors' ids and its own along ``parentId``, joined by "/"
    (``sum1/ev1``), so ``doc_scope=["sum1"]`` covers a summary and everything under it and no two
    nodes share a document (the graph stage derives no chain: BME's own links are its edges)."""
    parent = {r["node_id"]: r["parent_id"] for r in rows}
    return [{**r, "doc_id": _path(r["node_id"], parent)} for r in rows]


def _ids(values) -> set[str]:
    """``uniqueIds`` as a set (a scalar is one id, as in ST-BME)."""
    return set(unique_ids(values))


def knowledge(graph: dict, rows: list[dict]) -> list[list[dict] | None]:
    """Per node, one entry per knowledge owner with state: ``{owner, known, mistaken, hidden, score}``,
    as ``knowledge-state.js::computeKnowledgeGateForSingleOwner`` derives them (known = manual-known,
    known, the owner's own character node, or a POV node whose owner key equals the owner's node key)."""
    owners = record(record(graph.get("knowledgeState")).get("owners"))
    out: list[list[dict] | None] = [[] for _ in rows]
    for key in sorted(owners):
        s = record(owners[key])
        known = _ids(s.get("knownNodeIds")) | _ids(s.get("manualKnownNodeIds"))
        mistaken, hidden = _ids(s.get("mistakenNodeIds")), _ids(s.get("manualHiddenNodeIds"))
        scores = record(s.get("visibilityScores"))
        node_id = js_string(s.get("nodeId")).strip()
        own = js_string(s.get("ownerKey")).strip() or key
        own_key = (
            f"character:{js_string(s.get('ownerName')).strip().lower()}#{node_id}"
            if node_id
            else own
        )
        for r, entries in zip(rows, out):
            nid = r["node_id"]
            anchored = nid in known or (r["type"] == "character" and node_id == nid)
            anchored |= r["scope_layer"] == "pov" and r["scope_owner_key"] == own_key
            sc = js_number(scores[nid]) if nid in scores else math.nan  # clampScore
            sc = min(1.0, max(0.0, sc)) if math.isfinite(sc) else 0.0
            entries.append(
                {
                    "owner": key.strip(),
                    "known": anchored,
                    "mistaken": nid in mistaken,
                    "hidden": nid in hidden,
                    "score": sc,
                }
            )
    return [e or None for e in out]


def edge_rows(graph: dict, where: str) -> list[dict]:
    """The graph's edges, plus one ``temporal`` edge per prevId/nextId pair."""
    out = []
    for i, e in enumerate(graph.get("edges") or []):
        if not isinstance(e, dict) or not e.get("fromId") or not e.get("toId"):
            raise DataError(
                where,
                "edge has no fromId/toId",
                "give every edge both ends",
                row=f"edges[{i}]",
                field="fromId",
            )
        ends = [
            ms(e.get(k), where, f"edges[{i}]", k) for k in ("invalidAt", "expiredAt") if e.get(k)
        ]
        strength = _number(e.get("strength"), None, where, f"edges[{i}]", "strength")
        out.append(
            {
                "src": str(e["fromId"]),
                "dst": str(e["toId"]),
                "relation": str(e.get("relation") or "related"),
                "weight": None if strength is None else float(strength),
                "inhibit": e.get("edgeType") == INHIBIT_EDGE_TYPE,
                "valid_to": min(ends) if ends else None,
            }
        )
    pairs = set()
    for n in graph.get("nodes") or []:
        for nb in (n.get("prevId"), n.get("nextId")):
            if isinstance(nb, str) and nb and nb != n["id"]:
                pairs.add(tuple(sorted((n["id"], nb))))
    out += [
        {
            "src": a,
            "dst": b,
            "relation": "temporal",
            "weight": TEMPORAL_LINK_STRENGTH,
            "inhibit": False,
            "valid_to": None,
        }
        for a, b in sorted(pairs)
    ]
    return out
