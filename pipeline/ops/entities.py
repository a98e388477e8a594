"""LLM-free entity mentions: capitalised spans, years and numbers, quoted titles (HippoRAG's phrase
nodes without an extractor model), normalised so that mentions of one entity meet in one key.

``extract(text)`` returns the distinct normalised keys of a text, sorted. Everything is regular
expressions over the raw text; the same function reads passages and queries. ``extract_ids``
gives the keys of many texts at once, as ``extract`` gives them, from one scan of their join.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import chain

import numpy as np
import polars as pl

from pipeline.ops import sparse_entries

# A capitalised word: an upper-case letter, then letters, digits, apostrophes, hyphens, dots.
_CAP = r"[A-Z][\w'’\-\.]*"
# Lower-case words allowed *inside* a name ("University of Oxford", "Ludwig van Beethoven").
_JOIN = r"(?:of|the|de|du|da|di|del|der|la|le|van|von|and|&|for|on|in|y)"
# Not after a word character or apostrophe. The look-behind comes after the first letter (two
# characters back) so that the scan jumps from capital to capital; the same matches as
# (?<![\w'’])[A-Z]... (tests check it).
_SPAN = re.compile(rf"[A-Z](?<![\w'’][A-Z])[\w'’\-\.]*(?:[ \t]+(?:{_JOIN}[ \t]+)*{_CAP})*")
_NUMBER = re.compile(r"\d(?<![\w.]\d)[\d,]*(?:\.\d+)?(?![\w])")  # = (?<![\w.])\d...
_QUOTED = re.compile(r"[\"“”«]([^\"“”«»]{3,80})[\"“”»]")
_POSSESSIVE = re.compile(r"['’]s?$")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_SPACE = re.compile(r"\s+")

# Capitalised words that start sentences and questions far more often than they name things.
STOP = frozenset(
    """
a an the this that these those there then than what when where which who whom whose why how is are was
were be been being do does did done has have had having i i'm i've i'd i'll me my mine we us our you your
he him his she her hers it its they them their and or but if so not no yes also as at by for from in into
of on onto to with without about after before during since until while over under again once here all any
both each few more most other some such only own same too very can will just should now may might must
would could shall let lets hey hi hello oh ok okay well yeah thanks thank wow sure great good nice really
in on at mr mrs ms dr st nothing something anything everything none nobody someone everyone anyone
maybe perhaps because although though however still even never always sometimes today tomorrow yesterday
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
""".split()
)


@lru_cache(maxsize=1 << 16)  # a pure function of short strings that repeat (names, stop words)
def normalise(s: str) -> str:
    """Case-folded, accents and possessives stripped, a leading article dropped, spaces collapsed."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(c for c in s if not unicodedata.combining(c))
    s = _SPACE.sub(" ", s.casefold().replace("’", "'")).strip()
    s = _POSSESSIVE.sub("", _EDGE_PUNCT.sub("", s))
    s = _EDGE_PUNCT.sub("", s)
    if s.startswith("the "):
        s = s[4:]
    return s


@lru_cache(maxsize=1 << 16)  # names repeat across notes
def _span_keys(span: str, subwords: bool) -> tuple[str, ...]:
    """The normalised keys of one capitalised span: the span without stop-listed capitalised
    words at either end ("When Paris" → "paris"), and with ``subwords`` its capitalised words."""
    words = span.split()
    while words and normalise(words[0]) in STOP:
        words.pop(0)
    while words and normalise(words[-1]) in STOP:
        words.pop()
    if not words:
        return ()
    out = [" ".join(words)]
    if subwords and len(words) > 1:
        out += [w for w in words if w[:1].isupper() and normalise(w) not in STOP]
    return tuple(normalise(w) for w in out)


def extract(
    text: str | None,
    *,
    numbers: bool = True,
    quoted: bool = True,
    subwords: bool = False,
    min_len: int = 2,
) -> list[str]:
    """Distinct normalised entity keys of ``text`` (sorted)."""
    if not text:
        return []
    keys = {k for span in _SPAN.findall(text) for k in _span_keys(span, subwords)}
    raw = [m.replace(",", "") for m in _NUMBER.findall(text)] if numbers else []
    if quoted and ('"' in text or "“" in text or "”" in text or "«" in text):  # opening marks
        raw += _QUOTED.findall(text)
    keys.update(map(normalise, raw))
    return sorted(k for k in keys if len(k) >= min_len and k not in STOP)


SEP = "\x00"  # joins the texts of :func:`extract_ids`: no pattern matches it, or across it
_SPAN_OR_SEP = re.compile(f"{SEP}|{_SPAN.pattern}")
_NUMBER_OR_SEP = re.compile(f"{SEP}|{_NUMBER.pattern}")
# texts where _NUMBER may match (a superset, in polars' regex dialect): an ASCII digit at the start
# or after a character outside [A-Za-z0-9_.] (all of which are in Python's \w, or "."), or any
# non-ASCII character (Unicode digits, and Python's word characters beyond ASCII)
_MAY_NUMBER = r"(?:^|[^A-Za-z0-9_.])[0-9]|[^\x00-\x7f]"
_OPENING = r"[\"“”«]"  # the marks that open a _QUOTED title


def _joined(pattern: re.Pattern, texts: list[str], at: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(text, match) of every match of ``pattern`` (``SEP|<p>``) in each of ``texts``, whose
    indices are ``at``: one ``findall`` over the texts joined by ``SEP``. ``<p>`` never matches
    ``SEP`` or across it, and ``SEP`` is no word character, so each text's matches are its own
    ``findall``'s."""
    found = pattern.findall(SEP.join(texts))
    sep = np.fromiter(map(SEP.__eq__, found), bool, len(found))
    return at[np.cumsum(sep)[~sep]], [m for m in found if m != SEP]


def _flagged(col: pl.Series, pattern: str) -> np.ndarray:
    """Indices of the texts of ``col`` in which polars finds ``pattern``."""
    return np.flatnonzero(col.str.contains(pattern).fill_null(False).to_numpy())


def extract_ids(
    texts: list[str | None],
    *,
    numbers: bool = True,
    quoted: bool = True,
    subwords: bool = False,
    min_len: int = 2,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``[extract(t, ...) for t in texts]`` laid end to end (by text, each text's keys sorted) as
    (text index, key index) pairs and the keys they index (distinct, sorted): one regex scan per
    pattern over the joined texts, each distinct capitalised span read once, numbers looked for
    only in the texts that may hold one, titles only in those with an opening quote mark. Texts
    holding ``SEP`` are read one by one."""
    texts = [t or "" for t in texts]
    n = len(texts)
    key_id: dict[str, int] = {}
    if SEP in "".join(texts):
        kw = {"numbers": numbers, "quoted": quoted, "subwords": subwords, "min_len": min_len}
        found = [extract(t, **kw) for t in texts]
        unit = np.repeat(np.arange(n, dtype=np.int64), [len(k) for k in found])
        kid = [key_id.setdefault(k, len(key_id)) for keys in found for k in keys]
        return _distinct_sorted(unit, np.array(kid, np.int64), key_id, min_len)
    text, spans = _joined(_SPAN_OR_SEP, texts, np.arange(n, dtype=np.int64))
    code = {sp: i for i, sp in enumerate(dict.fromkeys(spans))}
    per_span = [
        [key_id.setdefault(k, len(key_id)) for k in _span_keys(sp, subwords)] for sp in code
    ]
    cnt = np.fromiter(map(len, per_span), np.int64, len(per_span))
    flat = np.fromiter(chain.from_iterable(per_span), np.int64, int(cnt.sum()))
    c = np.fromiter(map(code.__getitem__, spans), np.int64, len(spans))
    lo = (np.cumsum(cnt) - cnt)[c]
    unit, kid = [np.repeat(text, cnt[c])], [flat[sparse_entries.spans(np, lo, lo + cnt[c])]]
    col = pl.Series(texts, dtype=pl.String)
    raw = []
    if numbers:
        at = _flagged(col, _MAY_NUMBER)
        t, found = _joined(_NUMBER_OR_SEP, [texts[i] for i in at.tolist()], at)
        unit.append(t)
        raw += [m.replace(",", "") for m in found]
    if quoted:
        for i in _flagged(col, _OPENING).tolist():
            found = _QUOTED.findall(texts[i])
            unit.append(np.full(len(found), i, np.int64))
            raw += found
    kid.append(np.fromiter((key_id.setdefault(normalise(r), len(key_id)) for r in raw), np.int64))
    return _distinct_sorted(np.concatenate(unit), np.concatenate(kid), key_id, min_len)


def _distinct_sorted(
    unit: np.ndarray, kid: np.ndarray, key_id: dict[str, int], min_len: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The distinct (unit, key) pairs whose key (``kid``: its ``key_id``) is kept (``min_len``,
    not stop-listed), by unit then key in code-point order (Python's string order), the key
    indices renumbered into the sorted kept keys."""
    names = sorted(w for w in key_id if len(w) >= min_len and w not in STOP)
    rank = np.full(len(key_id), -1, np.int64)
    rank[[key_id[w] for w in names]] = np.arange(len(names))
    r = rank[kid]
    ok = r >= 0
    width = max(len(names), 1)
    pair = np.sort(unit[ok] * width + r[ok])
    pair = pair[np.r_[True, pair[1:] != pair[:-1]]] if len(pair) else pair
    return pair // width, pair % width, names
