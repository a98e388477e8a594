"""Adapters for LoCoMo, BEIR and MuSiQue: hand-made tiny fixtures, real slices, and error cases."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.adapters import beir, locomo, musique
from pipeline.adapters.common import sha256_file
from pipeline.contract.errors import DataError
from tests.helpers.paths import REPO, TESTS_DATA

TINY = TESTS_DATA
REAL = REPO.parent / "shared" / "data"
needs_real = pytest.mark.skipif(
    not REAL.is_dir(), reason=f"real benchmark data folder {REAL} is missing"
)
UTC = dt.timezone.utc


def _pairs(qrels: pl.DataFrame) -> set[tuple[str, str, int]]:
    return set(qrels.select("query_id", "node_id", "relevance").iter_rows())


# ---------------------------------------------------------------- tiny fixtures


def test_locomo_tiny():
    path = TINY / "locomo_tiny.json"
    ds = locomo.load(str(path))
    assert ds.name == "locomo" and ds.fingerprints == {str(path): sha256_file(path)}
    n = ds.nodes
    assert n["node_id"].to_list() == [
        "conv-a:D1:1",
        "conv-a:D1:2",
        "conv-a:D1:3",
        "conv-a:D2:1",
        "conv-a:D2:2",
        "conv-a:D2:3",
        "conv-b:D1:1",
        "conv-b:D1:2",
    ]
    assert n["seq"].to_list() == [0, 1, 2, 3, 4, 5, 0, 1]
    assert (
        n["doc_id"].to_list()
        == ["conv-a/session_1"] * 3 + ["conv-a/session_2"] * 3 + ["conv-b/session_1"] * 2
    )
    assert n["text"][0] == "Ann: Hi Bob!"
    assert n["text"][1] == "Bob: Hi Ann, look at this. [shares image: a photo of a park]"
    assert n["speaker"][3] == "Bob" and n["title"].null_count() == n.height
    assert n["created_at"][0] == dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert n["created_at"][5] == dt.datetime(2023, 6, 3, 10, 5, tzinfo=UTC)
    e = ds.edges
    assert list(zip(e["src"], e["dst"])) == [
        ("conv-a:D1:1", "conv-a:D1:2"),
        ("conv-a:D1:2", "conv-a:D1:3"),
        ("conv-a:D1:3", "conv-a:D2:1"),
        ("conv-a:D2:1", "conv-a:D2:2"),
        ("conv-a:D2:2", "conv-a:D2:3"),
        ("conv-b:D1:1", "conv-b:D1:2"),
    ]
    assert (
        set(e["relation"]) == {"next_turn"}
        and e["weight"].dtype == pl.Float32
        and set(e["weight"]) == {1.0}
    )
    q = ds.queries
    assert q["query_id"].to_list() == ["conv-a:q0", "conv-a:q1", "conv-a:q2", "conv-b:q0"]
    assert q["group"].to_list() == ["2", "4", "5", "1"]
    assert q["doc_scope"].to_list() == [["conv-a"]] * 3 + [["conv-b"]]
    # `now` is the last session that has turns (session_3 has only a date_time)
    assert q["now"][0] == dt.datetime(2023, 6, 3, 10, 5, tzinfo=UTC)
    assert q["now"][3] == dt.datetime(2022, 1, 1, 8, 0, tzinfo=UTC)
    assert ds.qrels_level == "node_id" and ds.qrels["relevance"].dtype == pl.Int32
    assert ds.qrels.height == 6  # deduplicated
    assert _pairs(ds.qrels) == {
        ("conv-a:q0", "conv-a:D1:3", 1),
        ("conv-a:q0", "conv-a:D2:1", 1),
        ("conv-a:q1", "conv-a:D2:1", 1),
        ("conv-a:q1", "conv-a:D1:1", 1),
        ("conv-a:q1", "conv-a:D9:9", 1),
        ("conv-b:q0", "conv-b:D1:1", 1),
    }
    assert ds.skipped == {"evidence_turn_missing": 1, "evidence_token_malformed": 1}


def test_locomo_tiny_filter_and_limit():
    ds = locomo.load(str(TINY / "locomo_tiny.json"), conversations=["conv-b"], name="lb")
    assert (
        ds.name == "lb"
        and ds.nodes.height == 2
        and ds.queries["query_id"].to_list() == ["conv-b:q0"]
    )
    ds = locomo.load(str(TINY / "locomo_tiny.json"), limit_queries=1)
    assert (
        ds.queries.height == 1
        and set(ds.qrels["query_id"]) == {"conv-a:q0"}
        and ds.nodes.height == 8
    )


def test_beir_tiny():
    ds = beir.load(str(TINY / "beir_tiny"))
    assert ds.nodes["node_id"].to_list() == ["d1", "d2", "d3", "d4", "d5"]
    assert ds.nodes["doc_id"].to_list() == ["d1", "d2", "d3", "d4", "d5"]
    assert ds.nodes["text"].to_list() == [
        "Cats\nCats purr.",
        "Dogs\nDogs bark.",
        "Birds\nBirds sing.",
        "Untitled note about fish.",
        "No title key at all.",
    ]
    assert ds.nodes["title"].to_list() == ["Cats", "Dogs", "Birds", "", ""]
    assert ds.queries["query_id"].to_list() == ["q1", "q2"]  # q9 has no qrels in this split
    assert _pairs(ds.qrels) == {("q1", "d3", 2), ("q1", "d1", 1), ("q2", "d5", 0), ("q2", "d4", 1)}
    assert len(ds.fingerprints) == 3 and ds.edges is None
    small = beir.load(str(TINY / "beir_tiny"), limit_queries=1, max_docs=2)
    assert small.nodes["node_id"].to_list() == ["d1", "d2", "d3"]
    assert _pairs(small.qrels) == {("q1", "d3", 2), ("q1", "d1", 1)}


def test_musique_tiny():
    ds = musique.load(str(TINY / "musique_tiny" / "questions.json"))
    assert ds.nodes["node_id"].to_list() == ["0", "1", "2", "3", "4", "5"]
    assert ds.nodes["doc_id"].to_list() == ds.nodes["node_id"].to_list()
    assert (
        ds.nodes["text"][0] == "Widget\nWidget is made by Acme." and ds.nodes["title"][5] == "Oslo"
    )
    assert ds.queries["query_id"].to_list() == ["2hop__11_12", "3hop1__21_22_23"]
    assert ds.queries["group"].to_list() == ["2hop", "3hop"]
    assert _pairs(ds.qrels) == {
        ("2hop__11_12", "0", 1),
        ("2hop__11_12", "2", 1),
        ("3hop1__21_22_23", "1", 1),
        ("3hop1__21_22_23", "3", 1),
        ("3hop1__21_22_23", "4", 1),
    }
    assert len(ds.fingerprints) == 2
    one = musique.load(str(TINY / "musique_tiny" / "questions.json"), limit_queries=1)
    assert one.nodes.height == 6 and one.qrels.height == 2


# ---------------------------------------------------------------- real data


@needs_real
def test_locomo_real():
    path = REAL / "locomo" / "locomo_dev5.json.gz"
    full = locomo.load(str(path))
    assert full.queries.height == 999 and full.qrels["query_id"].n_unique() == 997
    assert full.nodes["doc_id"].str.split("/").list.first().n_unique() == 5
    assert full.nodes.height == 2760 and full.edges.height == 2760 - 5
    assert full.skipped["evidence_turn_missing"] == 1  # conv-42 'D10:19'
    assert "conv-43:D11:26" in set(full.qrels["node_id"])  # from 'D:11:26'
    one = locomo.load(str(path), conversations=["conv-26"])
    assert one.nodes.height == 419 and one.queries.height == 199
    assert one.qrels["query_id"].n_unique() == 197 and one.qrels.height == 251
    assert set(one.nodes["doc_id"]) == {f"conv-26/session_{i}" for i in range(1, 20)}


@needs_real
def test_beir_real_slice():
    root = REAL / "beir_scifact"
    ds = beir.load(str(root), limit_queries=20, max_docs=200)
    full = beir.load(str(root))
    assert full.nodes.height == 5183 and full.queries.height == 300 and full.qrels.height == 339
    first = set(full.nodes["node_id"][:200])
    assert ds.queries.height == 20
    extra = set(ds.qrels["node_id"]) - first
    assert ds.nodes.height == 200 + len(extra)
    assert set(ds.qrels["node_id"]) <= set(ds.nodes["node_id"])


@needs_real
def test_musique_real():
    path = REAL / "hipporag" / "musique_train.json.gz"
    ds = musique.load(str(path))
    assert ds.queries.height == 100 and ds.nodes.height == 1890 and ds.qrels.height == 237
    tsv = pl.read_csv(
        REAL / "hipporag" / "musique_train_qrels.tsv",
        separator="\t",
        schema_overrides={"corpus-idx": pl.String},
    )
    assert _pairs(ds.qrels) == {(q, n, 1) for q, n in zip(tsv["query-id"], tsv["corpus-idx"])}
    assert dict(ds.queries["group"].value_counts().iter_rows()) == {
        "2hop": 68,
        "3hop": 27,
        "4hop": 5,
    }
    sample = musique.load(str(REAL / "hipporag" / "sample.json"))  # HippoRAG 2 layout
    assert sample.nodes.height == 3 and sample.queries.height == 1 and sample.qrels.height >= 1


# ---------------------------------------------------------------- errors


def test_bad_json_names_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('[{"sample_id": "conv-a", ')
    with pytest.raises(DataError, match="broken.json"):
        locomo.load(str(bad))
    with pytest.raises(DataError, match="broken.json"):
        musique.load(str(bad), corpus=str(TINY / "musique_tiny" / "questions_corpus.json"))


def _beir_copy(tmp_path: Path, qrels: str) -> Path:
    root = tmp_path / "beir"
    shutil.copytree(TINY / "beir_tiny", root)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


def test_beir_qrels_missing_column(tmp_path):
    root = _beir_copy(tmp_path, "query-id\tcorpus-id\nq1\td3\n")
    with pytest.raises(DataError, match=r"test\.tsv.*'score'"):
        beir.load(str(root))
    root2 = _beir_copy(tmp_path / "b", "query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td4\n")
    with pytest.raises(DataError, match=r"test\.tsv, row line 3, field 'score'"):
        beir.load(str(root2))
    root3 = _beir_copy(tmp_path / "c", "query-id\tcorpus-id\tscore\nq7\td3\t1\n")
    with pytest.raises(DataError, match="query-id 'q7'"):
        beir.load(str(root3))


def test_other_data_errors(tmp_path):
    with pytest.raises(DataError, match="conv-zz"):
        locomo.load(str(TINY / "locomo_tiny.json"), conversations=["conv-zz"])
    bad_date = tmp_path / "bad_date.json"
    bad_date.write_text(
        (TINY / "locomo_tiny.json").read_text().replace("1:56 pm on 8 May, 2023", "someday")
    )
    with pytest.raises(DataError, match="session_1_date_time"):
        locomo.load(str(bad_date))
    qs = tmp_path / "q.json"
    qs.write_text(
        (TINY / "musique_tiny" / "questions.json")
        .read_text()
        .replace("Bo was born in Oslo.", "Bo?")
    )
    with pytest.raises(DataError, match=r"q\.json, row 1 \(3hop1__21_22_23\) paragraphs\[2\]"):
        musique.load(str(qs), corpus=str(TINY / "musique_tiny" / "questions_corpus.json"))
    with pytest.raises(DataError, match="not found"):
        musique.load(str(tmp_path / "nope.json"))
