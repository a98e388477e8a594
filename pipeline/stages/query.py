"""Query plan (BME's context blend and intent split): the texts that query the dense channel, with their weights.

As ST-BME's ``retrieval/shared-ranking.js`` (``buildContextQueryBlend``, ``buildVectorQueryPlan``,
``buildLexicalQuerySources``) and ``retrieval-enhancer.js`` (``splitIntentSegments``) @ 590da3b:

- Context blend: the current text (0.7), the last assistant turn (0.2) and the previous user turn
  (0.1), renormalised over the parts present and rounded to 3 decimals (``Math.round(w·1000)/1000``:
  0.7/0.9 → 0.778), whitespace-collapsed, cut to 400 characters, duplicate texts dropped
  (case-insensitively). ``context`` is oldest first; its last item is taken as the last assistant
  turn and the one before as the previous user turn.
- Intent split: the current text is split on sentence punctuation and BME's Chinese connectives
  (顺便 另外 还有 对了 然后 而且 并且 同时; no English ones: BME has none); up to 4 segments of
  length ≥ 3 join the plan with the current text's weight, and are lexical sources. A text that
  does not split still gives its one segment, its punctuation stripped ("Harbor fire?" → "Harbor
  fire"), kept where it differs from the text, as BME keeps it. Unlike BME, a '.' splits only at
  the end of a sentence, not inside "2.5".
- ``query_rewrite`` (ReMe) replaces the current text for the dense channel.
Hits of all parts merge per node by the maximum of weight × cosine.
"""

from __future__ import annotations

import math
import re

import polars as pl

from pipeline.adapters.bme_js import unique_strings

CONNECTIVES = [
    "顺便",
    "另外",
    "还有",
    "对了",
    "然后",
    "而且",
    "并且",
    "同时",
]  # splitIntentSegments
SPLIT = re.compile("|".join([r"[，,。；;！!？?\n]+", r"\.(?=\s|$)", *CONNECTIVES]))


def clean(text: str, max_chars: int = 400) -> str:
    """``text`` with whitespace collapsed and trimmed, cut to ``max_chars``."""
    return re.sub(r"\s+", " ", text or "").strip()[:max_chars]


def intent_segments(text: str, max_segments: int = 4, min_len: int = 3) -> list[str]:
    """``splitIntentSegments``: the segments of ``text`` (split at punctuation and BME's Chinese
    connectives, trimmed, ≥ ``min_len`` characters, exact duplicates dropped), at most
    ``max_segments``; a text that does not split gives its one segment (punctuation stripped)."""
    segs = [s.strip() for s in SPLIT.split(str(text or "").strip())]
    return list(dict.fromkeys(s for s in segs if len(s) >= min_len))[: max(1, max_segments)]


def lexical_sources(text: str, max_segments: int = 4) -> list[str]:
    """``buildLexicalQuerySources``: the current text (``clean``) and its intent segments, the first
    of each case-insensitive spelling kept."""
    current = clean(text)
    return _unique([current, *intent_segments(current, max_segments)])


def _unique(texts: list[str]) -> list[str]:
    """shared-ranking.js ``uniqueStrings`` of the cleaned texts (``bme_js.unique_strings``)."""
    return unique_strings([clean(t) for t in texts])


def js_round3(x: float) -> float:
    """``Math.round(x * 1000) / 1000`` (halves round up, as JavaScript's ``Math.round``)."""
    return math.floor(x * 1000 + 0.5) / 1000


def plan(
    queries: pl.DataFrame,
    blend: bool = False,
    intent_split: bool = False,
    weights: tuple[float, float, float] = (0.7, 0.2, 0.1),
    max_segments: int = 4,
) -> pl.DataFrame:
    """(query_idx, text, weight, part) rows; one row per query with weight 1 when both are off."""
    texts = queries["text"].to_list()
    if "query_rewrite" in queries.columns:
        texts = [r or t for r, t in zip(queries["query_rewrite"].to_list(), texts)]
    contexts = queries["context"].to_list() if "context" in queries.columns else [None] * len(texts)
    rows = []
    for qi, (text, ctx) in enumerate(zip(texts, contexts)):
        parts = [("current", clean(text), weights[0])]
        if blend and ctx:
            if len(ctx) >= 1:
                parts.append(("assistant", clean(ctx[-1]), weights[1]))
            if len(ctx) >= 2:
                parts.append(("previous_user", clean(ctx[-2]), weights[2]))
        seen, kept = set(), []
        for name, t, w in parts:
            if t and t.lower() not in seen:
                seen.add(t.lower())
                kept.append((name, t, w))
        total = sum(w for _, _, w in kept) or 1.0
        kept = [(n, t, js_round3(w / total)) for n, t, w in kept]
        if intent_split and kept and kept[0][0] == "current":
            cur, w_cur = kept[0][1], kept[0][2]
            segs = lexical_sources(cur, max_segments)[1:]
            kept[1:1] = [("segment", s, w_cur) for s in segs]
        rows += [(qi, t, w, n) for n, t, w in kept]
    return pl.DataFrame(
        rows,
        schema={"query_idx": pl.Int64, "text": pl.String, "weight": pl.Float64, "part": pl.String},
        orient="row",
    )
