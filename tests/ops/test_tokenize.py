"""Script-aware BM25 tokenisation (lexical.tokenizer): hand-checked splits of Chinese, mixed and
English text, jieba parity with the Python jieba, BM25 on a tiny Chinese corpus computed by hand."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.channels import lexical
from pipeline.contract.errors import ConfigError
from pipeline.ops import tokenize


def _words(text, tokenizer, stopwords="en", stemmer=None, **kw):
    tok = lexical.make_tokenizer(stopwords, stemmer, tokenizer, **kw)
    return tok.tokenize([text], return_as="string", show_progress=False)[0]


def test_english_tokenizer_keeps_a_run_of_chinese_as_one_word():
    # the old behaviour (bm25s's \b\w\w+\b): the whole sentence is one token, so nothing matches
    assert _words("数据库备份策略", "english") == ["数据库备份策略"]


def test_cjk_char_is_one_token_per_han_character_and_bigrams_on_request():
    assert _words("数据库备份", "cjk_char") == ["数", "据", "库", "备", "份"]
    assert _words("数据库备份", "cjk_char", cjk_bigrams=True) == [
        "数",
        "据",
        "库",
        "备",
        "份",
        "数据",
        "据库",
        "库备",
        "备份",
    ]


def test_jieba_cuts_words_in_search_mode_and_drops_short_ones():
    # search mode also emits the dictionary words inside a longer word (数据库 → 数据, 据库, 数据库)
    assert _words("数据库备份", "jieba") == ["数据", "据库", "数据库", "备份"]
    assert _words("我的数据库", "jieba") == ["我", "的", "数据", "据库", "数据库"]
    assert _words("我的数据库", "jieba", cjk_min_len=2) == [
        "数据",
        "据库",
        "数据库",
    ]  # OKS: < 2 chars dropped


def test_mixed_text_stems_and_stops_only_the_english_words():
    text = "在Kubernetes集群上部署the running services"
    assert _words(text, "auto", stemmer="english") == [
        "在",
        "kubernet",
        "集",
        "群",
        "上",
        "部",
        "署",
        "集群",
        "群上",
        "上部",
        "部署",
        "run",
        "servic",
    ]
    assert _words(text, "jieba", stemmer="english") == [
        "在",
        "kubernet",
        "集群",
        "上",
        "部署",
        "run",
        "servic",
    ]
    assert _words(text, "cjk_char", stopwords=None) == [
        "在",
        "kubernetes",
        "集",
        "群",
        "上",
        "部",
        "署",
        "the",
        "running",
        "services",
    ]
    # the old splitter glued the Latin word to the Chinese around it
    assert _words(text, "english", stopwords=None) == [
        "在kubernetes集群上部署the",
        "running",
        "services",
    ]


MIXED = st.text(
    st.one_of(
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4E3F),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(MIXED)
def test_auto_splits_the_non_han_text_exactly_like_english(text):
    got = tokenize.splitter("auto")(text)
    assert [w for w in got if not tokenize.has_cjk(w)] == tokenize.splitter("english")(
        tokenize._HAN_RUN.sub(" ", text)
    )
    assert all(
        tokenize._HAN_RUN.fullmatch(w) for w in got if tokenize.has_cjk(w)
    )  # Han words are Han only


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=30))
def test_cjk_char_and_auto_on_pure_han_give_every_character_then_every_pair(text):
    want = list(text) + [text[i : i + 2] for i in range(len(text) - 1)]
    assert (
        tokenize.splitter("cjk_char", cjk_bigrams=True)(text)
        == want
        == tokenize.splitter("auto")(text)
    )
    assert tokenize.splitter("cjk_char")(text) == list(text)


def test_rjieba_matches_python_jieba_search_mode():
    jieba = pytest.importorskip("jieba")
    jieba.setLogLevel(60)
    for text in [
        "中华人民共和国的数据库备份策略",
        "周五下午启动的回填无人看管地跑了一整个周末",
        "把模型改成先聚合分段数据后，峰值内存降低了",
        "每周二里斯本时间交接",
    ]:
        runs = tokenize._HAN_RUN.findall(text)
        want = [w for run in runs for w in jieba.cut_for_search(run)]
        assert tokenize.splitter("jieba")(text) == want


def test_unknown_tokenizer_is_a_config_error():
    with pytest.raises(ConfigError, match="lexical.tokenizer='thai'"):
        tokenize.splitter("thai")


def test_han_share_counts_han_among_letters():
    assert tokenize.han_share(["数据 ab", "库 12"]) == pytest.approx(
        3 / 5
    )  # digits and spaces are not letters
    assert tokenize.han_share(["plain English"]) == 0.0 and tokenize.han_share([""]) == 0.0


def test_bm25_on_a_tiny_chinese_corpus_by_hand():
    docs = ["数据库备份", "数据", "备份策略"]
    tok = lexical.make_tokenizer(None, None, "cjk_char")
    tokens = lexical.tokenize_fields(tok, {"body": docs})
    s = lexical.bm25_matrix(tokens, {"body": 1.0})
    got = lexical.score(lexical.tokenize_queries(tok, ["备份"], tokens.vocab), s).toarray()[0]
    # |d| = 5, 2, 4 → avgdl 11/3; 备 and 份 each in 2 of 3 docs → idf ln(1 + 1.5/2.5) = ln 1.6; tf 1
    idf, avgdl = math.log(1.6), 11 / 3
    one = lambda dl: idf / (1 + 1.5 * (0.25 + 0.75 * dl / avgdl))  # noqa: E731
    assert got == pytest.approx([2 * one(5), 0.0, 2 * one(4)], rel=1e-6)
    old = lexical.make_tokenizer(None, None, "english")
    old_tokens = lexical.tokenize_fields(old, {"body": docs})
    assert (
        lexical.tokenize_queries(old, ["备份"], old_tokens.vocab).nnz == 0
    )  # the collapse: no shared term


def test_bm25_fts5_with_jieba_on_a_tiny_chinese_corpus_by_hand():
    docs = ["数据库备份", "备份", "策略", "文档"]
    tok = lexical.make_tokenizer(None, None, "jieba", cjk_min_len=2)
    tokens = lexical.tokenize_fields(tok, {"body": docs})
    s = lexical.bm25_matrix(tokens, {"body": 1.0}, k1=1.2, idf="fts5")
    got = lexical.score(lexical.tokenize_queries(tok, ["数据库"], tokens.vocab), s).toarray()[0]
    # d0 = 数据 据库 数据库 备份 (4), d1 = 备份, d2 = 策略, d3 = 文档 → avgdl 7/4; query = 数据 据库 数据库,
    # each in 1 of 4 docs: idf ln(3.5/1.5); tf 1: (k1+1)/(1 + k1·(0.25 + 0.75·4/1.75))
    idf = math.log(3.5 / 1.5)
    assert got == pytest.approx(
        [3 * idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / 1.75)), 0, 0, 0], rel=1e-6
    )


def test_stopword_lists_join_by_plus_and_unknown_names_are_config_errors():
    en, zh = lexical.stopword_list("en"), lexical.stopword_list("en+zh")
    assert (
        "the" in en
        and "的" not in en
        and zh[: len(en)] == en
        and "的" in zh
        and len(set(zh)) == len(zh)
    )
    assert lexical.stopword_list(None) == [] == lexical.stopword_list("none")
    assert _words("这是我的备份策略", "cjk_char", stopwords="en+zh") == [
        "备",
        "份",
        "策",
        "略",
    ]  # 这 是 我 的: stopwords
    with pytest.raises(ConfigError, match="lexical.stopwords='en\\+xx': no stopword list 'xx'"):
        lexical.stopword_list("en+xx")


def test_cjk_set_counts_each_term_of_a_chinese_text_once_as_oks_does():
    docs = ["备份，备份，策略", "backup backup plan"]
    tok = lexical.make_tokenizer(None, None, "jieba", cjk_min_len=2)
    tokens = lexical.tokenize_fields(tok, {"body": docs}, cjk_set=True)
    assert tokens.fields["body"].toarray().sum(axis=1).tolist() == [
        2.0,
        3.0,
    ]  # 备份 策略 | backup ×2, plan
    s = lexical.bm25_matrix(tokens, {"body": 1.0})
    q = lexical.tokenize_queries(tok, ["备份 备份", "backup backup"], tokens.vocab, cjk_set=True)
    assert q.toarray().sum(axis=1).tolist() == [1.0, 2.0]  # the English query keeps its repeat
    got = lexical.score(q, s).toarray()
    # N 2, df 1 → idf ln 2; |d| 2 and 3, avgdl 2.5
    norm = lambda dl: 1.5 * (0.25 + 0.75 * dl / 2.5)  # noqa: E731
    assert got[0] == pytest.approx([math.log(2) / (1 + norm(2)), 0.0], rel=1e-6)
    assert got[1] == pytest.approx([0.0, 2 * math.log(2) * 2 / (2 + norm(3))], rel=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_latin_pattern_finds_what_bm25s_default_pattern_finds(text):
    import re

    assert tokenize._LATIN.findall(text) == re.findall(r"(?u)\b\w\w+\b", text)


_WORDS = [
    "the",
    "and",
    "Running",
    "runs",
    "run",
    "cats",
    "cat",
    "数据库",
    "备份",
    "x",
    "",
    "A1",
    "été",
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), max_size=6),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([None, "en"]),
    st.sampled_from([None, "english"]),
    st.sampled_from(["auto", "english"]),
)
def test_term_ids_equal_bm25s_ids_and_vocabulary(batches, stopwords, stemmer, splitter):
    # each batch is one field's texts, tokenised into the growing vocabulary of the ones before
    ours = lexical.make_tokenizer(stopwords, stemmer, splitter)
    ref = lexical.make_tokenizer(stopwords, stemmer, splitter)
    for texts in batches:
        lens, ids = lexical.term_ids(ours, texts)
        want = ref.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
        assert lens.tolist() == [len(x) for x in want]
        assert ids.tolist() == [t for row in want for t in row]
    # then queries, which add no term (bm25s's update_vocab=False)
    lens, ids = lexical.term_ids(ours, batches[-1][::-1], update=False)
    want = ref.tokenize(batches[-1][::-1], update_vocab=False, return_as="ids", show_progress=False)
    assert lens.tolist() == [len(x) for x in want]
    assert ids.tolist() == [t for row in want for t in row]
    assert ours.word_to_id == ref.word_to_id
    assert ours.stem_to_sid == ref.stem_to_sid
    assert ours.word_to_stem == ref.word_to_stem
    assert list(ours.get_vocab_dict()) == list(ref.get_vocab_dict())


def _query_counts_as_first_written(tokenizer, texts, vocab, dedupe, cjk_set):
    """tokenize_queries before term_ids: bm25s's strings mapped back to the vocabulary."""
    strs = tokenizer.tokenize(texts, update_vocab=False, return_as="string", show_progress=False)
    rows = [
        [
            vocab[t]
            for t in (
                dict.fromkeys(toks) if dedupe or (cjk_set and tokenize.has_cjk(text)) else toks
            )
            if t and t in vocab
        ]
        for toks, text in zip(strs, texts)
    ]
    out = np.zeros((len(texts), len(vocab)), np.float32)
    for i, row in enumerate(rows):
        for t in row:
            out[i, t] += 1
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join), min_size=1, max_size=6),
    st.lists(
        st.lists(st.sampled_from(_WORDS + ["new", "备"]), max_size=6).map(" ".join), max_size=5
    ),
    st.sampled_from([None, "english"]),
    st.booleans(),
    st.booleans(),
)
def test_query_counts_equal_their_first_writing(docs, queries, stemmer, dedupe, cjk_set):
    tok = lexical.make_tokenizer("en", stemmer, "auto")
    tokens = lexical.tokenize_fields(tok, {"body": docs})
    ref = lexical.make_tokenizer("en", stemmer, "auto")
    lexical.tokenize_fields(ref, {"body": docs})
    got = lexical.tokenize_queries(tok, queries, tokens.vocab, dedupe, cjk_set)
    want = _query_counts_as_first_written(ref, queries, tokens.vocab, dedupe, cjk_set)
    assert np.array_equal(got.toarray(), want)


def test_han_letters_hand_counted_and_per_text_parity():
    """Han characters and letters (``str.isalpha``) per text: ASCII texts counted in one polars
    call, the others one by one; by hand, then against the per-text count on random texts."""
    import random

    from pipeline.ops.tokenize import _HAN_RUN, han_letters

    han, letters = han_letters(["ab 中文 é1", "Hello, World_9!", "", "\x00x\x7f"])
    assert han.tolist() == [2, 0, 0, 0] and letters.tolist() == [5, 10, 0, 1]
    rng = random.Random(0)
    alpha = list("abcXYZ09 _.,!\x7f\t") + ["中", "文", "é", "ß", "Ω", "\u3400", "\uf900", "😀", "١"]
    texts = ["".join(rng.choice(alpha) for _ in range(rng.randint(0, 30))) for _ in range(300)]
    han, letters = han_letters(texts)
    assert han.tolist() == [sum(map(len, _HAN_RUN.findall(t))) for t in texts]
    assert letters.tolist() == [sum(map(str.isalpha, t)) for t in texts]
