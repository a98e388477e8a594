"""Recall-cache keys that any program can recompute, and the namespace of a dataset + recipe.

An entry of the recall cache is found by **(scope id, text key, recipe)**; the scope version it
was built against is stored with it (``recall serve`` treats a different version as a miss).

- **normalised text** (:func:`normalise`): the query text with every CRLF (``\\r\\n``) and then
  every lone CR (``\\r``) replaced by LF (``\\n``), then leading and trailing whitespace stripped
  (Python's ``str.strip()``: Unicode whitespace). Nothing else changes (case, inner spaces,
  Unicode form).
- **text key** (:func:`text_key`): ``sha256(normalised.encode("utf-8")).hexdigest()``, 64 lowercase
  hex digits. This is the key of every plain query (text and scope only). In Python::

      norm = text.replace("\\r\\n", "\\n").replace("\\r", "\\n").strip()
      hashlib.sha256(norm.encode("utf-8")).hexdigest()

- **query fields** (:func:`query_key`): a query row that also carries a field that changes its
  recall (:data:`RESULT_FIELDS`: ``context``, ``viewer``, ``now``, ``query_rewrite``, BME's scene
  columns, ``goals``, a stored ``embedding``, ``team``, ``agent_id``) with a non-null value (an
  empty list counts as null) is keyed by ``sha256(normalised + "\\n" + fields)`` where ``fields``
  is ``json.dumps({name: value}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` of
  those non-null fields, timestamps as ISO 8601 in UTC (``2026-01-02T03:04:05+00:00``, microseconds
  only when non-zero). ``query_id``, ``doc_scope`` (it is the scope) and ``group`` (it orders the
  OKS injection history, never the rows) are not part of it; other columns (``category``, …)
  change nothing and are ignored.
- **scope id** (:func:`scope_id`): ``all`` for a query without ``doc_scope``; else the first 12 hex
  digits of ``sha256(json.dumps(sorted(set(doc_scope))).encode())`` (``json.dumps`` defaults:
  ``", "`` between items, ASCII escapes), e.g. doc_scope ``["c1"]`` → ``sha256(b'["c1"]')[:12]``.
- **recipe**: ``pipeline.recallcache.recipe.recipe_hash`` of the resolved config (16 hex digits); one
  namespace holds one recipe, so a client names the namespace, not the recipe.
- **scope version**: ``pipeline.recallcache.recipe`` (a hash of the scope's nodes, the edges touching them,
  and, for the collab channel, the team's log rows).

A **namespace** (:func:`namespace`) is ``<dataset name>-<12 hex>``: the hex digits hash the dataset
identity (its name and its resolved ``data`` config: adapter, path, options), the recipe's
settings (``recipe_hash(cfg, versions=False)``: a code upgrade keeps the namespace, and its entries
miss by their recipe key) and the ``inject`` settings (the blocks it stores); the ``namespace=``
option overrides it. One ``cache_dir`` holds any
number of namespaces side by side.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

from pipeline.contract.errors import ConfigError
from pipeline.contract.schema import SCENE_QUERY_COLUMNS
from pipeline.recallcache.recipe import scope_id, scope_of

__all__ = ["normalise", "text_key", "query_key", "scope_id", "scope_of", "scope_tuple", "namespace"]

RESULT_FIELDS = (
    "context",
    "viewer",
    "now",
    "query_rewrite",
    *SCENE_QUERY_COLUMNS,
    "goals",
    "embedding",
    "team",
    "agent_id",
)
NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def normalise(text: str) -> str:
    """CRLF and lone CR → LF, then leading/trailing whitespace stripped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def text_key(text: str) -> str:
    """sha256 hex digest of the normalised text's UTF-8 bytes: the key of a plain query."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def _plain(value):
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return when.astimezone(dt.timezone.utc).isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def query_key(text: str, fields: dict | None = None) -> str:
    """The key of a query row: :func:`text_key` when none of ``fields`` (a query row's columns)
    that is in :data:`RESULT_FIELDS` is set, else the hash of the text and those fields."""
    got = {
        k: _plain(v)
        for k, v in (fields or {}).items()
        if k in RESULT_FIELDS and v is not None and not (isinstance(v, (list, tuple)) and not v)
    }
    if not got:
        return text_key(text)
    extra = json.dumps(got, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{normalise(text)}\n{extra}".encode("utf-8")).hexdigest()


def namespace(
    dataset_name: str, data: dict, recipe: str, inject: dict, given: str | None = None
) -> str:
    """The cache namespace of a dataset under a recipe: ``given`` (the ``namespace=`` option) when
    set, else ``<dataset name>-<12 hex>`` of the dataset's identity (its name and resolved ``data``
    config), ``recipe`` (``recipe_hash(cfg, versions=False)``) and the resolved ``inject``
    settings (``recipe.namespace_parts`` gives these four of a config)."""
    if given:
        if not NAME_OK.match(str(given)):
            raise ConfigError(
                f"namespace={given!r}: use letters, digits, '.', '_' or '-' (at most 128), "
                "starting with a letter or digit"
            )
        return str(given)
    ident = {"name": dataset_name, "data": data, "recipe": recipe, "inject": inject}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", dataset_name).strip("._-")[:48] or "data"
    return f"{slug}-{digest[:12]}"


def require_utf8(value: str, what: str) -> str:
    """``value`` when it encodes as UTF-8; a ConfigError naming ``what`` for a lone surrogate
    (``"\\ud800"`` in JSON, a non-UTF-8 byte in a command line argument), which no key can hash."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode("utf-8")[:80]
        raise ConfigError(f"{what} {shown!r} is not valid UTF-8 text; send UTF-8") from None
    return value


def scope_tuple(scope) -> tuple[str, ...] | None:
    """A request's scope as ``recipe.scope_of`` has it: None (the whole corpus), a doc_scope
    string, or a list of them. A ConfigError for anything else, an empty or control character
    entry, an absolute path, a ``.``/``..`` segment or a lone surrogate."""
    if scope is None:
        return None
    items = [scope] if isinstance(scope, str) else scope
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError(f"scope={scope!r}: give a doc_scope string or a non-empty list of them")
    for s in items:
        if not isinstance(s, str) or not s or len(s) > 1024:
            raise ConfigError(f"scope entry {s!r}: give a non-empty string (at most 1024 chars)")
        if any(ord(c) < 32 for c in s) or s.startswith("/") or "\\" in s:
            raise ConfigError(f"scope entry {s!r}: no control characters, '\\' or leading '/'")
        if any(part in (".", "..") for part in s.split("/")):
            raise ConfigError(f"scope entry {s!r}: '.' and '..' segments are not allowed")
        require_utf8(s, "scope entry")
    return scope_of(list(items))
