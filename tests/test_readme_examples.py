"""README.md "Your system's own memory": each system's example command, exactly as written (the
placeholders filled with a small store in that system's format), run through the CLI with no
other flag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from tests.test_adapter_bme_recall import ten_node_graph
from tests.test_adapter_reme import build

REPO = Path(__file__).resolve().parents[1]
OKS_STORE = Path(__file__).parent / "data" / "oks_store"


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


@pytest.mark.parametrize(
    "args",
    [
        ("data=bme", "data.path={graph}", "preset=bme"),
        ("data=oks", "data.path={inst}", "preset=oks_team"),
    ],
)
def test_examples_without_a_queries_file_say_what_to_give(tmp_path, args):
    """The README's bme and oks_team lines name no queries file: one error line saying so."""
    graph = tmp_path / "st-bme-graph.json"
    graph.write_text(json.dumps(ten_node_graph()), encoding="utf-8")
    inst = tmp_path / "inst"
    shutil.copytree(OKS_STORE, inst)
    out = _recall(tmp_path, *(a.format(graph=graph, inst=inst) for a in args))
    assert out.returncode == 2
    assert "give it a queries file" in out.stderr and "Traceback" not in out.stderr
