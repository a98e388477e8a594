"""``data=bme``: an ST-BME store in ST-BME's own format → the data contract, checked by hand.

The store is written field for field as ST-BME writes it, from
Youzini-afk/ST-Bionic-Memory-Ecology @ 590da3b6:
- node keys: ``graph/graph.js::createNode`` (id, type, level, parentId, childIds, seq, seqRange,
  archived, fields, embedding, importance, accessCount, updatedAt, lastAccessTime, createdTime,
  prevId, nextId, clusters, scope, storyTime, storyTimeSpan);
- edge keys: ``graph/graph.js::createEdge`` (id, fromId, toId, relation, strength, edgeType,
  createdTime, updatedAt, validAt, invalidAt, expiredAt, scope);
- graph keys: ``graph/graph.js::createEmptyGraph`` / ``exportGraph`` (version 9, knowledgeState
  from ``graph/knowledge-state.js::createDefaultKnowledgeOwnerState``, timelineState segments with
  ``order`` from ``graph/story-timeline.js``);
- the chat file: first line ``{"chat_metadata": {"st_bme_graph": ...}}``
  (``graph/graph-persistence.js::GRAPH_METADATA_KEY``);
- the sync file: ``{meta: {runtimeGraphVersion, knowledgeState, timelineState, ...}, nodes, edges,
  tombstones, state}`` (``sync/bme-sync.js::normalizeSyncSnapshot``, ``sync/bme-db.js`` meta keys).
"""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from pipeline.adapters import bme
from pipeline.contract.errors import DataError

T0 = 1767225600000  # 2026-01-01T00:00:00Z in ms


def scope(layer="objective", owner_type="", owner="", region=""):
    """``normalizeMemoryScope`` output (graph/memory-scope.js)."""
    return {
        "layer": layer,
        "ownerType": owner_type,
        "ownerId": owner,
        "ownerName": owner,
        "regionPrimary": region,
        "regionPath": [],
        "regionSecondary": [],
    }


def node(nid, typ, fields, seq, **kw):
    """A node as ``createNode`` + ``addNode`` write it."""
    n = {
        "id": nid,
        "type": typ,
        "level": 0,
        "parentId": None,
        "childIds": [],
        "seq": seq,
        "seqRange": [seq, seq],
        "archived": False,
        "fields": fields,
        "embedding": None,
        "importance": 5.0,
        "accessCount": 0,
        "updatedAt": T0 + seq * 1000,
        "lastAccessTime": T0 + seq * 1000,
        "createdTime": T0 + seq * 1000,
        "prevId": None,
        "nextId": None,
        "clusters": [],
        "scope": scope(),
        "storyTime": {"segmentId": "", "label": "", "tense": "unknown", "relation": "unknown",
                      "anchorLabel": "", "confidence": "medium", "source": "derived"},
        "storyTimeSpan": {"startSegmentId": "", "endSegmentId": "", "startLabel": "",
                          "endLabel": "", "mixed": False, "source": "derived"},
    }  # fmt: skip
    n.update(kw)
    return n


def edge(eid, a, b, relation="related", strength=0.8, edge_type=0, invalid_at=None):
    """An edge as ``createEdge`` writes it."""
    return {
        "id": eid,
        "fromId": a,
        "toId": b,
        "relation": relation,
        "strength": strength,
        "edgeType": edge_type,
        "createdTime": T0,
        "updatedAt": T0,
        "validAt": T0,
        "invalidAt": invalid_at,
        "expiredAt": None,
        "scope": scope(),
    }


def graph() -> dict:
    """Five nodes: a summary with a child, two events in a chain, a POV memory; three edges."""
    ev1 = node("ev1", "event", {"title": "Harbor fire", "summary": "The docks burn",
                                "participants": ["Aria", "Kael"]}, 3,
               embedding=[0.6, 0.8, 0.0], importance=7.0, accessCount=2, nextId="ev2",
               parentId="sum1", storyTime={"segmentId": "seg-b", "label": "night", "tense": "past"})  # fmt: skip
    ev2 = node("ev2", "event", {"title": "Rescue", "summary": "Kael pulls Aria out",
                                "visibility": "Aria, Kael"}, 5,
               embedding=[0.0, 0.0, 1.0], prevId="ev1", scope=scope(region="Old Town"),
               storyTimeSpan={"startSegmentId": "seg-a", "endSegmentId": "seg-b"})  # fmt: skip
    sum1 = node("sum1", "synopsis", {"title": "Chapter 1", "summary": "Fire and rescue"}, 5,
                level=1, childIds=["ev1"], seqRange=[3, 5], embedding=[1.0, 0.0, 0.0])  # fmt: skip
    ch = node("ch-aria", "character", {"name": "Aria", "state": "hurt", "traits": ["brave"]}, 1,
              embedding=[0.0, 1.0, 0.0])  # fmt: skip
    pov = node("pov1", "pov_memory", {"summary": "I owe Kael"}, 6, embedding=[0.0, 0.6, 0.8],
               scope=scope("pov", "character", "Aria"), archived=True)  # fmt: skip
    return {
        "version": 9,
        "lastProcessedSeq": 6,
        "nodes": [ev1, ev2, sum1, ch, pov],
        "edges": [
            edge("e1", "ch-aria", "ev1", "involved_in", 0.7),
            edge("e2", "ev2", "ev1", "contradicts", 0.5, edge_type=255),
            edge("e3", "ch-aria", "ev2", "updates", 0.9, invalid_at=T0 + 86_400_000),
        ],
        "knowledgeState": {
            "version": 1,
            "owners": {
                "character:aria": {
                    "ownerType": "character",
                    "ownerKey": "character:aria",
                    "ownerName": "Aria",
                    "nodeId": "ch-aria",
                    "aliases": ["Aria"],
                    "knownNodeIds": ["ev1"],
                    "mistakenNodeIds": ["sum1"],
                    "visibilityScores": {"ev2": 0.3},
                    "manualKnownNodeIds": [],
                    "manualHiddenNodeIds": ["pov1"],
                    "updatedAt": T0,
                    "lastSource": "extract",
                }
            },
        },  # fmt: skip
        "regionState": {
            "version": 1,
            "adjacencyMap": {},
            "manualActiveRegion": "",
            "recentRegions": [],
        },  # fmt: skip
        "timelineState": {
            "version": 1,
            "segments": [
                {"id": "seg-a", "label": "day", "order": 1},
                {"id": "seg-b", "label": "night", "order": 2},
            ],
            "nextOrder": 3,
            "manualActiveSegmentId": "seg-b",
            "lastExtractedSegmentId": "",
            "recentSegmentIds": [],
        },  # fmt: skip
        "historyState": {"activeRegion": "Old Town"},
        "summaryState": {"version": 1, "enabled": True, "entries": []},
    }


def write(tmp_path, doc, name="graph.json"):
    """``doc`` as JSON in ``tmp_path/name``; its path as a string."""
    p = tmp_path / name
    p.write_text(json.dumps(doc), encoding="utf-8")
    return str(p)


def by_id(ds) -> dict:
    """The node rows keyed by node_id."""
    return {r["node_id"]: r for r in ds.nodes.iter_rows(named=True)}


def test_export_nodes_fields_hierarchy_story_and_vectors(tmp_path):
    ds = bme.load(write(tmp_path, graph()))
    n = by_id(ds)
    assert set(n) == {"ev1", "ev2", "sum1", "ch-aria", "pov1"}
    e1 = n["ev1"]
    assert (e1["title"], e1["description"], e1["type"]) == (
        "Harbor fire",
        "The docks burn",
        "event",
    )
    assert e1["lex_names"] == ["Harbor fire"]
    assert e1["lex_fields"] == ["The docks burn", "Aria", "Kael"]  # participants expanded
    assert e1["text"] == "The docks burn | Harbor fire | Aria, Kael"  # buildNodeVectorText order
    assert json.loads(e1["fields"])["participants"] == ["Aria", "Kael"]
    assert (e1["importance"], e1["access_count"], e1["seq"]) == (7.0, 2, 3)
    assert e1["created_at"] == dt.datetime(2026, 1, 1, 0, 0, 3, tzinfo=dt.timezone.utc)
    assert e1["embedding"] == pytest.approx([0.6, 0.8, 0.0])
    # summary hierarchy: ev1's parent is sum1, so ev1 lies under document sum1
    assert (e1["parent_id"], e1["doc_id"], n["sum1"]["level"], n["sum1"]["doc_id"]) == (
        "sum1",
        "sum1/ev1",
        1,
        "sum1",
    )
    assert n["ev2"]["doc_id"] == "ev2" and n["sum1"]["seq"] == 5  # seqRange[1]
    # string story segments through timelineState.order: ev1 point seg-b → 2; ev2 span a..b → 1..2
    assert (e1["story_time"], e1["story_time_end"], e1["story_tense"]) == (2, 2, "past")
    assert (n["ev2"]["story_time"], n["ev2"]["story_time_end"]) == (1, 2)
    assert n["ch-aria"]["story_time"] is None and n["ch-aria"]["story_tense"] is None  # undated
    assert n["ev2"]["visibility"] == ["Aria", "Kael"]  # a comma string split
    assert n["ev2"]["scope_region"] == "Old Town" and n["ev2"]["scope_layer"] == "objective"
    assert (n["pov1"]["scope_layer"], n["pov1"]["scope_owner"], n["pov1"]["archived"]) == (
        "pov",
        "Aria",
        True,
    )
    assert n["pov1"]["scope_owner_key"] == "character:aria"
    assert ds.nodes.schema["embedding"] == pl.List(pl.Float32)
    assert ds.notes["vector_model"] == "st-bme-stored"


def test_export_edges_inhibit_windows_and_temporal_links(tmp_path):
    ds = bme.load(write(tmp_path, graph()))
    e = {(r["src"], r["dst"], r["relation"]): r for r in ds.edges.iter_rows(named=True)}
    assert set(e) == {
        ("ch-aria", "ev1", "involved_in"),
        ("ev2", "ev1", "contradicts"),
        ("ch-aria", "ev2", "updates"),
        ("ev1", "ev2", "temporal"),  # prevId/nextId: one link for the pair
    }
    assert e[("ev2", "ev1", "contradicts")]["inhibit"] is True  # edgeType 255
    assert e[("ch-aria", "ev1", "involved_in")]["weight"] == pytest.approx(0.7)
    assert e[("ev1", "ev2", "temporal")]["weight"] == pytest.approx(0.2)
    assert e[("ch-aria", "ev2", "updates")]["valid_to"] == dt.datetime(
        2026, 1, 2, tzinfo=dt.timezone.utc
    )  # invalidAt
    assert e[("ch-aria", "ev1", "involved_in")]["valid_to"] is None


def test_knowledge_entries_as_the_gate_reads_them(tmp_path):
    n = by_id(bme.load(write(tmp_path, graph())))

    def entry(nid):
        (k,) = n[nid]["knowledge"]
        return (k["owner"], k["known"], k["mistaken"], k["hidden"], k["score"])

    assert entry("ev1") == ("character:aria", True, False, False, 0.0)  # knownNodeIds
    assert entry("ev2") == ("character:aria", False, False, False, 0.3)  # visibilityScores
    assert entry("sum1") == ("character:aria", False, True, False, 0.0)  # mistakenNodeIds
    assert entry("ch-aria") == ("character:aria", True, False, False, 0.0)  # the owner's own node
    # own POV: the owner has a nodeId, so its node key is "character:aria#ch-aria", never equal to
    # the scope key "character:aria" (BME quirk): not anchored; manual-hidden
    assert entry("pov1") == ("character:aria", False, False, True, 0.0)


def test_queries_scene_state_from_the_graph(tmp_path):
    q = tmp_path / "q.jsonl"
    rows = [
        {"query_id": "a", "text": "Who set the fire?", "char_name": "Aria",
         "context": ["[user]: hello", "[assistant]: The harbor burns.", "[user]: Who set the fire?"]},
        {"query_id": "b", "text": "x", "now": T0, "active_owner_keys": []},
    ]  # fmt: skip
    q.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    ds = bme.load(write(tmp_path, graph()), queries=str(q))
    a, b = ds.queries.iter_rows(named=True)
    assert a["viewer"] == "Aria" and a["active_owner_keys"] == ["character:aria"]
    assert a["active_owners"] == ["Aria"]
    assert a["context"] == ["hello", "The harbor burns."]  # [previous user, last assistant]
    assert a["active_region"] == "Old Town" and a["story_segment"] == 2  # manual seg-b
    assert b["active_owner_keys"] is None and b["now"] == dt.datetime(
        2026, 1, 1, tzinfo=dt.timezone.utc
    )


def test_chat_file_and_sync_file_read_the_same_graph(tmp_path):
    g = graph()
    want = bme.load(write(tmp_path, g))
    chat = tmp_path / "chat.jsonl"
    head = {"user_name": "User", "character_name": "Aria", "chat_metadata": {"st_bme_graph": g}}
    chat.write_text(json.dumps(head) + "\n" + json.dumps({"mes": "hi"}) + "\n", encoding="utf-8")
    as_string = tmp_path / "chat2.jsonl"
    head2 = {"chat_metadata": {"st_bme_graph": json.dumps(g)}}  # a JSON string also counts
    as_string.write_text(json.dumps(head2) + "\n", encoding="utf-8")
    meta = {"runtimeGraphVersion": 9, "chatId": "c1", "revision": 3}
    for key in ("knowledgeState", "regionState", "timelineState"):
        meta[key] = g[key]
    meta["runtimeHistoryState"] = g["historyState"]
    snap = {"meta": meta, "nodes": g["nodes"], "edges": g["edges"], "tombstones": [],
            "state": {"lastProcessedFloor": 6, "extractionCount": 1}}  # fmt: skip
    sync = write(tmp_path, snap, "ST-BME_sync_c1.json")
    for path in (str(chat), str(as_string), sync):
        got = bme.load(path)
        assert got.nodes.equals(want.nodes), path
        assert got.edges.equals(want.edges), path


def test_unknown_version_and_missing_graph_are_one_line_errors(tmp_path):
    g = graph()
    g["version"] = 10
    with pytest.raises(DataError) as exc:
        bme.load(write(tmp_path, g))
    msg = str(exc.value)
    assert "graph.json" in msg and "version 10" in msg and "export the graph again" in msg
    assert "\n" not in msg
    chat = tmp_path / "c.jsonl"
    chat.write_text(json.dumps({"chat_metadata": {}}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="st_bme_graph"):
        bme.load(str(chat))


def test_vectors_auto_true_false(tmp_path):
    path = write(tmp_path, graph())
    assert "embedding" in bme.load(path).nodes.columns  # auto: stored vectors kept
    assert "embedding" not in bme.load(path, vectors=False).nodes.columns
    g = graph()
    for n in g["nodes"]:
        n["embedding"] = None  # as exportGraph writes them
    bare = write(tmp_path, g, "export.json")
    assert "embedding" not in bme.load(bare).nodes.columns
    with pytest.raises(DataError, match="no node has an embedding"):
        bme.load(bare, vectors=True)


def test_a_chat_file_is_both_the_graph_and_its_queries(tmp_path):
    chat = tmp_path / "chat.jsonl"
    head = {
        "user_name": "User",
        "character_name": "Aria",
        "chat_metadata": {"st_bme_graph": graph()},
    }
    msgs = [
        {"name": "Aria", "is_user": False, "send_date": "January 1, 2026 9:00am", "mes": "The harbor burns."},
        {"name": "User", "is_user": True, "send_date": "January 1, 2026 9:01am", "mes": "Who set the fire?"},
    ]  # fmt: skip
    chat.write_text("\n".join(json.dumps(r) for r in [head, *msgs]) + "\n", encoding="utf-8")
    ds = bme.load(str(chat), queries=str(chat))  # data.queries=<chat.jsonl>, detected by content
    (q,) = ds.queries.iter_rows(named=True)
    assert q["query_id"] == "m1" and q["text"] == "Who set the fire?"
    assert q["viewer"] == "Aria" and q["active_owner_keys"] == ["character:aria"]  # metadata line
    assert q["context"] == ["", "The harbor burns."]
    assert q["now"] == dt.datetime(2026, 1, 1, 9, 1, tzinfo=dt.timezone.utc)
