"""Outputs get the umask's mode (0644 under umask 022), not mkstemp's 0600; a file replaced in
place keeps its own mode, as ``open(path, "w")`` would."""

from __future__ import annotations

import os
import stat

import pytest

from pipeline.contract import io
from pipeline.run import runner
from tests.helpers.paths import tiny_ws_overrides


@pytest.fixture
def umask():
    """umask(m) sets the process umask for the test; the old one is restored after."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_new_file_gets_umask_mode(tmp_path, umask, mask, want):
    umask(mask)
    io.write_json(tmp_path / "a.json", {"x": 1})
    assert _mode(tmp_path / "a.json") == want


def test_replaced_file_keeps_its_mode(tmp_path, umask):
    umask(0o022)
    p = tmp_path / "store.json"
    p.write_text("{}")
    os.chmod(p, 0o600)  # the user's own private store file stays private
    io.write_json(p, {"x": 1})
    assert _mode(p) == 0o600
    os.chmod(p, 0o664)
    io.atomic_write_bytes(p, b"y")
    assert (_mode(p), p.read_bytes()) == (0o664, b"y")


def test_run_outputs_and_cache_readable_by_others(compose, tmp_path, cache_dir, umask):
    umask(0o022)
    out = tmp_path / "run"
    runner.run(compose([*tiny_ws_overrides(), "embed=hashing", "preset=best"]), out)
    files = [p for p in [*out.rglob("*"), *cache_dir.rglob("*")] if p.is_file()]
    assert any(p.name == "manifest.json" for p in files)
    assert {p.name: _mode(p) for p in files} == {p.name: 0o644 for p in files}
