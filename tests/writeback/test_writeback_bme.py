"""``recall feedback RUN --format bme``: ST-BME's ``reinforceAccessBatch`` arithmetic
(Youzini-afk/ST-Bionic-Memory-Ecology @ 590da3b6, ``retrieval/dynamics.js::reinforceAccess``:
``accessCount = (accessCount || 0) + 1``, ``importance = Math.min(10, (importance || 5) + 0.1)``,
``lastAccessTime = Date.now()``) written to a new file; the store is never touched."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
import subprocess
import sys

import polars as pl
import pytest

from pipeline.contract.errors import UserError
from pipeline.run import runner
from pipeline.writeback import bme as wb
from tests.adapters.test_adapter_bme import T0, node
from tests.adapters.test_adapter_bme_recall import ten_node_graph


def test_reinforcement_arithmetic_by_hand():
    g = {
        "version": 9,
        "nodes": [
            node("a", "event", {}, 1, importance=7, accessCount=2),
            node("b", "event", {}, 2, importance=0),  # JS `0 || 5`: restarts at 5
            node("c", "event", {}, 3, importance=9.95),
            node("d", "event", {}, 4, importance=6.0, accessCount=1),
        ],
        "edges": [],
    }
    recall = pl.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q2"],
            "rank": [1, 2, 1, 2, 13],
            "node_id": ["a", "b", "a", "c", "d"],
        },
        schema_overrides={"rank": pl.Int32},
    )
    picks = wb.selected(recall, 12)
    assert picks == [["a", "b"], ["a", "c"]]  # rank 13 is past maxRecallNodes
    wb.apply(g, picks, 1767225600123)
    a, b, c, d = g["nodes"]
    assert (a["accessCount"], a["importance"]) == (
        4,
        7.199999999999999,
    )  # (7 + 0.1) + 0.1 in doubles
    assert (b["accessCount"], b["importance"]) == (1, 5.1)
    assert (c["accessCount"], c["importance"]) == (1, 10)  # min(10, 10.05)
    assert (d["accessCount"], d["importance"], d["lastAccessTime"]) == (1, 6.0, T0 + 4000)
    assert a["lastAccessTime"] == b["lastAccessTime"] == 1767225600123


def sha(path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_leaves_the_store_untouched_and_feedback_writes_a_new_graph(compose, tmp_path):
    store = tmp_path / "st-bme-graph.json"
    store.write_text(json.dumps(ten_node_graph()), encoding="utf-8")
    q = tmp_path / "queries.jsonl"
    q.write_text(json.dumps({"query_id": "q", "text": "apple", "char_name": "Aria", "now": T0}))
    before = sha(store)
    run_dir = tmp_path / "run"
    data = ["data=bme", f"data.path={store}", f"data.queries={q}"]
    runner.run(compose(["preset=bme", "embed=hashing", "report=false", *data]), run_dir)
    assert sha(store) == before  # recall run never writes the store
    args = [sys.executable, "-m", "pipeline.cli.main", "feedback", str(run_dir), "--format", "bme"]
    out = subprocess.run([*args, "--now", "2026-01-02T00:00:00Z"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    new = run_dir / "st-bme-graph-feedback.json"
    assert out.stdout.strip() == f"wrote {new}" and sha(store) == before
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~mask  # 0644 under umask 022, not 0600
    got = {n["id"]: n for n in json.loads(new.read_text(encoding="utf-8"))["nodes"]}
    old = {n["id"]: n for n in ten_node_graph()["nodes"]}
    recalled = {"n9", "n0", "n2", "n4", "n1"}  # the run's five rows (test_adapter_bme_recall)
    day2 = int(dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc).timestamp() * 1000)
    for nid, n in got.items():
        if nid in recalled:
            assert (n["accessCount"], n["importance"], n["lastAccessTime"]) == (1, 5.1, day2)
        else:
            assert n == old[nid], nid
    again = subprocess.run(args, capture_output=True, text=True)
    assert again.returncode == 2 and "never overwrites" in again.stderr
    same = subprocess.run([*args, "--out", str(store)], capture_output=True, text=True)
    assert same.returncode == 2 and "is the store the run read" in same.stderr
    assert sha(store) == before


def test_feedback_bme_needs_a_bme_run(tmp_path):
    rows = pl.DataFrame({"query_id": ["q"], "rank": [1], "node_id": ["n"]})
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(UserError, match="data=bme"):
        wb.write_back(tmp_path, {"data": {"_target_": "sample"}}, rows, now, None)


def test_recall_owner_keys_are_written_as_retrieve_writes_them():
    """retriever.js after a recall: activeRecallOwnerKey = first owner; pushRecentRecallOwner for
    each owner from last to first (newest first, unique case-insensitively, at most 8)."""
    g = {"historyState": {"recentRecallOwnerKeys": ["c:bo", "c:x1", "c:x2", "c:x3"]}}
    wb.record_owners(g, ["c:aria", " C:BO "])
    assert g["historyState"] == {
        "recentRecallOwnerKeys": ["c:aria", "C:BO", "c:x1", "c:x2", "c:x3"],
        "activeRecallOwnerKey": "c:aria",
    }
    wb.record_owners(g, [f"c:n{i}" for i in range(9)])
    assert g["historyState"]["recentRecallOwnerKeys"] == [f"c:n{i}" for i in range(8)]
    wb.record_owners(g, [])  # no owner resolved: the key is cleared, the list kept
    assert g["historyState"]["activeRecallOwnerKey"] == ""
    assert len(g["historyState"]["recentRecallOwnerKeys"]) == 8
    bare = {"nodes": []}
    wb.record_owners(bare, ["c:aria"])  # no historyState: BME writes nothing
    assert bare == {"nodes": []}


def test_feedback_writes_the_runs_owners_into_history_state(compose, tmp_path):
    graph = ten_node_graph()
    graph["historyState"] = {"recentRecallOwnerKeys": ["character:old"]}
    store = tmp_path / "st-bme-graph.json"
    store.write_text(json.dumps(graph), encoding="utf-8")
    q = tmp_path / "queries.jsonl"
    rows = [
        {"query_id": "q1", "text": "apple", "now": T0, "active_owner_keys": ["character:aria"]},
        {"query_id": "q2", "text": "apple", "now": T0, "active_owner_keys": ["character:bo"]},
    ]
    q.write_text("\n".join(json.dumps(r) for r in rows))
    run_dir = tmp_path / "run"
    data = ["data=bme", f"data.path={store}", f"data.queries={q}"]
    runner.run(compose(["preset=bme", "embed=hashing", "report=false", *data]), run_dir)
    now = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    cfg = json.loads((run_dir / "manifest.json").read_text())["config"]
    out = wb.write_back(run_dir, cfg, pl.read_parquet(run_dir / "recall.parquet"), now, None)
    hs = json.loads(out.read_text(encoding="utf-8"))["historyState"]
    assert hs == {
        "recentRecallOwnerKeys": ["character:bo", "character:aria", "character:old"],
        "activeRecallOwnerKey": "character:bo",
    }
