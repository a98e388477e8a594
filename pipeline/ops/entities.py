"""LLM-free entity mentions: capitalised spans, years and numbers, quoted titles (HippoRAG's phrase
nodes without an extractor model), normalised so that mentions of one entity meet in one key.

``extract(text)`` returns the distinct normalised keys of a text, sorted. Everything is regular
expressions over the raw text; the same function reads passages and queries.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

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
