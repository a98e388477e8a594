"""The many-workspaces generator: sizes as asked, deterministic per seed, every query scoped to its
own workspace, one ``next`` chain per workspace, and the folder ``data=parquet`` reads back."""

import polars as pl

from pipeline.adapters.parquet import load
from pipeline.ops.scope import scope_groups
from pipeline.synth.workspaces import make, write


def test_shape_chain_scopes_and_determinism():
    ds = make(3, notes=5, queries=2, per_doc=2, seed=1)
    assert (ds.nodes.height, ds.queries.height, ds.edges.height) == (
        15,
        6,
        12,
    )  # 3 × (5 − 1) chain edges
    assert ds.nodes.equals(make(3, notes=5, queries=2, per_doc=2, seed=1).nodes)
    assert not ds.nodes.equals(make(3, notes=5, queries=2, per_doc=2, seed=2).nodes)
    assert (
        ds.nodes.filter(pl.col("node_id") == "u1-n3")["doc_id"].item() == "u1/d1"
    )  # note 3 // 2 per doc
    assert ds.edges.filter(pl.col("src") == "u2-n0")["dst"].to_list() == ["u2-n1"]
    assert (
        ds.edges.filter(pl.col("src") == "u2-n4").height == 0
    )  # the chain ends inside its workspace
    assert ds.queries["doc_scope"].to_list() == [["u0"], ["u0"], ["u1"], ["u1"], ["u2"], ["u2"]]
    for (scope, _viewer), rows, qs in scope_groups(ds.nodes, ds.queries):
        k = scope[0]
        assert (
            ds.nodes[rows]["node_id"].str.starts_with(f"{k}-").all()
            and len(rows) == 5
            and len(qs) == 2
        )
    # every text names its own note and the next one's
    first = ds.nodes.row(0, named=True)
    assert first["text"].startswith(first["title"]) and ds.nodes["title"][1] in first["text"]


def test_written_folder_reads_back(tmp_path):
    ds = make(2, notes=4, queries=1)
    back = load(str(write(ds, tmp_path / "ws")))
    assert (
        back.nodes.equals(ds.nodes)
        and back.edges.equals(ds.edges)
        and back.queries.equals(ds.queries)
    )
