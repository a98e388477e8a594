"""Query and qrels files in the formats users have (pipeline/adapters/query_files.py): text lines,
JSON Lines, OKS recall-case/v1 (queries and qrels), SillyTavern chats; errors naming file, line and
field; ``import-trec --qrels`` with the ``data.qrels`` formats; ``recall oks-eval``."""

import datetime as dt
import json
import math

import polars as pl
import pytest

from pipeline.adapters import bme, oks, query_files, workspace
from pipeline.contract.errors import ConfigError, DataError
from pipeline.report import import_run, write_qrels, write_run
from pipeline.report.oks_eval import case_metrics, evaluate_run
from tests.helpers.paths import REPO

OKS_STORE = REPO / "tests" / "data" / "oks_store"

CASES = """schema_version: recall-case/v1
dataset_id: unit
version: '1'
cases:
- case_id: c1
  query: retry backoff jitter
  relevant:
  - retry-with-backoff
- case_id: c2
  query: deploy rollback
  goal: active
  relevant: [deploy-checklist, not-a-page]
  forbidden: [old-notes]
"""

CHAT = [
    {"user_name": "Ann", "character_name": "Seraphina", "create_date": "2025-12-04@10h05m"},
    {"name": "Seraphina", "is_user": False, "send_date": "December 4, 2025 10:05am",
     "mes": "Welcome to the glade."},
    {"name": "Ann", "is_user": True, "send_date": "December 4, 2025 10:06pm",
     "mes": "Where is the old farm?"},
    {"name": "Seraphina", "is_user": False, "send_date": 1764842820000, "mes": "Past the river."},
    {"name": "Ann", "is_user": True, "is_system": True, "mes": "(hidden note)"},
    {"name": "Ann", "is_user": True, "send_date": "2025-12-04T10:08:00Z",
     "mes": "And the budget for it?"},
]  # fmt: skip


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(path, rows):
    return _write(path, "".join(json.dumps(r) + "\n" for r in rows))


# --- queries ---------------------------------------------------------------------------------


def test_text_lines_are_queries_q1_to_qn(tmp_path):
    p = _write(tmp_path / "q.txt", "where is the farm\n\n  budget for the farm  \n")
    assert query_files.detect(p) == "text"
    q = workspace.load_queries(p)
    assert q.rows() == [("q1", "where is the farm"), ("q2", "budget for the farm")]
    p = _write(tmp_path / "ids.tsv", "a7\tfirst query\nb9\tsecond\tone\n")
    assert workspace.load_queries(p).rows() == [("a7", "first query"), ("b9", "second\tone")]


def test_jsonl_with_optional_fields(tmp_path):
    rows = [
        {"query_id": 1, "text": "farm", "group": "g", "now": "2025-01-02"},
        {"query_id": "x", "text": "budget", "doc_scope": ["a.md"]},
    ]
    q = workspace.load_queries(_jsonl(tmp_path / "q.jsonl", rows))
    assert q["query_id"].to_list() == ["1", "x"] and q["group"].to_list() == ["g", None]
    assert q["now"][0] == dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc)
    assert q["doc_scope"].to_list() == [None, ["a.md"]]


def test_recall_case_gives_queries_goals_and_qrels_on_an_oks_store(tmp_path):
    p = _write(tmp_path / "eval.yaml", CASES)
    ds = oks.load(str(OKS_STORE), queries=str(p))  # data.qrels unset: the cases' relevant lists
    assert ds.queries.select("query_id", "text").rows() == [
        ("c1", "retry backoff jitter"),
        ("c2", "deploy rollback"),
    ]
    # goal none (OKS eval's default) = no goal reorder; active = the instance's active goals
    active = oks.goal_slugs(oks.load_goals(OKS_STORE), "active")
    assert ds.queries["goals"].to_list() == [[], active]
    assert sorted(ds.qrels.rows()) == [
        ("c1", "computing/retry-with-backoff.md", 1),
        ("c2", "not-a-page", 1),  # a slug the wiki lacks stays judged (trec_eval's convention)
        ("c2", "ops/deploy-checklist.md", 1),
    ]
    assert str(p) in ds.fingerprints


def test_recall_case_as_qrels_next_to_a_jsonl_queries_file(tmp_path):
    cases = _write(tmp_path / "cases.yml", CASES)
    q = _jsonl(tmp_path / "q.jsonl", [{"query_id": "c1", "text": "retry"}])
    ds = oks.load(str(OKS_STORE), queries=str(q), qrels=str(cases))
    assert ("c1", "computing/retry-with-backoff.md", 1) in ds.qrels.rows()


def test_sillytavern_chat_user_messages_are_the_queries(tmp_path):
    p = _jsonl(tmp_path / "chat.jsonl", CHAT)
    assert query_files.detect(p) == "sillytavern"
    rows = query_files.query_rows(p)
    assert [r["query_id"] for r in rows] == ["m1", "m4"]  # message indices; the hidden one skipped
    assert rows[0]["now"] == "2025-12-04T22:06:00" and rows[1]["now"] == "2025-12-04T10:08:00+00:00"
    assert rows[1]["context"] == [
        "[assistant]: Welcome to the glade.",
        "[user]: Where is the old farm?",
        "[assistant]: Past the river.",
    ]
    assert rows[0]["char_name"] == "Seraphina" and rows[0]["user_name"] == "Ann"
    q = workspace.load_queries(p)  # the contract's context: [previous user, last assistant]
    assert q["context"].to_list() == [
        ["", "Welcome to the glade."],
        ["Where is the old farm?", "Past the river."],
    ]
    assert q["now"][0] == dt.datetime(2025, 12, 4, 22, 6, tzinfo=dt.timezone.utc)
    r = bme.query_row(rows[1], {}, {}, str(p), 1)  # BME's shape: viewer = the character
    assert r["viewer"] == "Seraphina" and r["context"] == [
        "Where is the old farm?",
        "Past the river.",
    ]


def test_explicit_format_overrides_detection(tmp_path):
    p = _jsonl(tmp_path / "q.jsonl", [{"query_id": "a", "text": "x"}])
    assert workspace.load_queries(p, "text").rows() == [("q1", '{"query_id": "a", "text": "x"}')]
    with pytest.raises(ConfigError, match="data.queries_format='csv' is not valid"):
        workspace.load_queries(p, "csv")


# --- errors ----------------------------------------------------------------------------------


def test_recall_case_errors_name_file_line_and_field(tmp_path):
    bad = CASES.replace("  relevant: [deploy-checklist, not-a-page]\n", "")
    p = _write(tmp_path / "eval.yaml", bad)
    with pytest.raises(DataError) as e:
        workspace.load_queries(p)
    assert str(e.value).startswith(f"{p}, row line 9, field 'relevant': ")
    p = _write(tmp_path / "v2.yaml", CASES.replace("recall-case/v1", "recall-case/v2"))
    with pytest.raises(DataError, match="field 'schema_version'.*'recall-case/v2'"):
        workspace.load_queries(p)
    p = _write(tmp_path / "dup.yaml", CASES.replace("case_id: c2", "case_id: c1"))
    with pytest.raises(DataError, match=r"row line 9, field 'case_id': case_id 'c1' appears twice"):
        workspace.load_queries(p)


def test_chat_errors_name_line_and_field(tmp_path):
    rows = [*CHAT[:2], {**CHAT[2], "send_date": "yesterday"}]
    p = _jsonl(tmp_path / "chat.jsonl", rows)
    with pytest.raises(DataError, match=r"row line 3, field 'send_date': send_date 'yesterday'"):
        workspace.load_queries(p)
    p = _jsonl(tmp_path / "c2.jsonl", [CHAT[0], {**CHAT[1], "is_user": "yes"}])
    with pytest.raises(DataError, match=r"row line 2, field 'is_user'"):
        workspace.load_queries(p)


def test_missing_queries_file_names_the_key(tmp_path):
    with pytest.raises(DataError) as e:
        oks.load(str(OKS_STORE), queries=str(tmp_path / "nope.jsonl"))
    assert "field 'data.queries'" in str(e.value) and "data.path" not in str(e.value)
    with pytest.raises(DataError, match="field 'data.qrels'.*set data.qrels="):
        workspace.load_qrels(tmp_path / "nope.tsv")


# --- import-trec --qrels ----------------------------------------------------------------------


def _recall():
    return pl.DataFrame(
        {
            "query_id": ["c1", "c1", "c2", "c2"],
            "rank": [1, 2, 1, 2],
            "node_id": ["x.md", "retry-with-backoff", "deploy-checklist", "y.md"],
            "doc_id": ["x.md", "retry-with-backoff", "deploy-checklist", "y.md"],
            "score": [2.0, 1.0, 3.0, 1.0],
        },
        schema_overrides={"rank": pl.Int32},
    )


def test_import_trec_takes_tsv_and_recall_case_qrels(tmp_path):
    run = write_run(_recall(), tmp_path / "run.txt", tag="t")
    tsv = _write(
        tmp_path / "qrels.tsv",
        "query_id\tdoc_id\trelevance\nc1\tretry-with-backoff\t1\nc2\tdeploy-checklist\t1\n",
    )
    cases = _write(tmp_path / "eval.yaml", CASES)
    trec = write_qrels(workspace.load_qrels(tsv), tmp_path / "qrels.txt")
    got = {}
    for name, q in (("tsv", tsv), ("case", cases), ("trec", trec)):
        out = import_run(run, tmp_path / name, q)
        got[name] = json.loads((out / "metrics.json").read_text())
    # c1: relevant at rank 2 → mrr 1/2; c2: relevant at rank 1 → 1 (tsv, trec)
    assert got["tsv"]["mrr"] == pytest.approx(0.75) and got["trec"]["mrr"] == pytest.approx(0.75)
    assert got["tsv"]["recall@1"] == pytest.approx(0.5)
    # the recall-case file also judges not-a-page for c2: recall@1 of c2 = 1/2
    assert got["case"]["recall@1"] == pytest.approx((0 + 0.5) / 2)


# --- recall oks-eval ---------------------------------------------------------------------------


def test_case_metrics_hand_computed():
    m = case_metrics(["a", "r1", "b", "f", "r2"], {"r1", "r2", "r3"}, {"f"})
    assert m["recall_at_1"] == 0 and m["recall_at_3"] == pytest.approx(1 / 3)
    assert m["recall_at_5"] == pytest.approx(2 / 3) and m["mrr"] == 0.5
    dcg = 1 / math.log2(3) + 1 / math.log2(6)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg_at_5"] == pytest.approx(dcg / ideal)
    assert m["stale_leakage"] == 1.0 and m["no_result"] == 0.0
    assert case_metrics([], {"r"}, set())["no_result"] == 1.0


def test_oks_eval_scores_a_run_directory(tmp_path, capsys):
    from pipeline.cli.main import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rec = pl.DataFrame(
        {
            "query_id": ["c1"] * 3 + ["c2"] * 7,
            "rank": [1, 2, 3, 1, 2, 3, 4, 5, 6, 7],
            "doc_id": ["computing/retry-with-backoff.md", "a/b.md", "a/b.md"]
            + ["x/p1.md", "research/old-notes.md", "x/p2.md", "x/p3.md", "x/p4.md"]
            + ["x/p5.md", "ops/deploy-checklist.md"],
        }
    )
    rec.with_columns(node_id=pl.col("doc_id")).write_parquet(run_dir / "recall.parquet")
    cases = _write(tmp_path / "eval.yaml", CASES)
    assert main(["oks-eval", str(run_dir), str(cases)]) == 0
    printed = json.loads(capsys.readouterr().out)
    # c1: retry at 1 → every metric 1. c2: 2 relevant, neither in the top 5 (deploy-checklist is
    # 7th: beyond the limit of 5), forbidden old-notes 2nd → leakage.
    assert printed["metrics"] == {
        "recall_at_1": 0.5,
        "recall_at_3": 0.5,
        "recall_at_5": 0.5,
        "mrr": 0.5,
        "ndcg_at_5": 0.5,
        "no_result": 0.0,
        "stale_leakage": 0.5,
        "case_count": 2,
    }
    saved = json.loads((run_dir / "oks-eval.json").read_text())
    assert saved["schema_version"] == "recall-eval-run/v1"
    assert saved["cases"][0]["retrieved"] == ["retry-with-backoff", "b"]  # a slug once
    assert evaluate_run(run_dir, cases, limit=7)["metrics"]["mrr"] == pytest.approx((1 + 1 / 7) / 2)
