"""Where a hook gets a recall entry: a cache read (fast, never computes), then a recaller (a
``pipeline.serve.Service`` in process, or ``HttpRecaller`` for a running ``recall serve``), which
computes a miss. An entry is ``Service.recall``'s dict: ``rows`` (``node_id``, ``doc_id``,
``rank``, ``score``, score components, ``title``, ``text``), ``injection`` (str or None),
``scope_version``; a cache read gives ``RecallCache.get``'s entry (the same keys and more), its
rows cut to ``k`` as the recaller cuts them. A cache read is the precompute's build as it is: its
injection is in the precompute's ``inject.format`` whatever ``format`` says, and it is not checked
against the store's current scope versions (``recall serve`` checks both).
"""

from __future__ import annotations

from typing import Any, Protocol

from pipeline.contract.errors import ConfigError
from pipeline.hooks.client import HttpRecaller

SETTINGS = ("endpoint", "cache_dir", "namespace", "scope", "k", "format", "timeout")


class Recaller(Protocol):
    """Anything with ``Service.recall``'s signature."""

    def recall(
        self, text: str, scope: str | None = None, k: int | None = None, format: str = "rows"
    ) -> dict[str, Any]:
        """The entry of ``text`` (computed on a miss); a recaller that takes a ``fields`` keyword
        (``Service``, ``HttpRecaller``) is given the query's fields when a hook has them."""
        ...


def normalize(text: str) -> str:
    """CRLF → LF, then strip (ST-BME's ``normalizeRecallInputText``; the cache's own key
    normalisation, ``pipeline.recallcache.keys.normalise``, also turns a lone CR into LF)."""
    return str(text).replace("\r\n", "\n").strip()


class Source:
    """A cache (``RecallCache``-like: ``get(text, scope=None) -> dict | None``) and/or a recaller.

    ``format``: the injection format asked of the recaller (a cache entry holds the format its
    precompute wrote); ``k``: rows asked of the recaller (None = the recipe's); ``scope``: the
    scope of every lookup unless a call names one.
    """

    def __init__(
        self,
        cache=None,
        recaller: Recaller | None = None,
        *,
        scope: str | None = None,
        k: int | None = None,
        format: str = "rows",
    ) -> None:
        if cache is None and recaller is None:
            raise ConfigError("a recall hook needs cache_dir or endpoint (or both); set one")
        self.cache, self.recaller = cache, recaller
        self.scope, self.k, self.format = scope, k, format

    def cached(
        self, text: str, scope: str | None = None, fields: dict | None = None
    ) -> dict | None:
        """The cache's entry of ``text``, or None (no cache, or a miss). Never computes.
        ``fields``: the query's other columns (context, now, viewer, scene: ``keys.query_key``)
        when it was precomputed with them."""
        if self.cache is None:
            return None
        extra = {"fields": fields} if fields else {}
        entry = self.cache.get(text, scope=scope or self.scope, **extra)
        if entry is None or self.k is None:
            return entry
        return {**entry, "rows": entry["rows"][: self.k]}  # as the recaller cuts a miss

    def recall(
        self, text: str, scope: str | None = None, fields: dict | None = None
    ) -> dict | None:
        """The cache's entry, else the recaller's (which computes a miss, with ``fields``);
        None without either."""
        entry = self.cached(text, scope, fields)
        if entry is None and self.recaller is not None:
            extra = {"fields": fields} if fields else {}
            entry = self.recaller.recall(
                text, scope=scope or self.scope, k=self.k, format=self.format, **extra
            )
        return entry

    @classmethod
    def from_settings(cls, settings: dict, *, where: str, format: str = "rows") -> Source:
        """A Source from a hook's settings mapping (``SETTINGS``): ``cache_dir`` (+ ``namespace``)
        opens a ``RecallCache`` in process; ``endpoint`` talks to ``recall serve`` over HTTP."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; choose from {list(SETTINGS)}")
        cache = None
        if settings.get("cache_dir"):
            from pipeline.recallcache.reader import (
                RecallCache,  # the batch engine's reader, loaded only here
            )

            cache = RecallCache(settings["cache_dir"], namespace=settings.get("namespace"))
        recaller = None
        if settings.get("endpoint"):
            recaller = HttpRecaller(
                settings["endpoint"], timeout=float(settings.get("timeout", 30))
            )
        if cache is None and recaller is None:
            raise ConfigError(f"{where}: set cache_dir (read the cache) or endpoint (recall serve)")
        return cls(
            cache,
            recaller,
            scope=settings.get("scope"),
            k=settings.get("k"),
            format=settings.get("format", format),
        )
