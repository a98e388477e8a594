"""How ST-BME's own normalisers read a graph's loose values (ST-BME @ 590da3b), for the adapter.

ST-BME never rejects a list field that holds a scalar: ``uniqueStrings`` / ``uniqueIds``
(``graph/knowledge-state.js``, ``graph/story-timeline.js``) take ``Array.isArray(v) ? v : [v]`` and
``String(v ?? "").trim()`` each item, so ``knownNodeIds: 5`` is the id ``"5"`` and ``aliases: 5``
the alias ``"5"``; ``normalizeScopeRegionList`` (``graph/memory-scope.js``) splits region text on
its separators; a timeline whose ``segments`` is not a list has none. These functions do the same,
so a graph ST-BME loads loads here with the same meaning, and never raises.
"""

from __future__ import annotations

import math
import re

SCOPE_REGION_TEXT_KEYS = ("name", "title", "label", "value", "text")  # memory-scope.js
_REGION_ARROWS = re.compile(r"[＞>→]+")
_REGION_SPLIT = re.compile(r"[,\n，/\\、；;|]+")  # splitScopeRegionText, allowSlash


def js_number(value) -> float:
    """JavaScript's ``Number(value)`` for JSON values (NaN where JS gives NaN)."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0.0
        try:
            return float(int(text, 0)) if text[:2].lower() in ("0x", "0o", "0b") else float(text)
        except ValueError:
            return math.nan
    if isinstance(value, list):
        return js_number(value[0]) if len(value) == 1 else (0.0 if not value else math.nan)
    return math.nan


def js_string(value) -> str:
    """JavaScript's ``String(value ?? "")`` for JSON values (``5.0`` → ``"5"``, ``true`` → ``"true"``,
    an object → ``"[object Object]"``, a list → its items joined by commas)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        text = repr(value)
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)
    if isinstance(value, list):
        return ",".join(js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def as_list(value) -> list:
    """``Array.isArray(value) ? value : [value]`` (None stays one empty item, as in ST-BME)."""
    return value if isinstance(value, list) else [value]


def unique_strings(value) -> list[str]:
    """``uniqueStrings``: trimmed, non-empty, first of each case-insensitive spelling kept."""
    out, seen = [], set()
    for v in as_list(value):
        s = js_string(v).strip()
        if s and s.lower() not in seen:
            seen.add(s.lower())
            out.append(s)
    return out


def unique_ids(value, limit: int = 512) -> list[str]:
    """``uniqueIds`` (knowledge-state.js): trimmed, non-empty, exact duplicates dropped, at most
    ``KNOWLEDGE_ENTRY_LIMIT`` (512)."""
    return list(dict.fromkeys(s for v in as_list(value) if (s := js_string(v).strip())))[:limit]


def record(value) -> dict:
    """An object field read as ST-BME reads it: a non-object is ``{}`` (``entry.adjacent`` of a
    string is ``undefined``)."""
    return value if isinstance(value, dict) else {}


def _region_text(value) -> str:
    """``extractScopeRegionText``: a string or number, else an object's first text key."""
    if value is None or isinstance(value, (bool, list)):
        return ""
    if isinstance(value, (str, int, float)):
        return js_string(value).strip()
    if isinstance(value, dict):
        for key in SCOPE_REGION_TEXT_KEYS:
            c = value.get(key)
            if isinstance(c, (str, int, float)) and not isinstance(c, bool):
                return js_string(c).strip()
    return ""


def region_list(value) -> list[str]:
    """``normalizeScopeRegionList`` with ``allowSlash``: lists walked, each text split on
    ``> → , / \\ 、 ; |`` and newlines, tokens trimmed, first of each case-insensitive spelling."""
    out, seen = [], set()

    def visit(v) -> None:
        if isinstance(v, list):
            for x in v:
                visit(x)
            return
        text = _region_text(v)
        if not text:
            return
        text = _REGION_ARROWS.sub("/", text).replace("\r", "\n").strip()
        parts = [p.strip() for p in _REGION_SPLIT.split(text) if p.strip()] or [text]
        for p in parts:
            if p.lower() not in seen:
                seen.add(p.lower())
                out.append(p)

    visit(value)
    return out
