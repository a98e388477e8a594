"""Bring your own vectors through data=parquet: an `embedding` column in nodes and queries is what
the dense channel searches (cosines by hand); a mismatch is an error, never a silent mix."""

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.run import runner

V = pl.List(pl.Float32)


def _tables(root, node_vecs=True, query_vec=(1.0, 1.0, 0.0)):
    root.mkdir(parents=True, exist_ok=True)
    nodes = pl.DataFrame(
        {
            "node_id": ["a", "b", "c"],
            "text": ["alpha note", "beta note", "gamma note"],
            "embedding": [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 5.0]],
        },
        schema_overrides={"embedding": V},
    )
    (nodes if node_vecs else nodes.drop("embedding")).write_parquet(root / "nodes.parquet")
    pl.DataFrame(
        {
            "query_id": ["q"],
            "text": ["zzz"],
            "embedding": [None if query_vec is None else list(query_vec)],
        },
        schema_overrides={"embedding": V},
    ).write_parquet(root / "queries.parquet")


def _over(root, tmp_path, *extra):
    return [
        "data=parquet",
        f"data.path={root}",
        "preset=dense",
        "k=3",
        f"out_dir={tmp_path / 'run'}",
        *extra,
    ]


def test_stored_node_and_query_vectors_are_searched_as_cosines(compose, tmp_path):
    root = tmp_path / "t"
    _tables(root)
    runner.run(compose(_over(root, tmp_path, "data.vector_model=my-model")), tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    # q = (1,1,0)/√2: cos with a = 1/√2, with b (0,2,0) = 1/√2, with c = 0; ties by node_id
    assert rec["node_id"].to_list()[:2] == ["a", "b"]
    assert rec["dense"].to_list()[:2] == pytest.approx([2**-0.5, 2**-0.5], abs=1e-6)


def test_query_vectors_without_node_vectors_are_refused(compose, tmp_path):
    root = tmp_path / "t"
    _tables(root, node_vecs=False)
    with pytest.raises(
        ConfigError, match="query 'q' carries a stored embedding but the nodes do not"
    ):
        runner.run(compose(_over(root, tmp_path, "embed=hashing")), tmp_path / "run")


def test_a_query_without_a_vector_and_another_model_is_refused(compose, tmp_path):
    root = tmp_path / "t"
    _tables(root, query_vec=None)
    with pytest.raises(
        ConfigError, match="stored 3-d vectors of 'my-model'.*embed.encoder.model_id=my-model"
    ):
        runner.run(
            compose(_over(root, tmp_path, "data.vector_model=my-model", "embed=hashing")),
            tmp_path / "run",
        )
