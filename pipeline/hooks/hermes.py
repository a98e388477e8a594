"""A Hermes Agent memory provider over the recall cache (NousResearch/hermes-agent,
``agent/memory_provider.py``: ``MemoryProvider``).

- ``prefetch(query, session_id)`` — called before each model call, "should be fast … return
  cached results": the cache's entry of ``query`` (a read, never a computation); on a miss, the
  entry ``queue_prefetch`` computed for this session after the previous turn (used once; never
  waited for).
- ``queue_prefetch(query, session_id)`` — called after each turn: computes ``query``'s entry in a
  background thread through ``recall serve`` (``endpoint``; the server writes it back to its cache)
  or an in-process recaller, for the next turn's ``prefetch``.

The injected text is the entry's ``injection`` (the format asked: ``format``, default ``oks``).
Settings: ``$HERMES_HOME/recall.json`` (``endpoint``, ``cache_dir``, ``namespace``, ``scope``,
``k``, ``format``, ``timeout``). Hermes loads user providers from ``$HERMES_HOME/plugins/<name>/``
(``plugins/memory/__init__.py``); ``install_plugin`` writes that folder (``recall``), whose
``register(ctx)`` hands Hermes this provider.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from pipeline.contract.errors import ConfigError
from pipeline.hooks.source import Source, normalize

log = logging.getLogger(__name__)
CONFIG = "recall.json"
NAME = "recall"
# Hermes's loader takes a user plugin folder whose __init__.py mentions MemoryProvider or
# register_memory_provider (plugins/memory/__init__.py::_is_memory_provider_dir); this one does.
PLUGIN_INIT = '''"""recall-pipeline's Hermes memory provider (a MemoryProvider; pipeline.hooks.hermes)."""
from pipeline.hooks.hermes import register  # noqa: F401
'''
PLUGIN_YAML = (
    'name: recall\nversion: 0.1.0\ndescription: "Recall from the recall-pipeline cache."\n'
)


def _base():
    try:  # inside Hermes: its ABC, so Hermes's loader and isinstance checks accept the provider
        from agent.memory_provider import MemoryProvider
    except ImportError:  # outside Hermes (tests of this module alone, docs): a plain base
        return object
    return MemoryProvider


def load_settings(hermes_home: str | Path) -> dict:
    """``$HERMES_HOME/recall.json`` as a mapping ({} without the file)."""
    path = Path(hermes_home).expanduser() / CONFIG
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc.msg}); write a JSON object") from exc
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: not a JSON object; write {{"endpoint": ...}}')
    return data


def install_plugin(hermes_home: str | Path, settings: dict | None = None) -> Path:
    """Write ``$HERMES_HOME/plugins/recall/`` (and ``recall.json`` from ``settings`` if given)."""
    home = Path(hermes_home).expanduser()
    plugin = home / "plugins" / NAME
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "__init__.py").write_text(PLUGIN_INIT, encoding="utf-8")
    (plugin / "plugin.yaml").write_text(PLUGIN_YAML, encoding="utf-8")
    if settings is not None:
        (home / CONFIG).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return plugin


class RecallMemoryProvider(_base()):
    """Hermes ``MemoryProvider``: ``prefetch`` reads the cache, ``queue_prefetch`` warms it."""

    def __init__(self, source: Source | None = None) -> None:
        self.source = source
        self._queued: dict[str, dict] = {}  # session_id → the entry for its next turn
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._session = ""

    @property
    def name(self) -> str:
        """The provider's name in Hermes's ``memory.provider`` setting."""
        return NAME

    def is_available(self) -> bool:
        """True when a source is given or ``recall.json`` names a cache or an endpoint."""
        if self.source is not None:
            return True
        try:
            from hermes_constants import get_hermes_home

            s = load_settings(get_hermes_home())
        except (ImportError, ConfigError):
            return False
        return bool(s.get("endpoint") or s.get("cache_dir"))

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Open the source from ``$HERMES_HOME/recall.json`` unless one was given."""
        self._session = str(session_id or "")
        if self.source is None:
            home = kwargs.get("hermes_home")
            self.source = Source.from_settings(
                load_settings(home), where=f"{home}/{CONFIG}", format="oks"
            )

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """No model-visible tools: recall is injected before each turn."""
        return []

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """The cache's injection for ``query``; on a miss the queued one for this session."""
        sid = str(session_id or self._session)
        try:
            entry = self.source.cached(query)
        except Exception as exc:  # a hook must never break the agent's turn
            log.warning("recall cache read failed: %s", exc)
            entry = None
        if entry is None:  # never waits: a recall still running is left for a later turn
            with self._lock:
                entry = self._queued.pop(sid, None)
        return ((entry or {}).get("injection") or "").strip()

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Compute ``query``'s entry in a background thread, for the next turn's ``prefetch``."""
        sid, text = str(session_id or self._session), normalize(query)
        if not text:
            return

        def run() -> None:
            try:
                entry = self.source.recall(text)
            except Exception as exc:
                log.warning("recall for the next turn failed: %s", exc)
                return
            with self._lock:
                self._queued[sid] = entry

        thread = threading.Thread(target=run, name=f"recall-prefetch-{sid}", daemon=True)
        with self._lock:
            self._threads[sid] = thread
        thread.start()

    def wait(self, session_id: str = "", timeout: float | None = None) -> None:
        """Block until the session's queued recall (if any) has finished."""
        with self._lock:
            thread = self._threads.pop(str(session_id or self._session), None)
        if thread is not None:
            thread.join(timeout)

    def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
        """Follow Hermes's session id (``/new``, ``/resume``, compression)."""
        if new_session_id:
            self._session = str(new_session_id)

    def shutdown(self) -> None:
        """Wait for the background recalls (each bounded by the source's timeout)."""
        with self._lock:
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.join()


def register(ctx: Any) -> None:
    """Hermes's plugin entry: hand the collector this provider."""
    ctx.register_memory_provider(RecallMemoryProvider())
