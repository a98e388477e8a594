"""A schema per store file (``pipeline/adapters/fields.py``): a wrong type, a non-finite number, an
impossible date or a symlink out of the store is one error line naming file, record and field
(exit 2, no traceback), or, for ReMe's ``meta/*.json`` signals, that signal missing with a warning.

Every field of every schema is tried on its own (``check``), then each store file through the
adapter and the CLI (``recall run``), with the exact line expected."""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline.adapters import fields, reme
from pipeline.cli.main import main
from pipeline.synth.reme_store import chunk_record, write_jsonl_zst
from tests.adapters.test_adapter_bme import graph as bme_graph
from tests.adapters.test_adapter_reme import A, B, build
from tests.helpers.paths import TESTS_DATA

OKS_STORE = TESTS_DATA / "oks_store"
FIX_INDEX = "rebuild ReMe's index (its reindex job), or move metadata/ away to read the notes"
FIX_BME = "export the graph again from ST-BME (graph panel → export)"
FIX_SYNC = "sync the chat again with ST-BME 590da3b (or pass its graph export)"

# per kind: a good value, and (bad value, the words the error line must use) pairs
KINDS = {
    "str": ("x", [(7, "a string")]),
    "int": (3, [("3", "an integer"), (2.5, "an integer"), (math.nan, "an integer"), (True, "an integer")]),
    "number": (1.5, [("1.5", "a finite number"), (math.nan, "a finite number"), (math.inf, "a finite number"), (-math.inf, "a finite number")]),
    "bool": (True, [("yes", "true or false"), (1, "true or false")]),
    "dict": ({}, [([1], "an object")]),
    "list": ([], [({"a": 1}, "a list")]),
    "datetime": ("2026-01-02T03:04:05Z", [("2026-02-30T00:00:00Z", "an ISO date-time of years 1–9999 UTC"), (20260102, "an ISO date-time of years 1–9999 UTC"), ("9999-12-31T23:59:59-23:59", "an ISO date-time of years 1–9999 UTC"), ("0001-01-01T00:00:00+01:00", "an ISO date-time of years 1–9999 UTC")]),
    "epoch_s": (1767225600.5, [(1e20, "a time in seconds since 1970 of years 1–9999"), (253402300800, "a time in seconds since 1970 of years 1–9999"), (math.nan, "a time in seconds since 1970 of years 1–9999"), ("1767225600", "a time in seconds since 1970 of years 1–9999")]),
    "list[str]": (["a"], [(["a", 1], "a list of strings"), ("a", "a list of strings")]),
    "list[number]": ([1.0, 2], [([1.0, math.nan], "a list of finite numbers"), ([math.inf], "a list of finite numbers"), ([1, "2"], "a list of finite numbers")]),
    "list[dict]": ([{}], [([1], "a list of objects")]),
    "list[date]": (["2026-01-02"], [(["2026-02-30"], "a list of YYYY-MM-DD dates"), ([20260102], "a list of YYYY-MM-DD dates")]),
    "map[int]": ({"a": 1}, [({"a": 1.5}, "an object of integers"), ({"a": math.nan}, "an object of integers")]),
    "map[id]": ({"a": "c1", "b": 2}, [({"a": 1.5}, "an object of string or integer ids"), ({"a": [1]}, "an object of string or integer ids")]),
}  # fmt: skip
CASES = [
    (schema, name, bad, what)
    for schema, table in fields.SCHEMAS.items()
    for name, f in table.items()
    for bad, what in KINDS[f.kind][1]
]


def _good(table: dict) -> dict:
    return {name: KINDS[f.kind][0] for name, f in table.items()}


def test_every_kind_of_every_schema_is_covered():
    assert {f.kind for t in fields.SCHEMAS.values() for f in t.values()} <= set(KINDS)


@pytest.mark.parametrize("schema", sorted(fields.SCHEMAS))
def test_a_good_record_passes_and_a_missing_required_field_is_named(schema):
    table = fields.SCHEMAS[schema]
    rec = _good(table)
    assert fields.check(rec, table, "s.json", "r1", "fix it") is rec
    for name, f in table.items():
        if f.required:
            with pytest.raises(fields.DataError) as e:
                fields.check({**rec, name: None}, table, "s.json", "r1", "fix it")
            assert (
                str(e.value) == f"s.json, row r1, field '{name}': '{name}' is missing; fix: fix it"
            )


@pytest.mark.parametrize(
    "schema, name, bad, what", CASES, ids=[f"{c[0]}.{c[1]}={c[2]!r}" for c in CASES]
)
def test_every_field_of_every_schema(schema, name, bad, what):
    table = fields.SCHEMAS[schema]
    rec = {**_good(table), name: bad}
    with pytest.raises(fields.DataError) as e:
        fields.check(rec, table, "s.json", "r1", "fix it")
    assert (
        str(e.value)
        == f"s.json, row r1, field '{name}': '{name}' is {bad!r}, not {what}; fix: fix it"
    )


def test_a_value_below_the_minimum_and_a_record_that_is_no_object():
    with pytest.raises(fields.DataError) as e:
        fields.check({"n": -1}, fields.OKS_RECALL_STATE, "s.json", "document", "fix it")
    assert str(e.value) == "s.json, row document, field 'n': 'n' is -1, below 0; fix: fix it"
    with pytest.raises(fields.DataError) as e:
        fields.check([1], fields.OKS_RECALL_STATE, "s.json", "document", "fix it")
    assert str(e.value) == "s.json, row document: record is [1], not an object; fix: fix it"


def _cli_error(args: list[str], tmp_path: Path, capsys) -> str:
    """The one ``error:`` line of ``recall run <args>`` (exit 2, no traceback)."""
    run = ["run", *args, "embed=hashing", "report=false", f"out_dir={tmp_path / 'run'}"]
    try:
        code = main([*run, f"cache_dir={tmp_path / 'cache'}"])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


# ReMe: the chunk store and the file graph (metadata/), with build()'s store

CHUNKS = "metadata/file_store/file_chunks_default_v1.jsonl.zst"
GRAPH = "metadata/file_graph/default.jsonl.zst"


def _reme_rows(path: Path) -> list[dict]:
    from pipeline.adapters.common import read_jsonl

    return read_jsonl(path)


REME_CASES = {
    "chunk start_line a string": (CHUNKS, 0, {"start_line": "5"}, "line 1", "start_line", "'start_line' is '5', not an integer"),
    "chunk end_line 0": (CHUNKS, 1, {"end_line": 0}, "line 2", "end_line", "'end_line' is 0, below 1"),
    "chunk text a number": (CHUNKS, 2, {"text": 3}, "line 3", "text", "'text' is 3, not a string"),
    "chunk id missing": (CHUNKS, 0, {"id": None}, "line 1", "id", "'id' is missing"),
    "chunk legacy embedding inf": (CHUNKS, 2, {"embedding": [math.inf, 0, 0, 0]}, "line 3", "embedding", "'embedding' is [inf, 0, 0, 0], not a list of finite numbers"),
    "file node st_mtime NaN": (GRAPH, 1, {"st_mtime": math.nan}, "line 2", "st_mtime", "'st_mtime' is nan, not a time in seconds since 1970 of years 1–9999"),
    "file node st_mtime 1e20": (GRAPH, 0, {"st_mtime": 1e20}, "line 1", "st_mtime", "'st_mtime' is 1e+20, not a time in seconds since 1970 of years 1–9999"),  # was an OverflowError
    "file node st_mtime negative": (GRAPH, 2, {"st_mtime": -5}, "line 3", "st_mtime", "'st_mtime' is -5, below 0"),
    "file node chunk_ids a string": (GRAPH, 0, {"chunk_ids": "abc"}, "line 1", "chunk_ids", "'chunk_ids' is 'abc', not a list of strings"),
    "file node front_matter a list": (GRAPH, 2, {"front_matter": ["x"]}, "line 3", "front_matter", "'front_matter' is ['x'], not an object"),
    "file link target_path a number": (GRAPH, 0, {"links": [{"target_path": 5}]}, "line 1 links[0]", "target_path", "'target_path' is 5, not a string"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REME_CASES))
def test_reme_index_fields_are_one_error_line(case, tmp_path, capsys):
    rel, i, change, row, field, problem = REME_CASES[case]
    store = tmp_path / "store"
    build(store)
    rows = _reme_rows(store / rel)
    rows[i].update(change)
    write_jsonl_zst(store / rel, rows)
    line = _cli_error(["data=reme", f"data.path={store}"], tmp_path, capsys)
    assert line == f"error: {store / rel}, row {row}, field '{field}': {problem}; fix: {FIX_INDEX}"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 70000.0])  # 70000 overflows float16
def test_reme_non_finite_chunk_vector_is_refused(bad, tmp_path, capsys):
    store = tmp_path / "store"
    build(store)
    rows = _reme_rows(store / CHUNKS)
    with np.errstate(over="ignore"):  # 70000 → float16 inf is the point
        rec = chunk_record(A, 5, 9, rows[0]["text"], [1.0, bad, 0.0, 0.0])
    rows[0]["_embedding_f16_b64"] = rec["_embedding_f16_b64"]
    write_jsonl_zst(store / CHUNKS, rows)
    line = _cli_error(["data=reme", f"data.path={store}"], tmp_path, capsys)
    assert line == (
        f"error: {store / CHUNKS}, row chunk {rows[0]['id']}, field '_embedding_f16_b64': "
        f"vector holds NaN or inf at component 1; fix: {FIX_INDEX}"
    )


META_CASES = {
    "access_log count NaN": ("access_log.json", lambda d: d["paths"][B].update(last_hit_count_30d=math.nan), f"paths[{B!r}]", "last_hit_count_30d", "'last_hit_count_30d' is nan, not an integer"),
    "access_log last_read impossible": ("access_log.json", lambda d: d["paths"][B].update(last_read="2025-02-30T10:00:00Z"), f"paths[{B!r}]", "last_read", "'last_read' is '2025-02-30T10:00:00Z', not an ISO date-time of years 1–9999 UTC"),
    "access_log entry a number": ("access_log.json", lambda d: d["paths"].update({B: 3}), f"paths[{B!r}]", None, "record is 3, not an object"),
    "access_log paths a list": ("access_log.json", lambda d: d.update(paths=[B]), "document", "paths", f"'paths' is [{B!r}], not an object"),
    "communities id a float": ("communities.json", lambda d: d["communities"].update({A: 1.5}), "document", "communities", "'communities' is {'daily/2026-01-01/jwt.md': 1.5, 'digest/auth/oauth.md': ..., not an object of string or integer ids"),  # a long value is cut at 60 characters
    "communities computed_at past 9999 in UTC": ("communities.json", lambda d: d.update(computed_at="9999-12-31T23:59:59-23:59"), "document", "computed_at", "'computed_at' is '9999-12-31T23:59:59-23:59', not an ISO date-time of years 1–9999 UTC"),  # was an OverflowError
    "access_log last_read before year 1 in UTC": ("access_log.json", lambda d: d["paths"][B].update(last_read="0001-01-01T00:00:00+05:00"), f"paths[{B!r}]", "last_read", "'last_read' is '0001-01-01T00:00:00+05:00', not an ISO date-time of years 1–9999 UTC"),
    "communities computed_at impossible": ("communities.json", lambda d: d.update(computed_at="2026-13-01T00:00:00Z"), "document", "computed_at", "'computed_at' is '2026-13-01T00:00:00Z', not an ISO date-time of years 1–9999 UTC"),
    "archived paths of numbers": ("archived.json", lambda d: d.update(version=1, paths=[1]), "document", "paths", "'paths' is [1], not a list of strings"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(META_CASES))
def test_reme_meta_signal_is_dropped_with_a_warning(case, tmp_path, caplog):
    """The design: a malformed signal file is that signal missing, with a warning (never an error);
    the warning names file, record and field."""
    name, edit, row, field, problem = META_CASES[case]
    build(tmp_path)
    path = tmp_path / "meta" / name
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="pipeline.adapters.reme_meta"):
        ds = reme.load(str(tmp_path))
    signal = name.removesuffix(".json")
    assert ds.freshness[signal]["status"] == "invalid"
    where = f"{path}, row {row}" + (f", field '{field}'" if field else "")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(where)]
    assert len(said) == 1 and said[0].startswith(f"{where}: {problem}; "), said
    assert said[0].endswith("; fix: rewrite or delete the file; the signal is treated as missing")
    column = {"access_log": "hits_30d", "communities": "community_id", "archived": "archived_store"}
    assert ds.nodes[column[signal]].null_count() == ds.nodes.height  # the signal is missing


def test_reme_feedback_refuses_to_merge_into_a_malformed_access_log(tmp_path):
    from pipeline.contract.errors import DataError
    from pipeline.writeback import reme as wb

    build(tmp_path)
    path = tmp_path / "meta" / "access_log.json"
    doc = json.loads(path.read_text())
    doc["paths"][B]["hit_days"] = ["2025-11-31"]
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError) as e:
        wb.read_log(path)
    assert str(e.value) == (
        f"{path}, row paths[{B!r}], field 'hit_days': 'hit_days' is ['2025-11-31'], not a list of "
        "YYYY-MM-DD dates; fix: rewrite or delete the file"
    )


# OKS: hook state, inject log, front matter dates (tests/data/oks_store)

FIX_STATE = "fix or delete it (OKS's hook writes {n: <turns>, seen: {<slug>: <turn>}})"
FIX_LOG = "fix or delete that line (OKS's hook appends one injection a line)"
GOOD_INJECT = {"session_id": "s1", "turn": 1, "agent_id": "a", "cwd": "/w", "prompt_hash": "h", "slugs": ["x"], "rels": [0.5], "injected_at": "2026-01-01T00:00:00Z"}  # fmt: skip

OKS_CASES = {
    "recall state n a string": (".oks/recall-state-s1.json", '{"n": "3", "seen": {}}', "document", "n", "'n' is '3', not an integer", FIX_STATE),
    "recall state n NaN": (".oks/recall-state-s1.json", '{"n": NaN, "seen": {}}', "document", "n", "'n' is nan, not an integer", FIX_STATE),
    "recall state seen turn a float": (".oks/recall-state-s1.json", '{"n": 2, "seen": {"a": 1.5}}', "document", "seen", "'seen' is {'a': 1.5}, not an object of integers", FIX_STATE),
    "recall state a list": (".oks/recall-state-s1.json", "[1]", "document", None, "record is [1], not an object", FIX_STATE),
    "inject turn Infinity": ("records/inject.jsonl", json.dumps(GOOD_INJECT) + "\n\n" + json.dumps({**GOOD_INJECT, "turn": math.inf}), "line 3", "turn", "'turn' is inf, not an integer", FIX_LOG),
    "inject rels NaN": ("records/inject.jsonl", json.dumps({**GOOD_INJECT, "rels": [math.nan]}), "line 1", "rels", "'rels' is [nan], not a list of finite numbers", FIX_LOG),
    "inject slugs a string": ("records/inject.jsonl", json.dumps({**GOOD_INJECT, "slugs": "x"}), "line 1", "slugs", "'slugs' is 'x', not a list of strings", FIX_LOG),
    "inject injected_at impossible": ("records/inject.jsonl", json.dumps({**GOOD_INJECT, "injected_at": "2026-04-31T10:00:00+00:00"}), "line 1", "injected_at", "'injected_at' is '2026-04-31T10:00:00+00:00', not an ISO date-time of years 1–9999 UTC", FIX_LOG),
    "inject session a number": ("records/inject.jsonl", json.dumps({**GOOD_INJECT, "session_id": 4}), "line 1", "session_id", "'session_id' is 4, not a string", FIX_LOG),
    "front matter impossible date": ("wiki/bad-date.md", "---\ntitle: Bad\ntype: concept\ncreated: 2026-02-30\n---\n# Bad\nbody\n", "line 4", "created", "'2026-02-30' is not a possible date (day is out of range for month)", "write a real date as YYYY-MM-DD"),
}  # fmt: skip


def _oks(tmp_path: Path) -> tuple[Path, list[str]]:
    store = tmp_path / "store"
    shutil.copytree(OKS_STORE, store)
    return store, ["data=oks", f"data.path={store}", f"data.queries={store / 'queries.jsonl'}"]


@pytest.mark.parametrize("case", list(OKS_CASES))
def test_oks_store_fields_are_one_error_line(case, tmp_path, capsys):
    rel, body, row, field, problem, fix = OKS_CASES[case]
    store, args = _oks(tmp_path)
    (store / rel).write_text(body, encoding="utf-8")
    line = _cli_error([*args, "preset=oks_team"], tmp_path, capsys)
    named = f", field '{field}'" if field else ""
    assert line == f"error: {store / rel}, row {row}{named}: {problem}; fix: {fix}"


def test_workspace_front_matter_impossible_date_is_one_error_line(tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("---\nupdated: 2025-04-31\n---\n# A\nmemory\n")
    (tmp_path / "q.jsonl").write_text('{"query_id": "q1", "text": "memory"}\n')
    args = ["data=workspace", f"data.path={notes}", f"data.queries={tmp_path / 'q.jsonl'}"]
    line = _cli_error(args, tmp_path, capsys)
    assert line == (
        f"error: {notes / 'a.md'}, row line 2, field 'updated': '2025-04-31' is not a possible "
        "date (day is out of range for month); fix: write a real date as YYYY-MM-DD"
    )


# symlinks out of a store

SYMLINK_FIX = "is a symbolic link; store files are read only inside the store; fix: replace it with the real file or folder"


@pytest.mark.parametrize(
    "rel", ["wiki/outside.md", "wiki/ops", ".oks/access.json", ".oks", "records/inject.jsonl", "profiles/goals/outside.md"]
)  # fmt: skip
def test_oks_symlink_out_of_the_store_is_refused(rel, tmp_path, capsys):
    store, args = _oks(tmp_path)
    target = tmp_path / "outside"
    src = store / rel
    if src.is_dir():
        shutil.move(src, target)
    else:
        target.write_text(
            "---\ntitle: Secret\ntype: goal\n---\nsecret\n" if rel.endswith(".md") else "{}"
        )
        src.unlink(missing_ok=True)
    src.symlink_to(target)
    line = _cli_error([*args, "preset=oks_team"], tmp_path, capsys)
    assert line == f"error: {src}: {SYMLINK_FIX}"


@pytest.mark.parametrize(
    "rel", [CHUNKS, GRAPH, "meta/communities.json", "metadata/embedding_store"]
)
def test_reme_symlink_out_of_the_store_is_refused(rel, tmp_path, capsys):
    store = tmp_path / "store"
    build(store)
    target = tmp_path / "outside"
    shutil.move(store / rel, target)
    (store / rel).symlink_to(target)
    line = _cli_error(["data=reme", f"data.path={store}"], tmp_path, capsys)
    assert line == f"error: {store / rel}: {SYMLINK_FIX}"  # a linked folder: the folder is named


def test_reme_symlinked_note_in_the_markdown_walk_is_refused(tmp_path, capsys):
    store = tmp_path / "store"
    (store / "daily").mkdir(parents=True)
    (store / "daily" / "a.md").write_text("# A\nmemory\n")
    (tmp_path / "secret.md").write_text("# S\nsecret\n")
    (store / "daily" / "s.md").symlink_to(tmp_path / "secret.md")
    line = _cli_error(["data=reme", f"data.path={store}"], tmp_path, capsys)
    assert line == f"error: {store / 'daily' / 's.md'}: {SYMLINK_FIX}"


# ST-BME: the graph's version, state and node fields; the sync manifest


def _bme_file(tmp_path: Path, doc) -> Path:
    p = tmp_path / "st-bme-graph.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p


BME_VERSION = "ST-BME graph version {} is not one this reader knows (1–9, ST-BME 590da3b); fix: export the graph again from ST-BME (graph panel → export), or upgrade the pipeline"


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, "9", True, 9.5])
def test_bme_version_not_finite_or_not_a_number(bad, tmp_path, capsys):
    p = _bme_file(tmp_path, {**bme_graph(), "version": bad})
    line = _cli_error(["data=bme", f"data.path={p}"], tmp_path, capsys)
    assert line == f"error: {p}, field 'version': " + BME_VERSION.format(repr(bad))


def _node_edit(i, **kw):
    def edit(g):
        g["nodes"][i].update(kw)

    return edit


BME_CASES = {
    "timelineState a list": (lambda g: g.update(timelineState=[1]), "graph", "timelineState", "'timelineState' is [1], not an object"),
    "knowledgeState a string": (lambda g: g.update(knowledgeState="x"), "graph", "knowledgeState", "'knowledgeState' is 'x', not an object"),
    "node parentId a number": (_node_edit(1, parentId=7), "nodes[1]", "parentId", "'parentId' is 7, not a string"),
    "node fields a list": (_node_edit(0, fields=["a"]), "nodes[0]", "fields", "'fields' is ['a'], not an object"),
    "node seqRange NaN": (_node_edit(0, seqRange=[1, math.nan]), "nodes[0]", "seqRange", "'seqRange' is [1, nan], not a list of finite numbers"),
    "node archived a string": (_node_edit(2, archived="no"), "nodes[2]", "archived", "'archived' is 'no', not true or false"),
    "node scope a string": (_node_edit(0, scope="pov"), "nodes[0]", "scope", "'scope' is 'pov', not an object"),
    "node a number": (lambda g: g["nodes"].__setitem__(0, 5), "nodes[0]", None, "record is 5, not an object"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BME_CASES))
def test_bme_graph_fields_are_one_error_line(case, tmp_path, capsys):
    edit, row, field, problem = BME_CASES[case]
    g = bme_graph()
    edit(g)
    p = _bme_file(tmp_path, g)
    line = _cli_error(["data=bme", f"data.path={p}"], tmp_path, capsys)
    named = f", field '{field}'" if field else ""
    assert line == f"error: {p}, row {row}{named}: {problem}; fix: {FIX_BME}"


SYNC_CASES = {
    "formatVersion a string": ({"formatVersion": "2"}, "manifest", "formatVersion", "'formatVersion' is '2', not an integer"),
    "formatVersion Infinity": ({"formatVersion": math.inf}, "manifest", "formatVersion", "'formatVersion' is inf, not an integer"),
    "chunks an object": ({"chunks": {"a": 1}}, "manifest", "chunks", "'chunks' is {'a': 1}, not a list of objects"),
    "meta a list": ({"meta": [1]}, "manifest", "meta", "'meta' is [1], not an object"),
    "chunk filename a number": ({"chunks": [{"kind": "nodes", "filename": 3}]}, "chunks[0]", "filename", "'filename' is 3, not a string"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SYNC_CASES))
def test_bme_sync_manifest_fields_are_one_error_line(case, tmp_path, capsys):
    change, row, field, problem = SYNC_CASES[case]
    g = bme_graph()
    (tmp_path / "ST-BME_sync_c.__0.json").write_text(json.dumps({"records": g["nodes"]}))
    manifest = {"kind": "st-bme-sync", "formatVersion": 2, "meta": {}}
    manifest["chunks"] = [{"kind": "nodes", "filename": "ST-BME_sync_c.__0.json"}]
    p = tmp_path / "ST-BME_sync_c.json"
    p.write_text(json.dumps({**manifest, **change}))
    line = _cli_error(["data=bme", f"data.path={p}"], tmp_path, capsys)
    assert line == f"error: {p}, row {row}, field '{field}': {problem}; fix: {FIX_SYNC}"


def test_bme_sync_chunk_records_not_a_list(tmp_path, capsys):
    (tmp_path / "ST-BME_sync_c.__0.json").write_text(json.dumps({"records": {"a": 1}}))
    p = tmp_path / "ST-BME_sync_c.json"
    p.write_text(json.dumps({"kind": "st-bme-sync", "formatVersion": 2, "chunks": [{"kind": "nodes", "filename": "ST-BME_sync_c.__0.json"}]}))  # fmt: skip
    line = _cli_error(["data=bme", f"data.path={p}"], tmp_path, capsys)
    chunk = tmp_path / "ST-BME_sync_c.__0.json"
    assert (
        line
        == f"error: {chunk}, row document, field 'records': 'records' is {{'a': 1}}, not a list; fix: {FIX_SYNC}"
    )
