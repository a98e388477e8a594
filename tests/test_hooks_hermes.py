"""The Hermes Agent memory provider (``pipeline/hooks/hermes.py``) loaded and driven by Hermes's own
code: hermes-agent from PyPI (installed without its dependencies into a cache folder outside the
repo: the loader and the MemoryManager need only the standard library and PyYAML), its plugin
loader (``plugins/memory``), ``MemoryProvider`` ABC and ``MemoryManager``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO
from hooks_fakes import HIT, MISS, FakeCache, FakeService, build_app, serving
from pipeline.contract.errors import ConfigError
from pipeline.hooks.hermes import CONFIG, RecallMemoryProvider, install_plugin, load_settings
from pipeline.hooks.source import Source, normalize

HERMES_VERSION = "0.19.0"


def hermes_path() -> Path:
    """hermes-agent's files (``pip install --no-deps --target``), made once."""
    home = Path(
        os.environ.get("RECALL_HOOK_ENVS", Path.home() / ".cache/recall-pipeline/hook-envs")
    )
    target = home / f"hermes-agent-{HERMES_VERSION}"
    if not (target / ".ready").exists():
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
        subprocess.run(
            [*pip, "--target", str(target), f"hermes-agent=={HERMES_VERSION}"],
            check=True,
            timeout=600,
        )
        (target / ".ready").touch()
    return target


def test_hermes_loads_and_drives_the_provider(tmp_path):
    home, served = tmp_path / "hermes", FakeService()
    path = os.pathsep.join(map(str, (hermes_path(), REPO, REPO / "tests")))
    env = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": path}
    script = str(REPO / "tests" / "hooks_hermes_turns.py")
    with serving(build_app(served)) as url:
        plugin = install_plugin(home, {"endpoint": url, "format": "oks"})
        assert load_settings(home) == {"endpoint": url, "format": "oks"}
        run = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    assert sorted(p.name for p in plugin.iterdir()) == ["__init__.py", "plugin.yaml"]
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["discovered"] and out["is_provider"] and out["available"]
    assert out["name"] == "recall"
    want = FakeService()
    # turn 1: the cache's injection of HIT, read without asking the service
    assert out["turn1"] == FakeCache("oks").get(HIT)["injection"]
    assert out["turn_while_computing"] == ""  # queue_prefetch returned; prefetch did not wait
    # turn 2: a text the cache lacks → the entry queue_prefetch computed for MISS (oks format)
    assert out["turn2"] == want.recall(MISS, format="oks")["injection"].strip() != ""
    assert out["turn3"] == ""  # the queued entry serves one turn
    assert out["calls"] == [[normalize(MISS), None, None, "oks"]]  # one computation: MISS
    # set up from recall.json (endpoint only): no cache to read, the next turn from the server
    assert out["http_turn1"] == ""
    assert out["http_turn2"] == out["turn2"]
    assert served.calls == [(normalize(MISS), None, None, "oks")]


def test_prefetch_never_computes_and_never_waits():
    gate = threading.Event()
    service = FakeService(gate=gate)
    provider = RecallMemoryProvider(Source(cache=FakeCache("oks"), recaller=service, format="oks"))
    provider.initialize("s")
    provider.queue_prefetch(MISS, session_id="s")  # returns while the computation waits
    assert provider.prefetch("no such text", session_id="s") == ""
    gate.set()
    provider.wait("s")
    want = FakeService().recall(MISS, format="oks")["injection"]
    assert provider.prefetch("no such text", session_id="s") == want
    assert provider.prefetch("no such text", session_id="s") == ""  # used once
    assert provider.prefetch(HIT, session_id="t") == FakeCache("oks").get(HIT)["injection"]
    assert [c[0] for c in service.calls] == [normalize(MISS)]  # prefetch never asked the service
    provider.queue_prefetch("  \r\n ", session_id="s")  # nothing to recall: no thread
    assert provider._threads == {}


def test_settings_errors(tmp_path):
    (tmp_path / CONFIG).write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        load_settings(tmp_path)
    (tmp_path / CONFIG).write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        load_settings(tmp_path)
    assert load_settings(tmp_path / "absent") == {}
