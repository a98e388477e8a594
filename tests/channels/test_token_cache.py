"""channels.token_cache: the nodes' field tokens read back from disk are those of tokenising
afresh (matrices, vocabulary and its order, token places, and the terms the queries then get);
the key follows the exact texts, their order and the tokenizer settings; a broken file is
recomputed; a group below ``npzcache.MIN_ROWS`` writes nothing; the folder keeps the most
recently used files (``pipeline.core.npzcache``)."""

import numpy as np
import polars as pl
import pytest

from pipeline.channels import lexical, token_cache
from pipeline.channels.candidates import LexicalChannel, node_fields
from pipeline.core import npzcache
from pipeline.stages.channels import LexicalParams

TEXTS = [
    "Running runs ran in the Old Mill",
    "",
    "the old mill",
    "Caroline's garden, 2019",
    "Running runs ran in the Old Mill",  # a repeat
    "中文 文本 text",
    "runner's café ümlaut",
    "",
]
NODES = pl.DataFrame(
    {
        "text": [t * 3 if i % 3 else t for i, t in enumerate(TEXTS * 4)],
        "title": [["", "Mill", None, "Garden"][i % 4] for i in range(len(TEXTS) * 4)],
        "tags": [["mill", "old"] if i % 5 == 0 else [] for i in range(len(TEXTS) * 4)],
    }
)
QUERIES = pl.DataFrame({"text": ["old mill running", "garden 2019", "中文", "café", "nothing"]})


def _params(**over) -> LexicalParams:
    return LexicalParams.defaults(**{"stemmer": "english", **over})


def _same(a: LexicalChannel, b: LexicalChannel) -> None:
    assert list(a.tokens.vocab.items()) == list(b.tokens.vocab.items())
    assert list(a.tokens.fields) == list(b.tokens.fields)
    for name, m in a.tokens.fields.items():
        o = b.tokens.fields[name]
        assert m.shape == o.shape and m.dtype == o.dtype
        for x, y in ((m.data, o.data), (m.indices, o.indices), (m.indptr, o.indptr)):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    for x, y in zip(a.tokens.places, b.tokens.places):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    q, r = a.q_terms, b.q_terms
    assert q.shape == r.shape and (q != r).nnz == 0 and q.nnz > 0


@pytest.mark.parametrize("over", [{}, {"stemmer": None, "cjk_set": True}, {"tokenizer": "fts5"}])
def test_tokens_read_back_equal_fresh_ones(tmp_path, monkeypatch, over):
    """Written by one run, read by the next (which tokenises nothing): the same tokens, the same
    vocabulary in the same order, and the same query terms as without a cache."""
    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    p = _params(**over)
    fresh = LexicalChannel.tokenise(NODES, QUERIES, p)
    first = LexicalChannel.tokenise(NODES, QUERIES, p, cache=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    _same(first, fresh)

    want = LexicalChannel.tokenise(NODES, QUERIES[::-1], p)

    def no_tokenising(*a, **k):
        raise AssertionError("tokenised although the cache holds these texts")

    monkeypatch.setattr(token_cache, "tokenize_fields", no_tokenising)
    _same(LexicalChannel.tokenise(NODES, QUERIES[::-1], p, cache=tmp_path), want)


def _key(fields, **over) -> str:
    p = _params(**over)
    settings = (p.stopwords, p.stemmer, p.tokenizer, p.cjk_bigrams, p.cjk_min_len, p.cjk_set)
    return token_cache.key(settings, lexical.make_tokenizer(*settings[:-1]), fields)


def test_key_follows_the_exact_texts_their_order_and_the_settings():
    fields = node_fields(NODES)
    k = _key(fields)
    assert k == _key(node_fields(NODES.clone()))  # the same bytes: the same key
    body = list(fields["body"])
    one_char = {**fields, "body": [body[0][:-1] + "L", *body[1:]]}  # same length
    swapped = {**fields, "body": [body[2], body[1], body[0], *body[3:]]}
    split_other = {**fields, "body": ["ab", "c", *body[2:]]}
    split_one = {**fields, "body": ["a", "bc", *body[2:]]}
    moved = {**fields, "title": fields["body"], "body": fields["title"]}
    keys = {
        k,
        _key(one_char),
        _key(swapped),
        _key(split_other),
        _key(split_one),
        _key(moved),
        _key(fields, stemmer=None),
        _key(fields, stopwords=None),
        _key(fields, cjk_set=True),
        _key(fields, tokenizer="cjk_char"),
        _key(fields, cjk_bigrams=True),
    }
    assert len(keys) == 11


def test_a_broken_file_is_recomputed_and_written_again(tmp_path, monkeypatch):
    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    p = _params()
    fresh = LexicalChannel.tokenise(NODES, QUERIES, p)
    LexicalChannel.tokenise(NODES, QUERIES, p, cache=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    _same(LexicalChannel.tokenise(NODES, QUERIES, p, cache=tmp_path), fresh)
    assert path.read_bytes() == whole  # written again, the same bytes
    assert not list(tmp_path.glob(".*.tmp"))  # no temp file left beside it


def test_small_groups_write_nothing(tmp_path):
    assert len(NODES) < npzcache.MIN_ROWS
    got = LexicalChannel.tokenise(NODES, QUERIES, _params(), cache=tmp_path)
    _same(got, LexicalChannel.tokenise(NODES, QUERIES, _params()))
    assert not list(tmp_path.iterdir())


def test_strings_pack_and_unpack_by_hand():
    data, lens = npzcache.pack(["ab", "", "ü中"])
    assert lens.tolist() == [2, 0, 5] and data.tobytes() == "abü中".encode()
    assert npzcache.unpack(data, lens) == ["ab", "", "ü中"]
    assert npzcache.unpack(*npzcache.pack([])) == []
    assert np.array_equal(npzcache.pack(["x"])[0], np.frombuffer(b"x", np.uint8))


def test_the_folder_keeps_the_most_recently_used_files(tmp_path, monkeypatch):
    """With room for two files: A and B written, A read again, C written: B (the least recently
    used) is removed, A and C stay; and what is left still reads back."""
    import time

    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    monkeypatch.setattr(npzcache, "KEEP_FILES", 2)
    p = _params()
    corpora = {c: NODES.with_columns(pl.col("text") + f" {c}") for c in "ABC"}
    names = {}
    for step in ("A", "B", "A", "C"):
        before = set(tmp_path.glob("*.npz"))
        LexicalChannel.tokenise(corpora[step], QUERIES, p, cache=tmp_path)
        if step not in names:
            (names[step],) = set(tmp_path.glob("*.npz")) - before
        time.sleep(0.02)  # past the filesystem's timestamp tick
    assert set(tmp_path.glob("*.npz")) == {names["A"], names["C"]}
    _same(
        LexicalChannel.tokenise(corpora["A"], QUERIES, p, cache=tmp_path),
        LexicalChannel.tokenise(corpora["A"], QUERIES, p),
    )
