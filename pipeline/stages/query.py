"""Query plan (BME's context blend and intent split): the texts that query the dense channel, with their weights.

- Context blend: the current text (0.7), the last assistant turn (0.2) and the previous user turn
  (0.1), renormalised over the parts present, whitespace-collapsed, cut to 400 characters,
  duplicate texts dropped. ``context`` is oldest first; its last item is taken as the last assistant
  turn and the one before as the previous user turn.
- Intent split: the current text is also split on sentence punctuation and connectives (BME's
  Chinese ones and English equivalents); up to 4 segments of length ≥ 3 join the plan with the
  current text's weight. Unlike BME, a '.' splits only at the end of a sentence, not inside "2.5".
- ``query_rewrite`` (ReMe) replaces the current text for the dense channel.
Hits of all parts merge per node by the maximum of weight × cosine.
"""

from __future__ import annotations

import re

import polars as pl

CONNECTIVES = [
    "顺便",
    "另外",
    "还有",
    "对了",
    "然后",
    "而且",
    "并且",
    "同时",
    "by the way",
    "and then",
    "besides",
    "also",
]
SPLIT = re.compile(
    "|".join(
        [r"[，,。；;！!？?\n]", r"\.(?=\s|$)"]
        + [rf"\b{re.escape(c)}\b" if c.isascii() else re.escape(c) for c in CONNECTIVES]
    ),
    re.IGNORECASE,
)


def clean(text: str, max_chars: int = 400) -> str:
    """``text`` with whitespace collapsed and trimmed, cut to ``max_chars``."""
    return re.sub(r"\s+", " ", text or "").strip()[:max_chars]


def intent_segments(text: str, max_segments: int = 4, min_len: int = 3) -> list[str]:
    """Segments of ``text`` split at punctuation and connectives; none when it does not split."""
    segs = list(dict.fromkeys(s.strip() for s in SPLIT.split(text) if len(s.strip()) >= min_len))
    return segs[:max_segments] if len(segs) > 1 else []


def plan_for(cfg, queries: pl.DataFrame) -> pl.DataFrame:
    """:func:`plan` with the run config's ``query`` settings (the embed stage's query parts)."""
    q = cfg.query
    return plan(queries, q.blend, q.intent_split, tuple(q.weights), q.max_segments)


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
            if t and t not in seen:
                seen.add(t)
                kept.append((name, t, w))
        total = sum(w for _, _, w in kept) or 1.0
        kept = [(n, t, w / total) for n, t, w in kept]
        if intent_split:
            w_cur = kept[0][2]
            kept += [
                ("segment", s, w_cur)
                for s in intent_segments(kept[0][1], max_segments)
                if s not in seen
            ]
        rows += [(qi, t, w, n) for n, t, w in kept]
    return pl.DataFrame(
        rows,
        schema={"query_idx": pl.Int64, "text": pl.String, "weight": pl.Float64, "part": pl.String},
        orient="row",
    )
