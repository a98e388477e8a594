"""Validation names the file, row and field of the first problem."""

import polars as pl
import pytest

from pipeline.contract.errors import DataError
from pipeline.contract.schema import conform


def test_missing_required_column():
    with pytest.raises(
        DataError, match=r"nodes.parquet.*no 'text' column.*fix: add a 'text' column"
    ):
        conform(pl.DataFrame({"node_id": ["a"]}), "nodes", "nodes.parquet")


def test_null_required_value_names_row_and_field():
    df = pl.DataFrame({"node_id": ["a", None], "text": ["x", "y"]})
    with pytest.raises(
        DataError, match=r"nodes.parquet, row 1, field 'node_id': 'node_id' is missing"
    ):
        conform(df, "nodes", "nodes.parquet")


def test_duplicate_id():
    df = pl.DataFrame({"query_id": ["q1", "q2", "q1"], "text": ["a", "b", "c"]})
    with pytest.raises(DataError, match=r"row 0, field 'query_id': duplicate query_id 'q1'"):
        conform(df, "queries", "queries.jsonl")


def test_wrong_type_and_non_finite():
    with pytest.raises(DataError, match=r"field 'importance'.*cannot be read as Float32"):
        conform(
            pl.DataFrame({"node_id": ["a"], "text": ["x"], "importance": ["high"]}),
            "nodes",
            "n.parquet",
        )
    with pytest.raises(
        DataError, match=r"row 1, field 'importance': 'importance' is not a finite number"
    ):
        conform(
            pl.DataFrame(
                {"node_id": ["a", "b"], "text": ["x", "y"], "importance": [1.0, float("nan")]}
            ),
            "nodes",
            "n.parquet",
        )


def test_casts_to_contract_types_and_qrels_target_rule():
    df = conform(
        pl.DataFrame({"query_id": ["q"], "node_id": ["a"], "relevance": ["2"]}), "qrels", "q.tsv"
    )
    assert df.schema["relevance"] == pl.Int32 and df["relevance"][0] == 2
    with pytest.raises(DataError, match="exactly one of 'node_id' or 'doc_id'"):
        conform(pl.DataFrame({"query_id": ["q"], "relevance": [1]}), "qrels", "q.tsv")
