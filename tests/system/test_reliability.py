"""Crash safety (SIGKILL at stage boundaries and mid-write), no network at run time, safe loading."""

import json
import re
import socket
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO, tiny_ws_overrides


def _run(out, cache, fault=None):
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    if fault:
        env["RECALL_FAULT_AT"] = fault
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "embed=hashing",
            "preset=best",
            "report=false",
            *tiny_ws_overrides(),
            f"out_dir={out}",
            f"cache_dir={cache}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    p = _run(out / "run", out / "c")
    assert p.returncode == 0, p.stderr[-2000:]
    return out / "run" / "recall.parquet"


STAGES = [
    "ingest",
    "embed",
    "channels",
    "fuse",
    "graph",
    "diffuse",
    "score",
    "select",
    "export",
    "evaluate",
]


@pytest.mark.parametrize(
    "fault", [f"stage:{s}" for s in STAGES] + ["write:recall.parquet", "write:manifest.json"]
)
def test_killed_run_leaves_no_finished_marker_and_rerun_matches(tmp_path, clean_run, fault):
    out = tmp_path / "crash"
    killed = _run(
        out, tmp_path / "c", fault
    )  # its own cache: only this run's finished stages are in it
    assert killed.returncode == -9  # SIGKILL
    assert not (out / "manifest.json").exists()  # nothing looks finished
    if fault == "write:recall.parquet":
        assert not (
            out / "recall.parquet"
        ).exists()  # the half-written temp file never took the name
    again = _run(out, tmp_path / "c")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "recall.parquet").read_bytes() == clean_run.read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    after_channels = fault.startswith("write:") or STAGES.index(fault.split(":")[1]) > STAGES.index(
        "channels"
    )
    assert ("channels" in manifest["reused_stages"]) == after_channels  # finished stages are reused


def test_pipeline_runs_with_network_blocked(compose, tmp_path, monkeypatch):
    from pipeline.run import runner

    def refuse(*args, **kwargs):
        raise OSError("network access attempted during a run")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cfg = compose(
        ["preset=best", "report=false", "k=5"]
    )  # MiniLM: must load from the local package
    res = runner.run(cfg, tmp_path / "offline")
    assert res["metrics"]["n_queries"] == 30


def test_no_pickle_and_safe_yaml_in_the_package():
    """Nothing is unpickled: no ``pickle``/``dill`` import and no ``pickle.load``. ``pickletools``
    (its ``genops`` lists a pickle's opcodes without running them: ``adapters/reme_slots.py``) is
    allowed."""
    src = {p: p.read_text() for p in (REPO / "pipeline").rglob("*.py")}
    for path, text in src.items():
        assert not re.search(r"^\s*(import pickle\b|from pickle\b|import dill\b)", text, re.M), path
        assert not re.search(r"\b(pickle|dill)\.loads?\(", text), path
        assert "allow_pickle=True" not in text and "torch.load(" not in text, path
        assert not re.search(r"yaml\.(load|unsafe_load)\(", text), path
