"""OKS's ``native`` and ``fusion`` search backends as array code (open-agent-power/open-knowledge-studio
@ 6a281b47, v0.6.5; no config, no I/O).

``native`` is ``recall.py::_recall_knowledge_with_context``, the "6+1 factor" scorer of a page for a
query (``_compute_relevance_components``), all in float64 and in OKS's order of operations:

- token overlap ``|Q ∩ P|·0.3 + idf_overlap``: ``Q`` the query's ``_tokenize`` set, ``P`` the
  page's (over ``"{title} {body} {tags}"`` lower-cased), ``idf_overlap`` = the IDF weight of the
  query words found as substrings of that text over the weight of all of them, IDF
  ``ln((N + 1)/(df + 1)) + 1`` with ``df`` the pages whose ``"{title} {body}"`` holds the word
  (``estimate_idf``: every listed page counts, archived and dropped ones too);
- ``+ 1.0`` whole query (over 3 characters) in the title, ``+ 0.3`` per query word in the title,
  ``+ 0.5`` whole query in the body (``base``); no query match (``base`` 0): not a hit;
- ``× type`` (anti-pattern 1.5, strategy 0.8, concept 0.6, other 0.5) ``× 0.5`` for a generic
  title (index, overview, ...);
- ``+ 2.0`` review ``decision_correct: false``, ``+ 1.0`` review ``outcome: failure``,
  ``+ 0.5 ×`` the page's memory-curve score (``store.py::compute_score``: :func:`memory_scores`);
- ``+ 0.8`` page area among the goals' domains, ``+ 0.4`` a goal keyword in the text (each only
  when the relevance so far is positive).

Pages archived, dropped or superseded are not hits; hits have a positive relevance and are
ordered by relevance, then slug. ``fusion`` (``search/fusion.py``) is :func:`fusion_scores`.
"""

from __future__ import annotations

import math

import numpy as np

TYPE_MULTIPLIER = {"anti-pattern": 1.5, "strategy": 0.8, "concept": 0.6}
OTHER_TYPE = 0.5
GENERIC_TITLES = frozenset(
    "index overview readme 目录 概述 总览 首页 introduction conclusion background summary".split()
)
DECAY_LAMBDA = {"concept": 0.0, "strategy": 0.014, "anti-pattern": 0.010}  # store.py
OTHER_LAMBDA = 0.030
PIN_BONUS = 0.5  # store.py DEFAULT_CONFIG decay.pin_bonus
FTS5_WEIGHT, NATIVE_WEIGHT = 0.7, 0.3  # search/fusion.py


def idf(df: np.ndarray, n: int) -> np.ndarray:
    """``estimate_idf``: ``ln((n + 1)/(df + 1)) + 1`` per word (all 1 when ``n`` is 0)."""
    df = np.asarray(df, dtype=np.int64)
    if n == 0:
        return np.ones(len(df))
    return np.array([math.log((n + 1) / (d + 1)) + 1.0 for d in df.tolist()])


def memory_scores(
    importance: np.ndarray,
    lam: np.ndarray,
    days: np.ndarray,
    uses: np.ndarray,
    pinned: np.ndarray,
    active: np.ndarray,
    zero: np.ndarray,
) -> np.ndarray:
    """``store.py::compute_score`` per page: ``(importance·e^(−λ·days) + 0.5·ln(1 + uses) + 0.5 if
    pinned) × 1.2 if active``, 0 where ``zero`` (archived or dropped). Each value in math's own
    order (``math.exp``/``math.log``, as OKS)."""
    out = np.empty(len(importance))
    for i, (imp, la, d, u, p, a, z) in enumerate(
        zip(*(np.asarray(x).tolist() for x in (importance, lam, days, uses, pinned, active, zero)))
    ):
        s = imp * math.exp(-la * d) + 0.5 * math.log(1 + u) + (PIN_BONUS if p else 0.0)
        out[i] = 0.0 if z else (s * 1.2 if a else s)
    return out


def idf_overlap(weights, hits):
    """``compute_term_overlap`` for a block of queries: ``weights`` (queries × words, 0 where a
    query has fewer words) the IDF of each query word, ``hits`` (queries × words × pages) whether
    the word is a substring of the page's text. The weights are summed word by word in order."""
    xp = _xp(weights)
    total = xp.zeros(weights.shape[0])
    hit = xp.zeros((hits.shape[0], hits.shape[2]))
    for j in range(weights.shape[1]):
        total = total + weights[:, j]
        hit = hit + weights[:, j, None] * hits[:, j, :]
    ok = total > 0
    return xp.where(ok[:, None], hit / xp.where(ok, total, 1.0)[:, None], 0.0)


def relevance(c: dict):
    """(relevance, hit) of a block of queries × pages from the factor arrays of ``c`` (queries ×
    pages unless noted): ``overlap`` (shared token count), ``idf_overlap``, ``title_terms`` (query
    words in the title), ``title_sub`` / ``body_sub`` (whole query in title / body), ``type_mult``,
    ``generic`` (pages: 0.5 or 1), ``decision`` / ``failure`` (pages: review bonuses 2.0 / 1.0 or
    0), ``memory`` (pages), ``area`` / ``keyword`` (goal matches), ``eligible`` (pages) and
    ``has_query`` (queries)."""
    xp = _xp(c["idf_overlap"])
    token = c["overlap"] * 0.3 + c["idf_overlap"] * 1.0
    base = token + c["title_sub"] * 1.0 + c["title_terms"] * 0.3 + c["body_sub"] * 0.5 + 0.0
    rel = base * c["type_mult"][None, :] * c["generic"][None, :]
    rel = rel + c["decision"][None, :]
    rel = rel + c["failure"][None, :]
    rel = rel + c["memory"][None, :] * 0.5
    rel = rel + xp.where((rel > 0) & c["area"], 0.8, 0.0)
    rel = rel + xp.where((rel > 0) & c["keyword"], 0.4, 0.0)
    matched = (base != 0) | ~c["has_query"][:, None]
    return rel, matched & c["eligible"][None, :] & (rel > 0)


def round3(values: np.ndarray) -> np.ndarray:
    """Python's ``round(v, 3)`` of each value (OKS rounds the native relevance it hands fusion)."""
    return np.array([round(v, 3) for v in np.asarray(values, dtype=np.float64).tolist()])


def fusion_scores(f: np.ndarray, f_max: np.ndarray, n: np.ndarray, n_max: np.ndarray) -> np.ndarray:
    """``FusionBackend.search``: ``0.7·f/f_max + 0.3·n/n_max`` per page, ``f`` its fts5 score,
    ``n`` its rounded native relevance (0 outside native's list), each max per query (``or 1.0``:
    a zero maximum divides by 1)."""
    f_max = np.where(f_max == 0, 1.0, f_max)
    n_max = np.where(n_max == 0, 1.0, n_max)
    return FTS5_WEIGHT * (f / f_max) + NATIVE_WEIGHT * (n / n_max)


def _xp(a):
    from pipeline.core.backend import namespaces

    return namespaces(a)[0]
