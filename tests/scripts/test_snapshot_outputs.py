"""scripts/snapshot_outputs.py: two snapshots of the same code are identical file for file; a
changed file is reported and fails the comparison (issue 15 relies on it to show a refactor
changed no result)."""

import importlib.util
import re

import pytest

from tests.helpers.paths import REPO

SCRIPT = REPO / "scripts" / "snapshot_outputs.py"


def _load():
    spec = importlib.util.spec_from_file_location("snapshot_outputs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_same_code_gives_identical_snapshots_and_a_change_is_caught(tmp_path, capsys):
    snap = _load()
    a = snap.save(tmp_path / "a", ["sample"], ["dense"], "hashing")
    b = snap.save(tmp_path / "b", ["sample"], ["dense"], "hashing")
    assert set(a) == {
        "runs/sample-dense/recall.parquet",
        "runs/sample-dense/metrics.json",
        *[k for k in a if re.match(r"precompute/recall/sample-[0-9a-f]{12}/scope=", k)],
    }
    assert any(re.match(r"precompute/recall/sample-[0-9a-f]{12}/scope=", k) for k in a)
    assert a == b
    assert snap.compare(tmp_path / "a", tmp_path / "b") == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"identical: {len(a)}/{len(a)}"
    (tmp_path / "b" / "hashes.json").write_text(
        (tmp_path / "b" / "hashes.json")
        .read_text()
        .replace(a["runs/sample-dense/metrics.json"], "0" * 64)
    )
    assert snap.compare(tmp_path / "a", tmp_path / "b") == 1
    out = capsys.readouterr().out
    assert (
        "DIFFERENT runs/sample-dense/metrics.json" in out
        and f"identical: {len(a) - 1}/{len(a)}" in out
    )


def test_a_partition_is_compared_without_its_recipe_key_but_with_every_other_column(tmp_path):
    import polars as pl

    snap = _load()
    rows = {
        "query_id": ["q1", "q1"],
        "rank": [1, 2],
        "node_id": ["a", "b"],
        "score": [0.9, 0.5],
        "text_key": ["h", "h"],
        "scope_version": ["v", "v"],
        "recipe": ["r1", "r1"],
    }
    paths = {}
    for name, change in (
        ("a", {}),
        ("new_code", {"recipe": ["r2", "r2"]}),
        ("moved", {"score": [0.9, 0.4]}),
    ):
        paths[name] = tmp_path / f"{name}.parquet"
        pl.DataFrame(rows | change).write_parquet(paths[name])
    assert snap.partition_sha256(paths["a"]) == snap.partition_sha256(paths["new_code"])
    assert snap.partition_sha256(paths["a"]) != snap.partition_sha256(paths["moved"])


def test_extra_pairs_and_slices_become_data_overrides(tmp_path):
    snap = _load()
    assert snap.parse_extra("oks=/x/inst:oks,oks_team") == [
        ("oks", "/x/inst", "oks"),
        ("oks", "/x/inst", "oks_team"),
    ]
    assert snap.parse_extra("sample:dense") == [("sample", None, "dense")]
    with pytest.raises(SystemExit, match="expected DATA=PATH:PRESET"):
        snap.parse_extra("oks=/x/inst")
    assert snap.data_args("locomo", None, None) == ["data=locomo"]
    assert snap.data_args("locomo", None, 50) == ["data=locomo", "data.limit_queries=50"]
    (tmp_path / "queries.jsonl").write_text("{}\n")  # an instance with its queries beside it
    assert snap.data_args("oks", str(tmp_path), 5) == [
        "data=oks",
        f"data.path={tmp_path}",
        f"data.queries={tmp_path}/queries.jsonl",
        "data.limit_queries=5",
    ]
    assert snap.data_args("oks", str(tmp_path / "none"), None) == [
        "data=oks",
        f"data.path={tmp_path / 'none'}",
    ]
