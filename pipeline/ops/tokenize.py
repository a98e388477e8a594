"""Script-aware word splitting for the BM25 channel (``lexical.tokenizer``).

Each splitter takes lower-cased text and returns its words; bm25s then drops stopwords and stems,
which only ever touches Latin words (the English stopword list has no CJK entry and the Snowball
stemmer leaves CJK unchanged). CJK means Han characters (U+3400–4DBF, U+4E00–9FFF, U+F900–FAFF).

- ``english``: bm25s's ``\\b\\w\\w+\\b`` over the whole text (a run of Han characters is one word).
- ``cjk_char``: ReMe's regex tokenizer: every Han character is a word (``cjk_bigrams`` adds each
  adjacent pair); the rest of the text goes through the English pattern.
- ``jieba``: OKS: Han runs are cut by jieba's search mode (rjieba, the Rust port; its dictionary is
  compiled in); words shorter than ``cjk_min_len`` characters dropped (OKS: 2).
- ``fts5``: OKS's FTS5 index exactly (``search/fts5.py`` @ 6a281b47): a text holding a CJK
  character becomes the sorted set of OKS's ``recall._tokenize`` words (Python jieba's search
  mode, markdown punctuation stripped, words under 2 characters and 40 stopwords dropped), then
  SQLite's ``unicode61`` splits and folds what is left (:func:`unicode61`); text without CJK goes
  to ``unicode61`` as it is (1-letter words kept, no stopwords). Queries (:func:`fts5_query`)
  follow OKS's MATCH string: the same preparation, each word stripped of non-word characters,
  ``AND``/``OR``/``NOT``/``NEAR`` (any case) dropped. Case is OKS's (the text is not lower-cased
  first).
- ``reme``: ReMe's ``RegexTokenizer`` exactly (agentscope-ai/ReMe @ c8e12487,
  ``components/tokenizer/regex_tokenizer.py``): the characters U+4E00–9FFF (only those) each a
  word, first, then ``\\b\\w\\w+\\b`` over the text with them blanked, each word lower-cased after
  the split (the text is not lower-cased first). The order matters to ``lexical.order=reme``: ReMe
  adds a query's term scores in this order, in float32.
- ``auto``: per text by script: Latin text through the English pattern, each Han run as its
  characters plus every adjacent pair (the dictionary-free CJK indexing of Lucene's CJK analyzer), so
  a Chinese note with English terms gets both; text without Han characters is split exactly as
  ``english`` splits it. On sample_zh it beat jieba inside ``best`` (docs/results.md).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

import numpy as np

from pipeline.contract.errors import ConfigError

TOKENIZERS = ("auto", "english", "cjk_char", "jieba", "fts5", "reme")
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_RUN = re.compile(f"([{HAN}]+)")
# bm25s's default splitter (?u)\b\w\w+\b: a greedy run of two or more word characters always
# starts and ends at a word boundary, so this finds the same words, faster (tests check it)
_LATIN = re.compile(r"\w{2,}")


def has_cjk(text: str) -> bool:
    """True when ``text`` contains at least one Han character."""
    return _HAN_RUN.search(text) is not None


def han_letters(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per text: (number of Han characters, number of letters, i.e. alphabetic characters). An
    ASCII text has no Han character and its letters are ``[A-Za-z]`` (``str.isalpha`` on ASCII):
    counted for all texts in one polars call; the others one by one."""
    import polars as pl

    col = pl.Series(texts, dtype=pl.String)
    letters = col.str.count_matches("[A-Za-z]").fill_null(0).to_numpy().astype(np.int64)
    han = np.zeros(len(texts), np.int64)
    for i in np.flatnonzero(col.str.contains("[^\\x00-\\x7f]").fill_null(False).to_numpy()):
        han[i] = sum(map(len, _HAN_RUN.findall(texts[i])))
        letters[i] = sum(map(str.isalpha, texts[i]))
    return han, letters


def han_share(texts: list[str]) -> float:
    """Share of Han characters among the letters of ``texts`` (digits, spaces, punctuation excluded)."""
    han, letters = han_letters(texts)
    return float(han.sum() / letters.sum()) if letters.sum() else 0.0


def _chars(run: str, bigrams: bool) -> list[str]:
    words = list(run)
    if bigrams and len(run) > 1:
        words += [run[i : i + 2] for i in range(len(run) - 1)]
    return words


def _jieba(run: str, min_len: int) -> list[str]:
    import rjieba

    return [w for w in rjieba.cut_for_search(run) if len(w) >= min_len]


def ascii_pattern(split: Callable[[str], list[str]]) -> str | None:
    """The regex ``split`` applies to a text without non-ASCII characters (the English pattern
    of ``english`` and the by-script splitters), so such texts can be split in one vectorised
    call (``lexical.term_ids``); None for the other splitters."""
    if split == _LATIN.findall or getattr(split, "ascii_words", False):
        return _LATIN.pattern
    return None


def _by_script(cut_han: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    def split(text: str) -> list[str]:
        if text.isascii():  # no Han character
            return _LATIN.findall(text)
        parts = _HAN_RUN.split(text)  # even positions: non-Han text, odd: Han runs
        if len(parts) == 1:
            return _LATIN.findall(text)
        out: list[str] = []
        for i, part in enumerate(parts):
            out += cut_han(part) if i % 2 else _LATIN.findall(part)
        return out

    split.ascii_words = True  # an ASCII text: _LATIN.findall (ascii_pattern)
    return split


# OKS recall._tokenize: its stopwords and the punctuation it strips from each jieba word
OKS_STOPWORDS = frozenset(
    "the a an is are was were be been to of in on at for with and or not this that it from by as "
    "how what why 的 了 是 在 和 与 或 也 都 就 这 那".split()
)
_OKS_STRIP = ".,!?;:\"'()[]{}*_`~#>，。！？；：''\"\"（）【】"
_OKS_CJK = re.compile("[\u4e00-\u9fff\u3400-\u4dbf]")
_FTS5_SPECIAL = re.compile("[^\\w\u4e00-\u9fff\u3400-\u4dbf]")
_FTS5_OPERATORS = {"AND", "OR", "NOT", "NEAR"}
_TOKEN = re.compile(r"[^\W_]+")  # unicode61: runs of letters and numbers


def unicode61(text: str) -> list[str]:
    """SQLite FTS5's default tokenizer: runs of Unicode letters and numbers, case-folded, Latin
    diacritics removed (``remove_diacritics 1``). Private-use characters, which unicode61 also
    keeps, count as separators here."""
    out = []
    for w in _TOKEN.findall(text):
        w = w.lower()
        if not w.isascii():
            w = "".join(unicodedata.normalize("NFD", c)[0] if ord(c) < 0x2000 else c for c in w)
        out.append(w)
    return out


def oks_words(text: str) -> list[str]:
    """OKS's ``_tokenize_for_fts`` before SQLite sees it: a CJK text → its sorted set of
    ``recall._tokenize`` words; other text unchanged (as one item)."""
    if not text or not text.strip():
        return []
    if not _OKS_CJK.search(text):
        return [text]
    return sorted(oks_token_set(text))


def oks_token_set(text: str) -> set[str]:
    """OKS's ``recall._tokenize``: the words of Python jieba's search mode, each stripped of
    markdown punctuation, those under 2 characters and the 40 stopwords dropped (the native
    backend's tokens, of any text)."""
    try:
        import jieba
    except ImportError:
        raise ConfigError("OKS's tokenizer needs jieba (OKS's): pip install jieba") from None
    import logging

    jieba.setLogLevel(logging.WARNING)
    words = {w.strip(_OKS_STRIP) for w in jieba.cut_for_search(text)}
    return {w for w in words if len(w) >= 2 and w not in OKS_STOPWORDS}


def fts5_document(text: str) -> list[str]:
    """The terms SQLite FTS5 indexes for one column value of OKS's ``wiki_fts``."""
    return [t for w in oks_words(text) for t in unicode61(w)]


def fts5_query(text: str) -> list[str]:
    """The terms of OKS's MATCH string for ``text`` (``FTS5Backend._build_match_expr``): words
    joined by OR, each split by unicode61 (a word that splits in two is a phrase in FTS5; here its
    terms count separately)."""
    words = " ".join(oks_words(text)).split()
    words = [_FTS5_SPECIAL.sub("", w).strip() for w in words if w.upper() not in _FTS5_OPERATORS]
    return [t for w in words if w for t in unicode61(w)]


_REME_CJK = re.compile("[\u4e00-\u9fff]")  # RegexTokenizer.CHINESE_PATTERN
_REME_WORD = re.compile(r"(?u)\b\w\w+\b")  # RegexTokenizer.WORD_PATTERN


def reme_words(text: str) -> list[str]:
    """ReMe's ``RegexTokenizer._tokenize_one`` then ``_postprocess``'s lower-casing."""
    words = _REME_CJK.findall(text) + _REME_WORD.findall(_REME_CJK.sub(" ", text))
    return [w.lower() for w in words]


def splitter(
    name: str = "auto", cjk_bigrams: bool = False, cjk_min_len: int = 1
) -> Callable[[str], list[str]]:
    """The word splitter ``lexical.tokenizer=name`` (text is already lower-cased, except for
    ``fts5`` and ``reme``)."""
    if name == "reme":
        return reme_words
    if name == "english":
        return _LATIN.findall
    if name == "cjk_char":
        return _by_script(lambda run: _chars(run, cjk_bigrams))
    if name == "auto":
        return _by_script(lambda run: _chars(run, True))
    if name == "jieba":
        return _by_script(lambda run: _jieba(run, cjk_min_len))
    if name == "fts5":
        return fts5_document
    raise ConfigError(f"lexical.tokenizer={name!r}; choose from {list(TOKENIZERS)}")
