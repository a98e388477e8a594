"""ST-BME's lexical unit-coverage score (docs/presets.md, ``bme``: lexical score), for (query, node) pairs.

units(text): lower-cased, whitespace-collapsed, first 600 characters; runs of ``[a-z0-9]`` or CJK of
length ≥ 2, plus every character bigram of CJK runs longer than 2; deduplicated.
fieldMatch(field, sources; e, inc, ov) = max over sources of e (equal), inc (one contains the other,
both ≥ 2 chars) or ov × coverage (|units(src) ∩ units(field)| / |units(src)|), capped at 1.
lexical = min(1, max(P, 0.82·S, 0.7·T, 0.75·P + 0.35·S + 0.2·T)) with P over name/title
(1, 0.92, 0.72), S over summary-like fields (0.82, 0.68, 0.52), T over all of them joined
(0.65, 0.55, 0.45). Sources are the query's current text and its intent segments.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

import polars as pl

RUN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]+")


@lru_cache(maxsize=200_000)
def units(text: str) -> frozenset[str]:
    """The text's lexical units: ASCII/CJK runs of length ≥ 2 plus CJK bigrams, from its first 600 characters."""
    t = re.sub(r"\s+", " ", (text or "").lower()).strip()[:600]
    out = set()
    for run in RUN.findall(t):
        if len(run) >= 2:
            out.add(run)
        if "\u4e00" <= run[0] <= "\u9fff" and len(run) > 2:
            out.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(out)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", (text or "").lower()).strip()[:600]


def field_match(field: str, sources: list[str], e: float, inc: float, ov: float) -> float:
    """Best match of ``field`` over ``sources``: ``e`` equal, ``inc`` containment, else ``ov`` × unit coverage."""
    f = _norm(field)
    if not f:
        return 0.0
    best = 0.0
    for src in sources:
        s = _norm(src)
        if not s:
            continue
        if s == f:
            best = max(best, e)
        elif min(len(s), len(f)) >= 2 and (s in f or f in s):
            best = max(best, inc)
        us = units(s)
        if us:
            best = max(best, ov * len(us & units(f)) / len(us))
    return min(best, 1.0)


def lexical(sources: list[str], names: list[str], summaries: list[str]) -> float:
    """The lexical coverage score in [0, 1] of a node's names and summaries against the query sources."""
    p = max((field_match(x, sources, 1.0, 0.92, 0.72) for x in names if x), default=0.0)
    s = max((field_match(x, sources, 0.82, 0.68, 0.52) for x in summaries if x), default=0.0)
    t = field_match(" ".join(x for x in names + summaries if x), sources, 0.65, 0.55, 0.45)
    if p == s == t == 0:
        return 0.0
    return min(1.0, max(p, 0.82 * s, 0.7 * t, 0.75 * p + 0.35 * s + 0.2 * t))


def column(df: pl.DataFrame, sources: Callable[[str], list[str]]) -> pl.Series:
    """``lexical`` for every (query, node) row of ``df`` (``query_idx``, ``query_text`` and the node's
    fields): ``lex_names`` / ``lex_fields`` lists where the row has them (ST-BME's own field lists),
    else ``title`` and ``description`` / ``text`` / ``status``; the query's sources are
    ``sources(text)`` (``stages.query.lexical_sources``: the text and its intent segments)."""
    own = {c for c in ("lex_names", "lex_fields") if isinstance(df.schema.get(c), pl.List)}
    none = pl.Series([None] * df.height)
    ln = df["lex_names"] if "lex_names" in own else none
    lf = df["lex_fields"] if "lex_fields" in own else none
    srcs: dict[int, list[str]] = {}
    out = []
    rows = df.select(
        "query_idx", "query_text", "title", "description", "text", "status"
    ).iter_rows()
    for (qi, qt, ti, de, tx, st), names, fields in zip(rows, ln, lf):
        if qi not in srcs:
            srcs[qi] = sources(qt or "")
        names = list(names) if names is not None else [ti or ""]
        fields = list(fields) if fields is not None else [de or "", tx or "", st or ""]
        out.append(lexical(srcs[qi], names, fields))
    return pl.Series(out, dtype=pl.Float64)
