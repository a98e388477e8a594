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

from pipeline.contract.errors import ConfigError
from pipeline.hooks.hermes import CONFIG, RecallMemoryProvider, install_plugin, load_settings
from pipeline.hooks.source import Source, normalize
from tests.helpers.hooks_fakes import HIT, MISS, FakeCache, FakeService, build_app, serving
from tests.helpers.paths import REPO

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
    path = os.pathsep.join(map(str, (hermes_path(), REPO)))
    env = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": path}
    script = str(REPO / "tests" / "helpers" / "hooks_hermes_turns.py")
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
    # turn 2: MISS is not cached → computed for this turn (waited for, within prefetch_timeout)
    assert out["turn2"] == want.recall(MISS, format="oks")["injection"].strip() != ""
    assert out["turn3"] == ""  # nothing recalled for turn 3's text: not turn 2's block again
    # queue_prefetch(HIT) after turn 1 was a cache read: the service computed MISS and turn 3's text
    assert [c[0] for c in out["calls"]] == [normalize(MISS), "something new entirely"]
    # set up from recall.json (endpoint only): the service answers each turn's own text
    assert out["http_turn1"] == want.recall(HIT, format="oks")["injection"].strip() != ""
    assert out["http_turn2"] == out["turn2"]
    assert out["http_turn3"] == ""
    assert [c[0] for c in served.calls] == [
        normalize(x) for x in (HIT, MISS, "something new entirely")
    ]


def test_prefetch_waits_for_this_turn_at_most_prefetch_timeout(caplog):
    """A miss is computed for the turn that asks it; past ``prefetch_timeout`` the turn gets
    nothing and a warning, and the entry, when it arrives, serves the same text later."""
    gate = threading.Event()
    service = FakeService(gate=gate)
    provider = RecallMemoryProvider(Source(recaller=service, format="oks"), prefetch_timeout=0.2)
    provider.initialize("s")
    with caplog.at_level("WARNING", logger="pipeline.hooks.hermes"):
        assert provider.prefetch(MISS, session_id="s") == ""  # the gate holds it past 0.2 s
    assert "took over 0.2 s (prefetch_timeout)" in caplog.text
    gate.set()
    provider.wait("s", timeout=30)
    want = FakeService().recall(MISS, format="oks")["injection"]
    assert provider.prefetch("another text", session_id="s") == ""  # never another text's entry
    assert provider.prefetch(MISS, session_id="s") == want  # the kept entry (a hit anyway)
    assert (
        provider.prefetch(HIT, session_id="t")
        == FakeService().recall(HIT, format="oks")["injection"]
    )
    before = dict(provider._threads)
    provider.queue_prefetch("  \r\n ", session_id="s")  # nothing to recall: no thread
    assert provider._threads == before


def test_cache_read_alone_hits_and_a_cache_without_blocks_warns(caplog):
    provider = RecallMemoryProvider(Source(cache=FakeCache("oks"), format="oks"))
    provider.initialize("s")
    assert provider.prefetch(HIT) == FakeCache("oks").get(HIT)["injection"]
    assert provider.prefetch(MISS) == ""  # no recaller: a miss injects nothing, silently
    assert caplog.text == ""

    class NoBlocks(FakeCache):  # a cache built without inject.format: rows, injection None
        def get(self, text, scope=None):
            entry = super().get(text, scope)
            return None if entry is None else {**entry, "injection": None}

    provider = RecallMemoryProvider(Source(cache=NoBlocks("oks"), format="oks"))
    provider.initialize("s")
    with caplog.at_level("WARNING", logger="pipeline.hooks.hermes"):
        assert provider.prefetch(HIT) == "" and provider.prefetch(HIT) == ""
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "without inject.format" in warned[0]  # once, not every turn
    assert "inject.format=oks" in warned[0]


def test_prefetch_timeout_setting(tmp_path):
    home = tmp_path
    (home / CONFIG).write_text(
        json.dumps({"endpoint": "http://127.0.0.1:9", "prefetch_timeout": 2})
    )
    provider = RecallMemoryProvider()
    provider.initialize("s", hermes_home=str(home))
    assert provider.prefetch_timeout == 2.0
    (home / CONFIG).write_text(
        json.dumps({"endpoint": "http://127.0.0.1:9", "prefetch_timeout": 0})
    )
    with pytest.raises(ConfigError, match="prefetch_timeout=0; give a positive number"):
        RecallMemoryProvider().initialize("s", hermes_home=str(home))


def test_settings_errors(tmp_path):
    (tmp_path / CONFIG).write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        load_settings(tmp_path)
    (tmp_path / CONFIG).write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        load_settings(tmp_path)
    assert load_settings(tmp_path / "absent") == {}
