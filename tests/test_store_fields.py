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
from pipeline.cli import main
from reme_store import chunk_record, write_jsonl_zst
from test_adapter_bme import graph as bme_graph
from test_adapter_reme import A, B, build

OKS_STORE = Path(__file__).parent / "data" / "oks_store"
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
    "datetime": ("2026-01-02T03:04:05Z", [("2026-02-30T00:00:00Z", "an ISO date-time"), (20260102, "an ISO date-time")]),
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
            assert str(e.value) == f"s.json, row r1, field '{name}': '{name}' is missing; fix: fix it"


@pytest.mark.parametrize("schema, name, bad, what", CASES, ids=[f"{c[0]}.{c[1]}={c[2]!r}" for c in CASES])
def test_every_field_of_every_schema(schema, name, bad, what):
    table = fields.SCHEMAS[schema]
    rec = {**_good(table), name: bad}
    with pytest.raises(fields.DataError) as e:
        fields.check(rec, table, "s.json", "r1", "fix it")
    assert str(e.value) == f"s.json, row r1, field '{name}': '{name}' is {bad!r}, not {what}; fix: fix it"


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
    from pipeline.adapters.reme_index import read_jsonl_zst

    return read_jsonl_zst(path)


REME_CASES = {
    "chunk start_line a string": (CHUNKS, 0, {"start_line": "5"}, "line 1", "start_line", "'start_line' is '5', not an integer"),
    "chunk end_line 0": (CHUNKS, 1, {"end_line": 0}, "line 2", "end_line", "'end_line' is 0, below 1"),
    "chunk text a number": (CHUNKS, 2, {"text": 3}, "line 3", "text", "'text' is 3, not a string"),
    "chunk id missing": (CHUNKS, 0, {"id": None}, "line 1", "id", "'id' is missing"),
    "chunk legacy embedding inf": (CHUNKS, 2, {"embedding": [math.inf, 0, 0, 0]}, "line 3", "embedding", "'embedding' is [inf, 0, 0, 0], not a list of finite numbers"),
    "file node st_mtime NaN": (GRAPH, 1, {"st_mtime": math.nan}, "line 2", "st_mtime", "'st_mtime' is nan, not a finite number"),
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
    "access_log last_read impossible": ("access_log.json", lambda d: d["paths"][B].update(last_read="2025-02-30T10:00:00Z"), f"paths[{B!r}]", "last_read", "'last_read' is '2025-02-30T10:00:00Z', not an ISO date-time"),
    "access_log entry a number": ("access_log.json", lambda d: d["paths"].update({B: 3}), f"paths[{B!r}]", None, "record is 3, not an object"),
    "access_log paths a list": ("access_log.json", lambda d: d.update(paths=[B]), "document", "paths", f"'paths' is [{B!r}], not an object"),
    "communities id a float": ("communities.json", lambda d: d["communities"].update({A: 1.5}), "document", "communities", "'communities' is {'daily/2026-01-01/jwt.md': 1.5, 'digest/auth/oauth.md': ..., not an object of string or integer ids"),  # a long value is cut at 60 characters
    "communities computed_at impossible": ("communities.json", lambda d: d.update(computed_at="2026-13-01T00:00:00Z"), "document", "computed_at", "'computed_at' is '2026-13-01T00:00:00Z', not an ISO date-time"),
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
    from pipeline.errors import DataError
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
