"""``lexical.scorer=torch`` (pipeline.channels.bm25_device): BM25 top-k as a sparse product on a
torch device. Hand-computed cases, parity with bm25s, and bit-identity with the host's scipy path
(``topk_sparse(lexical.score(q, s))``) through the lexical channel with several sealed scopes."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from pipeline.channels import bm25_device, lexical
from pipeline.channels.candidates import LexicalChannel, Segments
from pipeline.contract.errors import ConfigError
from pipeline.core import backend
from pipeline.ops.topk import topk_long, topk_sparse
from pipeline.stages.channels import LexicalParams

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not backend.has_cuda(), reason="no GPU")),
]
IDF_APPLE = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # N=3, df(apple)=2


def _index(corpus, queries):
    tok = lexical.make_tokenizer("en")
    tokens = lexical.tokenize_fields(tok, {"body": corpus})
    s = lexical.bm25_matrix(tokens, {"body": 1.0})
    return lexical.tokenize_queries(tok, queries, tokens.vocab), s


@pytest.mark.parametrize("device", DEVICES)
def test_hand_computed_lucene(device):
    q, s = _index(["apple banana", "apple apple cherry", "durian"], ["apple", "zzz", "durian"])
    qi, di, sc, rank = bm25_device.topk(q, s, 5, device)
    # d0: tf 1, |d| 2, avgdl 2 → 1/(1+1.5); d1: tf 2, |d| 3 → 2/(2+1.5·(0.25+0.75·1.5))
    assert qi.tolist() == [0, 0, 2] and di.tolist() == [1, 0, 2] and rank.tolist() == [1, 2, 1]
    idf_durian = math.log(1 + (3 - 1 + 0.5) / 1.5)
    want = [IDF_APPLE * 2 / 4.0625, IDF_APPLE * 0.4, idf_durian * 1 / (1 + 1.5 * (0.25 + 0.375))]
    assert sc.tolist() == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_ties_by_lower_document(device, monkeypatch):
    monkeypatch.setattr(
        bm25_device, "BLOCK_SCORES", 3
    )  # one query per block, blocks of 5 documents
    corpus = ["apple x", "banana", "apple x", "apple x", "apple y"]
    q, s = _index(corpus, ["apple", "apple banana"])
    qi, di, _sc, rank = bm25_device.topk(q, s, 2, device)
    assert qi.tolist() == [0, 0, 1, 1] and rank.tolist() == [1, 2, 1, 2]
    assert di.tolist() == [0, 2, 1, 0]  # four docs tie for "apple": the two lowest; banana is rarer


@pytest.mark.parametrize("device", DEVICES)
def test_parity_with_bm25s(device):
    import bm25s

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(30)]
    corpus = [" ".join(rng.choice(words, size=rng.integers(3, 25))) for _ in range(120)]
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(25)]
    q, s = _index(corpus, queries)
    ref = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    ref.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    qi, di, sc, _rank = bm25_device.topk(q, s, 10, device)
    for j, text in enumerate(queries):
        expect = ref.get_scores(
            bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]
        ).astype(np.float32)
        m = expect > 0
        # bm25s's scores in float64 so equal floats tie exactly; order by score desc, doc asc
        e64 = np.round(expect.astype(np.float64), 5)
        _q, want, _s, _r = topk_long(np.zeros(m.sum(), np.int64), np.flatnonzero(m), e64[m], 10)
        mine = qi == j
        assert di[mine].tolist() == want.tolist()
        np.testing.assert_allclose(sc[mine], expect[want], rtol=1e-5)


def _nodes_queries(rng, n, nq, scopes):
    words = [f"t{i}" for i in range(25)]
    text = lambda lo, hi: " ".join(rng.choice(words, size=rng.integers(lo, hi)))  # noqa: E731
    nodes = pl.DataFrame(
        {
            "title": [text(0, 3) for _ in range(n)],
            "text": [text(2, 20) for _ in range(n)],
            "tags": [list(rng.choice(words, size=rng.integers(0, 3))) for _ in range(n)],
        }
    )
    queries = pl.DataFrame({"text": [text(1, 12) + " t3 t3" for _ in range(nq)]})
    idx, qidx = np.arange(n), np.arange(nq)
    parts = [(str(i), idx[i::scopes], qidx[i::scopes]) for i in range(scopes)]
    parts.append(("all", idx, qidx[scopes - 1 :: scopes + 5]))  # a scope overlapping the others
    return nodes, queries, parts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prf", [0, 3])
def test_channel_bit_identical_to_scipy(device, prf, monkeypatch):
    """Several sealed scopes (one block-diagonal matrix), field weights, repeated query terms and
    blocks smaller than the data: the torch path's ranks and scores equal scipy's bit for bit."""
    rng = np.random.default_rng(5)
    nodes, queries, parts = _nodes_queries(rng, 400, 90, 4)
    segs = Segments.of(parts)
    got = {}
    for scorer in ("scipy", "torch"):
        p = LexicalParams.defaults(scorer=scorer, candidates=15, prf_docs=prf)
        ch = LexicalChannel.tokenise(nodes, queries, p, device if scorer == "torch" else "cpu")
        with monkeypatch.context() as mp:
            mp.setattr(bm25_device, "BLOCK_SCORES", 700)
            mp.setattr(bm25_device, "BLOCK_QUERIES", 6)
            ranks, scores = ch.ranks_and_scores(segs)
        qi, ni = ranks["query_idx"].to_numpy(), ranks["node_idx"].to_numpy()
        got[scorer] = (ranks, scores(qi, ni).tobytes())
    assert got["torch"][0].equals(got["scipy"][0]) and got["torch"][1] == got["scipy"][1]
    assert got["scipy"][0].height > 90 * 5


@pytest.mark.parametrize("device", DEVICES)
def test_topk_equals_topk_sparse_bits(device, monkeypatch):
    monkeypatch.setattr(bm25_device, "BLOCK_SCORES", 50)
    rng = np.random.default_rng(9)
    nodes, queries, _parts = _nodes_queries(rng, 300, 40, 1)
    q, s = _index(nodes["text"].to_list(), queries["text"].to_list())
    want = topk_sparse(lexical.score(q, s), 20)
    got = bm25_device.topk(q, s, 20, device)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    "rows, entries",
    [(1, 1 << 21), (7, 1 << 21), (40, 1 << 21), (1024, 1 << 21), (1024, 1), (1024, 150), (7, 400)],
)
def test_top_scores_in_row_blocks_equal_the_whole_product(rows, entries, monkeypatch):
    """``lexical.top_scores`` in blocks of 1, 7, 40 (all 40 queries) and 1,024 query rows, or of at
    most 1, 150 or 400 bounded scores, gives the bits of ``topk_sparse`` over the whole
    ``q @ s.T`` product, dtypes included."""
    rng = np.random.default_rng(11)
    nodes, queries, _parts = _nodes_queries(rng, 300, 40, 1)
    q, s = _index(nodes["text"].to_list(), queries["text"].to_list())
    want = topk_sparse(lexical.score(q, s), 20)
    assert len(want[0]) > 40 * 5
    monkeypatch.setattr(lexical, "SCORE_ROWS", rows)
    monkeypatch.setattr(lexical, "SCORE_ENTRIES", entries)
    got = lexical.top_scores(q, s, 20)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    empty = lexical.top_scores(q[:0], s, 20)
    assert [a.dtype for a in empty] == [a.dtype for a in want] and len(empty[0]) == 0


def test_score_blocks_by_hand(monkeypatch):
    # documents per term (the rows of sᵀ): t0 in 3, t1 in 1, t2 in 5; queries: {t0}, {t0, t2},
    # {}, {t1}, {t2}: bounds 3, 8, 0, 1, 5 (cumulative 0, 3, 11, 11, 12, 17)
    st = sp.csr_matrix(np.array([[1, 1, 1, 0, 0], [0, 1, 0, 0, 0], [1, 1, 1, 1, 1]], np.float32))
    q = sp.csr_matrix(np.array([[1, 0, 0], [1, 0, 2], [0, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32))
    monkeypatch.setattr(lexical, "SCORE_ENTRIES", 9)
    assert lexical.score_blocks(q, st) == [(0, 1), (1, 4), (4, 5)]
    monkeypatch.setattr(lexical, "SCORE_ROWS", 2)
    assert lexical.score_blocks(q, st) == [(0, 1), (1, 3), (3, 5)]
    monkeypatch.setattr(lexical, "SCORE_ENTRIES", 1 << 21)
    assert lexical.score_blocks(q, st) == [(0, 2), (2, 4), (4, 5)]
    assert lexical.score_blocks(q[:0], st) == []


def test_blocks_and_scorer_choice():
    lo, hi = np.array([0, 0, 10, 10, 10, 40]), np.array([10, 10, 40, 40, 40, 41])
    assert bm25_device.blocks(lo, hi, 90, 100) == [(0, 2), (2, 5), (5, 6)]
    assert bm25_device.blocks(lo, hi, 90, 2) == [(0, 2), (2, 4), (4, 6)]
    assert bm25_device.blocks(lo, hi, 1, 100) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert bm25_device.scorer("auto", "cpu") == "scipy"
    assert bm25_device.scorer("auto", "cuda") == "torch"
    assert bm25_device.scorer("torch", "cpu") == "torch"
    with pytest.raises(ConfigError, match="lexical.scorer"):
        bm25_device.scorer("bm25", "cpu")
