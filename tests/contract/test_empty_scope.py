"""An empty ``doc_scope`` list is an error at ingest, never the whole corpus (issue 13, item 3)."""

import json

import polars as pl

from pipeline.cli.main import main
from pipeline.ops.scope import scope_groups
from tests.helpers.paths import TINY_WS


def _run(args, tmp_path, capsys):
    try:
        code = main(
            [
                "run",
                *args,
                "embed=hashing",
                "report=false",
                f"out_dir={tmp_path / 'run'}",
                f"cache_dir={tmp_path / 'c'}",
            ]
        )
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_empty_doc_scope_in_a_queries_file_is_a_clear_error(tmp_path, capsys):
    q = tmp_path / "queries.jsonl"
    q.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"query_id": "q1", "text": "memory", "doc_scope": ["notes"]},
                {"query_id": "q2", "text": "graph", "doc_scope": []},
            ]
        )
        + "\n"
    )
    code, err = _run(
        ["data=workspace", f"data.path={TINY_WS / 'notes'}", f"data.queries={q}"], tmp_path, capsys
    )
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-800:]
    assert f"{q}, row 1, field 'doc_scope'" in lines[0] and "empty list" in lines[0]
    assert "fix: omit doc_scope" in lines[0]
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_empty_doc_scope_in_a_parquet_queries_table_is_a_clear_error(tmp_path, capsys):
    pl.DataFrame({"node_id": ["a"], "text": ["memory"], "doc_id": ["d"]}).write_parquet(
        tmp_path / "nodes.parquet"
    )
    pl.DataFrame(
        {"query_id": ["q1", "q2"], "text": ["memory", "memory"], "doc_scope": [None, []]},
        schema_overrides={"doc_scope": pl.List(pl.String)},
    ).write_parquet(tmp_path / "queries.parquet")
    code, err = _run(["data=parquet", f"data.path={tmp_path}"], tmp_path, capsys)
    assert (
        code == 2 and "queries.parquet, row 1, field 'doc_scope'" in err and "Traceback" not in err
    )


def test_an_empty_scope_passed_in_directly_sees_nothing():
    nodes = pl.DataFrame({"node_id": ["a", "b"], "text": ["x", "y"], "doc_id": ["d1", "d2"]})
    queries = pl.DataFrame(
        {"query_id": ["q1", "q2"], "text": ["x", "y"], "doc_scope": [[], None]},
        schema_overrides={"doc_scope": pl.List(pl.String)},
    )
    groups = {key: rows.tolist() for key, rows, _qs in scope_groups(nodes, queries)}
    assert groups == {((), None): [], (None, None): [0, 1]}
