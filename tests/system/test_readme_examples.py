"""README.md "Your store": each system's example command, exactly as written (the placeholders
filled with a small store in that system's format), run through the CLI with no other flag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.adapters.test_adapter_bme_recall import ten_node_graph
from tests.adapters.test_adapter_reme import build
from tests.helpers.paths import REPO, TESTS_DATA

OKS_STORE = TESTS_DATA / "oks_store"


def _recall(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RECALL_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _the_run(cwd: Path) -> pl.DataFrame:
    (run,) = [p.parent for p in (cwd / "runs").glob("*/manifest.json")]
    return pl.read_parquet(run / "recall.parquet")


def test_reme_example(tmp_path):
    store = tmp_path / "ws"
    build(store)  # ReMe's metadata/ index, 4-d chunk vectors of no local model
    (tmp_path / "q.jsonl").write_text(json.dumps({"query_id": "q1", "text": "vault keys"}) + "\n")
    out = _recall(
        tmp_path, "data=reme", f"data.path={store}", "data.queries=q.jsonl", "preset=reme"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rec = _the_run(tmp_path)
    assert 0 < rec.height <= 5 and rec["score"].to_list() == rec["lexical"].to_list()


def test_oks_example(tmp_path):
    inst = tmp_path / "inst"
    shutil.copytree(OKS_STORE, inst)
    shutil.copy(OKS_STORE / "queries.jsonl", tmp_path / "q.jsonl")
    out = _recall(tmp_path, "data=oks", f"data.path={inst}", "data.queries=q.jsonl", "preset=oks")
    assert out.returncode == 0, out.stderr[-2000:]
    rec = _the_run(tmp_path)
    assert rec.group_by("query_id").agg(pl.col("doc_id").n_unique())["doc_id"].max() <= 5


def test_bme_example(tmp_path):
    """`recall run data=bme data.path=<graph export> data.queries=queries.jsonl preset=bme`."""
    graph = tmp_path / "st-bme-graph.json"
    graph.write_text(json.dumps(ten_node_graph()), encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"query_id": "q1", "text": "where did Kael go"}) + "\n"
    )
    out = _recall(
        tmp_path, "data=bme", f"data.path={graph}", "data.queries=queries.jsonl", "preset=bme"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rec = _the_run(tmp_path)
    assert rec["query_id"].unique().to_list() == ["q1"]
    assert 0 < rec.height <= 20  # BME's recallTopK, the preset's k


def test_oks_team_example(tmp_path):
    """`recall run data=oks data.path=<OKS instance> data.queries=queries.jsonl preset=oks_team`."""
    inst = tmp_path / "inst"
    shutil.copytree(OKS_STORE, inst)
    shutil.copy(OKS_STORE / "queries.jsonl", tmp_path / "queries.jsonl")
    out = _recall(
        tmp_path, "data=oks", f"data.path={inst}", "data.queries=queries.jsonl", "preset=oks_team"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rec = _the_run(tmp_path)
    n_queries = len((OKS_STORE / "queries.jsonl").read_text().splitlines())
    assert rec["query_id"].n_unique() <= n_queries and rec.height > 0
    assert set(rec["doc_id"]) <= {
        str(p.relative_to(inst / "wiki")) for p in inst.rglob("wiki/**/*.md")
    }


@pytest.mark.parametrize(
    "args",
    [
        ("data=bme", "data.path={graph}", "preset=bme"),
        ("data=oks", "data.path={inst}", "preset=oks_team"),
    ],
)
def test_a_store_without_a_queries_file_says_what_to_give(tmp_path, args):
    """The same lines without `data.queries`: one error line saying what to give, exit 2."""
    graph = tmp_path / "st-bme-graph.json"
    graph.write_text(json.dumps(ten_node_graph()), encoding="utf-8")
    inst = tmp_path / "inst"
    shutil.copytree(OKS_STORE, inst)
    out = _recall(tmp_path, *(a.format(graph=graph, inst=inst) for a in args))
    assert out.returncode == 2
    assert "give it a queries file" in out.stderr and "Traceback" not in out.stderr
