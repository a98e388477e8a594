"""A Hermes Agent memory provider over the recall cache (NousResearch/hermes-agent 0.19.0,
``agent/memory_provider.py``: ``MemoryProvider``; ``agent/memory_manager.py``: ``MemoryManager``).

Hermes calls, per turn (``agent/turn_context.py``, ``run_agent.py``):

- ``prefetch(query, session_id)`` before the model call, with the turn's user message, in a thread
  it abandons after 8 s (``_EXTERNAL_PREFETCH_TIMEOUT_S``; a provider whose prefetch is still
  running is skipped the next turn). It returns this turn's recall: the cache's entry of ``query``
  (``cache_dir``: a read), else the entry ``queue_prefetch`` computed for this very text, else the
  recaller's (``endpoint``: ``recall serve`` answers a hit from its cache and computes a miss),
  waited for at most ``prefetch_timeout`` seconds (default 5, under Hermes' 8). Past that it
  injects nothing this turn, logs a warning, and keeps the entry when it arrives for the same text.
- ``queue_prefetch(query, session_id)`` after the turn, with the same user message: computes that
  text's entry in a background thread (the service keeps it: asking again is a hit).

The injected text is the entry's ``injection`` (the format asked: ``format``, default ``oks``;
a cache read gives the precompute's ``inject.format``). An entry with rows and no block (a cache
built without ``inject.format``) injects nothing and logs one warning saying so.
Settings: ``$HERMES_HOME/recall.json`` (``endpoint``, ``cache_dir``, ``namespace``, ``scope``,
``k``, ``format``, ``timeout``, ``prefetch_timeout``). With ``endpoint`` alone the provider is a
standard-library client (Hermes' Python needs nothing else of this package's dependencies);
``cache_dir`` reads the cache in process (polars, pyarrow, numpy). Hermes loads user providers
from ``$HERMES_HOME/plugins/<name>/`` (``plugins/memory/__init__.py``); ``install_plugin``
writes that folder (``recall``), whose ``register(ctx)`` hands Hermes this provider.
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
PREFETCH_TIMEOUT = 5.0  # seconds; Hermes abandons a provider's prefetch after 8
NO_BLOCK = (
    "recall: the entry of this turn has rows but no injection block (the cache was built "
    "without inject.format); nothing is injected: precompute with inject.format=%s, or set "
    "endpoint so recall serve renders it"
)
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
    """Hermes ``MemoryProvider``: ``prefetch`` injects this turn's recall (a cache read, else the
    recaller within ``prefetch_timeout``), ``queue_prefetch`` warms the service."""

    def __init__(
        self, source: Source | None = None, *, prefetch_timeout: float = PREFETCH_TIMEOUT
    ) -> None:
        self.source, self.prefetch_timeout = source, float(prefetch_timeout)
        self._queued: dict[str, tuple[str, dict]] = {}  # session_id → (text, its entry)
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._session = ""
        self._warned = False

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
            settings = load_settings(home)
            where = f"{home}/{CONFIG}"
            self.prefetch_timeout = _seconds(settings.pop("prefetch_timeout", None), where)
            self.source = Source.from_settings(settings, where=where, format="oks")

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """No model-visible tools: recall is injected before each turn."""
        return []

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """This turn's injection for ``query``: the cache's entry, the one ``queue_prefetch``
        computed for this text, else the recaller's within ``prefetch_timeout`` ("" past it)."""
        sid, text = str(session_id or self._session), normalize(query)
        if not text:
            return ""
        try:
            entry = self.source.cached(text)
        except Exception as exc:  # a hook must never break the agent's turn
            log.warning("recall cache read failed: %s", exc)
            entry = None
        if entry is None:
            with self._lock:
                queued = self._queued.get(sid)
                if queued is not None and queued[0] == text:
                    entry = self._queued.pop(sid)[1]
        if entry is None and self.source.recaller is not None:
            box: dict = {}
            thread = self._start(sid, text, box)
            thread.join(self.prefetch_timeout)
            if thread.is_alive():
                log.warning(
                    "recall of this turn took over %.1f s (prefetch_timeout); nothing injected, "
                    "the entry is kept for this text when it arrives",
                    self.prefetch_timeout,
                )
                return ""
            with self._lock:
                if self._queued.get(sid, (None,))[0] == text:
                    del self._queued[sid]  # used now, not again
            entry = box.get("entry")
        return self._block(entry)

    def _block(self, entry: dict | None) -> str:
        block = ((entry or {}).get("injection") or "").strip()
        if not block and (entry or {}).get("rows") and not self._warned:
            self._warned = True
            log.warning(NO_BLOCK, self.source.format if self.source.format != "rows" else "oks")
        return block

    def _start(self, sid: str, text: str, box: dict | None = None) -> threading.Thread:
        """A background recall of ``text`` whose entry is kept as the session's (text, entry)
        (and in ``box["entry"]``)."""

        def run() -> None:
            try:
                entry = self.source.recall(text)
            except Exception as exc:
                log.warning("recall failed: %s", str(exc).splitlines()[0] if str(exc) else exc)
                return
            with self._lock:
                self._queued[sid] = (text, entry)
                if box is not None:
                    box["entry"] = entry

        thread = threading.Thread(target=run, name=f"recall-prefetch-{sid}", daemon=True)
        with self._lock:
            self._threads[sid] = thread
        thread.start()
        return thread

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Compute ``query``'s entry in a background thread (the service keeps it; a ``prefetch``
        of the same text uses it)."""
        sid, text = str(session_id or self._session), normalize(query)
        if text:
            self._start(sid, text)

    def wait(self, session_id: str = "", timeout: float | None = None) -> None:
        """Block until the session's latest background recall (if any) has finished."""
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


def _seconds(value, where: str) -> float:
    """``prefetch_timeout`` of the settings: a positive number of seconds (None: the default)."""
    if value is None:
        return PREFETCH_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: prefetch_timeout={value!r}; give a positive number of seconds")
    return float(value)


def register(ctx: Any) -> None:
    """Hermes's plugin entry: hand the collector this provider."""
    ctx.register_memory_provider(RecallMemoryProvider())
