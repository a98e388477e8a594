"""BM25: hand-computed field weighting, and parity with bm25s on a single body field."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.channels import lexical

IDF_APPLE = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # N=3 docs, df(apple)=2 → ln 1.6


def _index(fields, weights, **kw):
    tok = lexical.make_tokenizer("en")
    tokens = lexical.tokenize_fields(tok, fields)
    s = lexical.bm25_matrix(tokens, weights, **kw)
    return tok, tokens, s


def _scores(tok, tokens, s, query, **kw):
    q = lexical.tokenize_queries(tok, [query], tokens.vocab, **kw)
    return lexical.score(q, s).toarray()[0]


def test_body_only_matches_hand_computed_lucene_bm25():
    fields = {"body": ["apple banana", "apple apple cherry", "durian"]}
    tok, tokens, s = _index(fields, {"body": 1.0})
    got = _scores(tok, tokens, s, "apple")
    # avgdl = 2; d0: tf 1, |d| 2 → 1/(1+1.5); d1: tf 2, |d| 3 → 2/(2+1.5·(0.25+0.75·1.5))
    assert got == pytest.approx([IDF_APPLE * 0.4, IDF_APPLE * 2 / 4.0625, 0.0], rel=1e-6)


def test_title_weight_multiplies_term_frequency_not_length():
    fields = {"title": ["apple", "", ""], "body": ["banana", "apple apple cherry", "durian"]}
    tok, tokens, s = _index(fields, {"title": 5.0, "body": 1.0})
    got = _scores(tok, tokens, s, "apple")
    # d0: tf = 5·1 = 5, |d| = 2 tokens over all fields → 5/(5+1.5); d1 unchanged
    assert got == pytest.approx([IDF_APPLE * 5 / 6.5, IDF_APPLE * 2 / 4.0625, 0.0], rel=1e-6)
    assert got[0] > got[1]  # the title hit now outranks the body-only hit


def test_zero_weight_field_is_ignored_and_unknown_field_rejected():
    fields = {"title": ["zebra", ""], "body": ["apple", "zebra"]}
    tok, tokens, s = _index(fields, {"title": 0.0, "body": 1.0})
    assert _scores(tok, tokens, s, "zebra")[0] == 0.0
    with pytest.raises(Exception, match="unknown fields"):
        lexical.bm25_matrix(tokens, {"abstract": 1.0})


def test_query_term_multiplicity_and_dedupe():
    fields = {"body": ["apple banana", "apple apple cherry", "durian"]}
    tok, tokens, s = _index(fields, {"body": 1.0})
    once = _scores(tok, tokens, s, "apple")
    assert _scores(tok, tokens, s, "apple apple") == pytest.approx(2 * once)
    assert _scores(tok, tokens, s, "apple apple", dedupe=True) == pytest.approx(once)
    assert _scores(tok, tokens, s, "unknownword").sum() == 0.0


def test_parity_with_bm25s_on_random_corpus():
    import bm25s

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    corpus = [" ".join(rng.choice(words, size=rng.integers(3, 30))) for _ in range(60)]
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 5))) for _ in range(10)]
    tok, tokens, s = _index({"body": corpus}, {"body": 1.0})
    ref = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    ref.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    for q in queries:
        expect = ref.get_scores(
            bm25s.tokenize([q], stopwords="en", return_ids=False, show_progress=False)[0]
        )
        assert _scores(tok, tokens, s, q) == pytest.approx(expect, rel=1e-5, abs=1e-6)


def test_idf_is_computed_over_the_scoped_rows_only():
    fields = {"body": ["apple banana", "apple apple cherry", "durian", "apple"]}
    tok, tokens, s_all = _index(fields, {"body": 1.0})
    s_sub = lexical.bm25_matrix(tokens, {"body": 1.0}, rows=np.array([0, 1, 2]))
    q = lexical.tokenize_queries(tok, ["apple"], tokens.vocab)
    assert lexical.score(q, s_sub).toarray()[0] == pytest.approx(
        [IDF_APPLE * 0.4, IDF_APPLE * 2 / 4.0625, 0.0]
    )
    pairs = lexical.pair_scores(q, s_sub, np.array([0, 0]), np.array([1, 2]))
    assert pairs == pytest.approx([IDF_APPLE * 2 / 4.0625, 0.0])


def test_prf_expand_hand_computed():
    import numpy as np
    import scipy.sparse as sp

    from pipeline.channels.lexical import prf_expand

    # 3 documents × 4 terms of BM25 term scores; q0 asks t0 once, q1 asks t3 twice
    s = sp.csr_matrix(np.array([[2.0, 1.0, 0, 0], [1.0, 0, 3.0, 0], [0, 0, 0, 5.0]], np.float32))
    q = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 0, 0, 2.0]], np.float32))
    assert prf_expand(q, s, 0, 10, 0.5) is q  # off
    # q0's top document d0 (2 > 1) adds t1 with the whole 0.5 × 1; q1's d2 holds only its own t3
    one = prf_expand(q, s, 1, 10, 0.5).toarray()
    assert one.tolist() == [[1.0, 0.5, 0, 0], [0, 0, 0, 2.0]]
    # d0 + d1: t1 1, t2 3 (t0 is the query's) → 0.5 split 1 : 3
    two = prf_expand(q, s, 2, 2, 0.5).toarray()
    assert np.allclose(two, [[1.0, 0.125, 0.375, 0], [0, 0, 0, 2.0]])
    # one term only: t2 (3 > 1) takes the whole 0.5
    assert np.allclose(prf_expand(q, s, 2, 1, 0.5).toarray()[0], [1.0, 0, 0.5, 0])


@pytest.mark.parametrize("tokenizer", ["auto", "english", "cjk_char"])
@pytest.mark.parametrize("stemmer", [None, "english"])
def test_ascii_texts_split_at_once_give_the_per_text_ids(tokenizer, stemmer):
    """All-ASCII texts go through one vectorised regex call (``lexical._words``); the ids, lengths
    and the vocabulary (its order too) are those of the splitter called on each text, and a text
    with a Han character sends the whole list back through the per-text splitter."""
    import random

    rng = random.Random(3)
    words = [
        "the",
        "Running",
        "runs",
        "a",
        "x",
        "foo_bar",
        "B2",
        "World",
        "of",
        "__",
        "it's",
        "e.g.",
    ]

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, 9))) + rng.choice(["", "!"])

    for extra in ([], ["中文 text"]):
        texts = [text() for _ in range(400)] + ["", "  ", "a b"] + extra
        fast = lexical.make_tokenizer("en", stemmer, tokenizer)
        slow = lexical.make_tokenizer("en", stemmer, tokenizer)
        split = slow.splitter
        for update in (True, False):
            got = lexical.term_ids(fast, texts, update=update)
            want = lexical.term_ids(slow, texts, update=update, split=lambda t: split(t))
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            assert list(fast.word_to_id.items()) == list(slow.word_to_id.items())
    lens, ids = lexical.term_ids(lexical.make_tokenizer(None, None, "english"), ["Ab ab c", ""])
    assert lens.tolist() == [2, 1] and ids.tolist() == [1, 1, 0]  # by hand: "" is id 0, "ab" 1


@pytest.mark.parametrize("block", [1, 7, 3000, 1 << 16])
def test_pair_scores_in_blocks_equal_one_row_product(block, monkeypatch):
    """``lexical.pair_scores`` in blocks of 1, 7, 3,000 (all) and 65,536 pairs gives the float32
    bits of scipy's ``(q[qi] ∘ s[di]).sum(axis=1)`` over all pairs at once (repeated pairs, pairs
    without a common term, sums of 8 and more terms)."""
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(block)
    s = sp.random(200, 60, density=0.3, format="csr", random_state=3, dtype=np.float32)
    q = sp.random(30, 60, density=0.4, format="csr", random_state=4, dtype=np.float32)
    qi, di = rng.integers(0, 30, 3000), rng.integers(0, 200, 3000)
    want = np.asarray(q[qi].multiply(s[di]).sum(axis=1)).ravel().astype(np.float32)
    monkeypatch.setattr(lexical, "PAIR_BLOCK", block)
    got = lexical.pair_scores(q, s, qi, di)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    assert (want == 0).any() and (want > 0).mean() > 0.5
    assert len(lexical.pair_scores(q, s, qi[:0], di[:0])) == 0


def _every_text_counts(tok, fields: dict) -> tuple[dict, dict]:
    """The reference of ``tokenize_fields`` without its dedupe: every text of every field through
    ``term_ids`` in order (repeats and empty texts too), counted per (text, term); bm25s's empty
    token dropped."""
    import scipy.sparse as sp

    per_field = {}
    for name, texts in fields.items():
        lens, ids = lexical.term_ids(tok, [t or "" for t in texts])
        doc = np.repeat(np.arange(len(texts)), lens)
        per_field[name] = (doc, ids)
    vocab = dict(tok.get_vocab_dict())
    out = {}
    for name, (doc, ids) in per_field.items():
        keep = ids != vocab.get("", -1)
        m = sp.csr_matrix(
            (np.ones(int(keep.sum()), np.float32), (doc[keep], ids[keep])),
            shape=(len(fields[name]), len(vocab)),
        )
        m.sum_duplicates()
        out[name] = m
    return out, vocab


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["apple pie", "", None, "Pie of apples", "the", "x y x", "Zed"]),
        max_size=12,
    ),
    st.lists(st.sampled_from(["", None, "apple", "running runs", "zed ZED"]), max_size=12),
    st.sampled_from([None, "english"]),
)
def test_field_tokens_equal_tokenising_every_text(title, body, stemmer):
    """``tokenize_fields`` tokenises each distinct non-empty text once (found by polars); its
    matrices and vocabulary (order too) are those of tokenising every text, repeats, empty texts
    and nulls included (without any word, the vocabulary may lack bm25s's empty token)."""
    n = max(len(title), len(body))
    fields = {"title": (title + [""] * n)[:n], "body": (body + [None] * n)[:n]}
    got = lexical.tokenize_fields(lexical.make_tokenizer("en", stemmer), fields)
    want, vocab = _every_text_counts(lexical.make_tokenizer("en", stemmer), fields)
    words = lambda v: [(w, i) for w, i in v.items() if w]  # noqa: E731 ("" is no term)
    assert words(got.vocab) == words(vocab)
    for name in fields:
        g, w = got.fields[name].tocoo(), want[name].tocoo()
        assert g.shape[0] == w.shape[0] == n
        assert sorted(zip(g.row, g.col, g.data)) == sorted(zip(w.row, w.col, w.data))
