"""The native-store values that still ended in tracebacks (issue 53), each in a store made here
with that one value: one error line naming file, record and field, or what the system itself does
with the value.

- ST-BME never rejects a list field holding a scalar: its normalisers (``graph/knowledge-state.js``
  ``uniqueIds`` / ``uniqueStrings``, ``graph/memory-scope.js`` ``normalizeScopeRegionList``,
  ``graph/story-timeline.js`` ``normalizeTimelineState``, @ 590da3b) read ``5`` as ``["5"]``, an
  adjacency entry that is not an object as one without neighbours, ``segments: 5`` as no
  segments. The adapter reads them the same way: the scalar form means what the list form means.
- A time no date of years 1–9999 can hold (``createdTime: 1e20``) is an error line.
- OKS never reads ``.oks/recall-state-.json`` (its hook names an empty session ``default``): the
  file is skipped with a warning.
(ReMe's ``st_mtime = 1e20`` and ``computed_at 9999-12-31T23:59:59-23:59`` are cases of
``test_store_fields.py``: an error line, and the signal missing with a warning.)"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil

import numpy as np
import pytest

from pipeline.adapters import bme, fields, oks, reme
from pipeline.adapters.bme_js import js_string, region_list, unique_ids, unique_strings
from pipeline.adapters.common import read_jsonl
from pipeline.synth.reme_store import write_jsonl_zst
from tests.adapters.test_adapter_bme import T0, by_id, graph, write
from tests.adapters.test_adapter_reme import TEXT, B, build
from tests.adapters.test_store_fields import _cli_error
from tests.helpers.paths import TESTS_DATA

OKS_STORE = TESTS_DATA / "oks_store"


def _owner(g: dict) -> dict:
    return g["knowledgeState"]["owners"]["character:aria"]


@pytest.fixture
def load(tmp_path):
    """Load a graph dict through the adapter (the file written as ST-BME exports it)."""

    def go(g: dict, queries: list[dict] | None = None):
        q = None
        if queries is not None:
            q = tmp_path / "q.jsonl"
            q.write_text("\n".join(json.dumps(r) for r in queries), encoding="utf-8")
        return bme.load(write(tmp_path, g), queries=str(q) if q else None)

    return go


def test_js_values_as_st_bme_reads_them():
    # String(v ?? "").trim(): numbers as JS prints them, booleans lower case, null dropped
    assert [js_string(v) for v in (5, 5.0, 2.5, True, None, [1, "a"], {"a": 1})] == [
        "5", "5", "2.5", "true", "", "1,a", "[object Object]"
    ]  # fmt: skip
    assert js_string(1e21) == "1e+21" and js_string(1e-7) == "1e-7"
    assert (
        unique_ids(5) == ["5"]
        and unique_ids(None) == []
        and unique_ids(["a", " a", "A"])
        == [
            "a",
            "A",
        ]
    )  # exact duplicates only
    assert unique_strings(["Aria", "aria ", 7]) == ["Aria", "7"]  # case-insensitive
    # normalizeScopeRegionList: split on its separators, lists walked, objects' text keys
    assert region_list(5) == ["5"]
    assert region_list("Harbor > Old Town, Docks") == ["Harbor", "Old Town", "Docks"]
    assert region_list([["a/b"], {"name": "C"}, True, "A"]) == ["a", "b", "C"]


def test_known_node_ids_scalar_is_one_id(load):
    g = graph()
    _owner(g)["knownNodeIds"] = 5  # was a TypeError: the id "5", no such node
    n = by_id(load(g))
    assert n["ev1"]["knowledge"][0]["known"] is False  # ["ev1"] is gone
    assert n["ch-aria"]["knowledge"][0]["known"] is True  # the owner's own node, as before
    g = graph()
    _owner(g)["knownNodeIds"] = "ev1"  # the scalar form of ["ev1"]
    assert by_id(load(g))["ev1"]["knowledge"] == by_id(load(graph()))["ev1"]["knowledge"]
    g = graph()
    _owner(g)["manualHiddenNodeIds"] = 7  # siblings: every id list of an owner
    _owner(g)["mistakenNodeIds"] = "ev2"
    n = by_id(load(g))
    assert n["pov1"]["knowledge"][0]["hidden"] is False and n["ev2"]["knowledge"][0]["mistaken"]


def test_owner_aliases_scalar_is_one_alias(load):
    g = graph()
    _owner(g)["aliases"] = 5  # was a TypeError: the alias "5"
    a, b = load(g, [{"query_id": "a", "text": "x", "char_name": "5"},
                    {"query_id": "b", "text": "x", "char_name": "Aria"}]).queries.iter_rows(named=True)  # fmt: skip
    assert a["active_owner_keys"] == ["character:aria"] and a["active_owners"] == ["5", "Aria"]
    assert b["active_owner_keys"] == ["character:aria"]  # ownerName still names the owner


def test_region_state_loose_values(load):
    g = graph()
    g["historyState"] = {}
    g["regionState"]["adjacencyMap"] = {"Old Town": "town", "Harbor": {"adjacent": "Old Town"}}
    g["regionState"]["recentRegions"] = "Harbor"  # was a TypeError: the region "Harbor"
    (q,) = load(g, [{"query_id": "a", "text": "x"}]).queries.iter_rows(named=True)
    assert q["active_region"] == "Harbor" and q["adjacent_regions"] == ["Old Town"]
    g["regionState"]["recentRegions"] = 5
    g["regionState"]["manualActiveRegion"] = "old town"  # an entry that is not an object
    (q,) = load(g, [{"query_id": "a", "text": "x"}]).queries.iter_rows(named=True)
    assert q["active_region"] == "Old Town" and "adjacent_regions" not in q  # was an AttributeError


def test_timeline_segments_not_a_list_is_no_timeline(load):
    g = graph()
    g["timelineState"]["segments"] = 5  # was a TypeError
    g["timelineState"]["recentSegmentIds"] = 5  # and so was this
    ds = load(g, [{"query_id": "a", "text": "x"}])
    assert ds.nodes["story_time"].null_count() == ds.nodes.height
    assert ds.queries.row(0, named=True).get("story_segment") is None


def test_timeline_segments_as_normalize_timeline_state_keeps_them(load):
    g = graph()
    g["timelineState"]["segments"] = [
        {"id": "seg-a", "label": "day"},  # no order: 1
        {"id": "seg-b", "label": "night", "order": "3.7"},  # Number("3.7") → trunc 3
        {"id": "seg-c", "order": 9},  # no label: dropped
        {"id": "seg-a", "label": "dup", "order": 5},  # the first of an id wins
    ]
    g["nodes"][0]["storyTime"]["segmentId"] = "seg-c"
    n = by_id(load(g))
    assert n["ev1"]["story_time"] is None  # seg-c is no segment
    assert (n["ev2"]["story_time"], n["ev2"]["story_time_end"]) == (1, 3)


def test_scope_region_path_scalar_is_one_region(load):
    g = graph()
    g["nodes"][0]["scope"]["regionPath"] = 5  # was a TypeError
    g["nodes"][1]["scope"]["regionPrimary"] = "Harbor/Old Town"  # a path: the last is primary
    g["nodes"][1]["scope"]["regionSecondary"] = "Docks; old town"
    n = by_id(load(g))
    assert (n["ev1"]["scope_region"], n["ev1"]["scope_regions"]) == ("5", ["5"])
    assert n["ev2"]["scope_region"] == "Old Town"
    assert n["ev2"]["scope_regions"] == ["Old Town", "Harbor", "Docks"]


EPOCH_FIX = "write the time in milliseconds since 1970 (what Date.now() gives)"
BME_TIMES = {
    "createdTime 1e20": (lambda g: g["nodes"][0].update(createdTime=1e20), "nodes[0]", "createdTime", "'createdTime' is 1e+20, not a ms epoch of years 1–9999", EPOCH_FIX),
    "lastAccessTime -1e17": (lambda g: g["nodes"][2].update(lastAccessTime=-1e17), "nodes[2]", "lastAccessTime", "'lastAccessTime' is -1e+17, not a ms epoch of years 1–9999", EPOCH_FIX),
    "edge invalidAt 1e20": (lambda g: g["edges"][1].update(invalidAt=1e20), "edges[1]", "invalidAt", "'invalidAt' is 1e+20, not a ms epoch of years 1–9999", EPOCH_FIX),
    "seq 1e20": (lambda g: g["nodes"][1].update(seq=1e20), "nodes[1]", "seq", "'seq' is 1e+20, past 2^53", "write seq as a whole number below 2^53"),
    "accessCount 1e19": (lambda g: g["nodes"][3].update(accessCount=1e19), "nodes[3]", "accessCount", "'accessCount' is 1e+19, past 2^53", "write accessCount as a whole number below 2^53"),
    "embedding 1e40": (lambda g: g["nodes"][2].update(embedding=[1.0, 1e40, 0.0]), "nodes[2]", "embedding", "'embedding' holds 1e+40, past float32's range", "write the vector ST-BME's embedding model returned"),  # was a silent inf
    "segment order 1e20": (lambda g: g["timelineState"]["segments"][0].update(order=1e20), "timelineState.segments[0]", "order", "segment order 1e+20 is past 2^53", "number the segments 1, 2, 3, ... (ST-BME's own order)"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BME_TIMES))
def test_bme_times_and_counts_out_of_range_are_one_error_line(case, tmp_path, capsys):
    edit, row, field, problem, fix = BME_TIMES[case]
    g = graph()
    edit(g)
    p = write(tmp_path, g)
    line = _cli_error(["data=bme", f"data.path={p}"], tmp_path, capsys)
    assert line == f"error: {p}, row {row}, field '{field}': {problem}; fix: {fix}"


def test_bme_query_now_out_of_range_is_one_error_line(tmp_path, capsys):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"query_id": "a", "text": "x", "now": 1e20}) + "\n")
    p = write(tmp_path, graph())
    args = ["data=bme", f"data.path={p}", f"data.queries={q}", "data.vectors=false"]
    line = _cli_error(args, tmp_path, capsys)
    assert (
        line
        == f"error: {q}, row 0, field 'now': 'now' is 1e+20, not a ms epoch of years 1–9999; fix: {EPOCH_FIX}"
    )


def test_bme_times_at_the_edges_of_the_range_load(load):
    g = graph()
    g["nodes"][0]["createdTime"] = 253402300799000  # 9999-12-31T23:59:59Z
    g["nodes"][1]["createdTime"] = -62135596800000  # 0001-01-01T00:00:00Z
    n = by_id(load(g))
    assert n["ev1"]["created_at"].isoformat() == "9999-12-31T23:59:59+00:00"
    assert n["ev2"]["created_at"].isoformat() == "0001-01-01T00:00:00+00:00"
    assert T0 == 1767225600000


def test_oks_recall_state_without_a_session_name_is_skipped_with_a_warning(tmp_path, caplog):
    store = tmp_path / "store"
    shutil.copytree(OKS_STORE, store)
    (store / ".oks").mkdir(exist_ok=True)
    (store / ".oks" / "recall-state-.json").write_text('{"n": 1, "seen": {"x": 1}}')
    (store / ".oks" / "recall-state-a b.json").write_text("not json")  # a name no hook writes
    (store / ".oks" / "recall-state-s9.json").write_text('{"n": 4, "seen": {"p": 3}}')
    with caplog.at_level(logging.WARNING, logger="pipeline.adapters.oks"):
        ds = oks.load(str(store))  # was an AttributeError
    said = sorted(r.getMessage() for r in caplog.records if "recall-state-" in r.getMessage())
    assert len(said) == 2 and said[0].startswith(f"{store / '.oks' / 'recall-state-.json'}: ")
    assert said[0].endswith("skipped, as OKS never reads it")
    assert ds.skipped["recall_state_no_session"] == 2
    state = ds.tables["recall_state"]
    assert ("s9", 4, "p", 3) in state.rows() and "" not in state["session"].to_list()


# siblings: integers past 64 bits (JSON has no limit; the columns do), ms epochs elsewhere

BIG = 10**30


def test_an_integer_past_64_bits_is_named_by_the_schema():
    for rec, field in (({"n": BIG}, "n"), ({"seen": {"a": 1, "b": -BIG}}, "seen")):
        bad = fields.problem(rec, fields.OKS_RECALL_STATE)
        assert bad == (
            field,
            f"'{field}' holds {BIG if field == 'n' else -BIG}, past the 64-bit integers",
        )
    assert (
        fields.problem({"n": 2**63 - 1, "seen": {"a": -(2**63)}}, fields.OKS_RECALL_STATE) is None
    )


def test_oks_and_reme_integers_past_64_bits_are_one_error_line(tmp_path, capsys):
    store = tmp_path / "oks"
    shutil.copytree(OKS_STORE, store)
    (store / ".oks").mkdir(exist_ok=True)
    state = store / ".oks" / "recall-state-s1.json"
    state.write_text(json.dumps({"n": 2, "seen": {"a": BIG}}))
    args = ["data=oks", f"data.path={store}", f"data.queries={store / 'queries.jsonl'}"]
    line = _cli_error([*args, "preset=oks_team"], tmp_path, capsys)
    assert line == (
        f"error: {state}, row document, field 'seen': 'seen' holds {BIG}, past the 64-bit "
        "integers; fix: fix or delete it (OKS's hook writes {n: <turns>, seen: {<slug>: <turn>}})"
    )  # was a polars ComputeError
    reme_store = tmp_path / "reme"
    build(reme_store)
    chunks = reme_store / "metadata/file_store/file_chunks_default_v1.jsonl.zst"
    rows = read_jsonl(chunks)
    rows[1]["end_line"] = BIG
    write_jsonl_zst(chunks, rows)
    line = _cli_error(["data=reme", f"data.path={reme_store}"], tmp_path, capsys)
    assert line.startswith(
        f"error: {chunks}, row line 2, field 'end_line': 'end_line' holds {BIG}, past the 64-bit integers; fix: rebuild"
    )


def test_reme_access_log_count_past_64_bits_is_the_signal_missing(tmp_path, caplog):
    build(tmp_path)
    path = tmp_path / "meta" / "access_log.json"
    doc = json.loads(path.read_text())
    doc["paths"][B]["last_hit_count_30d"] = BIG
    path.write_text(json.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="pipeline.adapters.reme_meta"):
        ds = reme.load(str(tmp_path))
    assert ds.freshness["access_log"]["status"] == "invalid"
    assert ds.nodes["hits_30d"].null_count() == ds.nodes.height
    assert any("past the 64-bit integers" in r.getMessage() for r in caplog.records)


def test_sillytavern_send_date_past_the_year_9999_is_one_error_line(tmp_path, capsys):
    chat = tmp_path / "chat.jsonl"
    msg = {"name": "U", "is_user": True, "mes": "where is the key", "send_date": 1e20}
    chat.write_text(
        json.dumps({"user_name": "U", "character_name": "Aria"}) + "\n" + json.dumps(msg) + "\n"
    )
    p = write(tmp_path, graph())
    args = ["data=bme", f"data.path={p}", f"data.queries={chat}", "data.vectors=false"]
    line = _cli_error(args, tmp_path, capsys)  # was an OSError (Value too large)
    assert line == (
        f"error: {chat}, row line 2, field 'send_date': send_date 1e+20 is not a ms epoch of years "
        "1–9999; fix: write the time in milliseconds since 1970, or as an ISO datetime"
    )


@pytest.mark.parametrize(
    "now, problem",
    [
        ("9999-12-31T23:59:59-23:59", "'now' value '9999-12-31T23:59:59-23:59' lies outside the years 1–9999 in UTC; fix: write a date-time of years 1–9999"),
        ("yesterday", "'now' value 'yesterday' is not a date; fix: write it as YYYY-MM-DD or an ISO 8601 datetime"),
    ],
)  # fmt: skip
def test_reme_data_now_unreadable_is_one_error_line(now, problem, tmp_path, capsys):
    store = tmp_path / "store"
    build(store)
    line = _cli_error(["data=reme", f"data.path={store}", f"data.now={now}"], tmp_path, capsys)
    assert line == f"error: data.now, field 'now': {problem}"  # was an OverflowError / ValueError


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 70000.0])  # 70000: float16 inf
def test_reme_embedding_cache_vector_not_finite_is_one_error_line(bad, tmp_path, capsys):
    """ReMe's npz cache (the vector of a chunk without its own, here b1's) is checked as the
    chunks' own vectors are; it was read as it was, NaN poisoning b1's cosines."""
    store = tmp_path / "store"
    build(store)
    npz = store / "metadata/embedding_store/default_v1_abc123def456.npz"
    key = hashlib.sha256(TEXT["b1"].encode()).hexdigest()
    np.savez(npz, keys=np.array([key]), embeddings=np.array([[0.6, bad, 0, 0]], dtype=np.float32))
    line = _cli_error(["data=reme", f"data.path={store}"], tmp_path, capsys)
    assert line == (
        f"error: {npz}, row embeddings[0]: vector of text {key[:12]}… holds NaN or inf; fix: "
        "rebuild ReMe's index (its reindex job), or move metadata/ away to read the notes"
    )


def test_a_line_separator_inside_a_json_lines_value_is_no_line_end(tmp_path):
    """JSON.stringify leaves U+2028/U+2029 raw (a SillyTavern message may hold one); a JSON Lines
    line ends at \\n (and \\r\\n) only."""
    from pipeline.adapters.common import read_jsonl

    p = tmp_path / "chat.jsonl"
    p.write_text('{"mes": "a\u2028b"}\r\n{"mes": "c\u2029d\u0085e"}\n', encoding="utf-8")
    assert read_jsonl(p) == [{"mes": "a\u2028b"}, {"mes": "c\u2029d\u0085e"}]
