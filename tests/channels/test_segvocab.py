"""Several scopes in one BM25 matrix (``channels.segvocab``): each segment's block of the
block-diagonal matrix is, bit for bit, the matrix of that segment tokenised and scored alone, for
random segmentations (a document may sit in several segments), every idf variant and with field
weights; query terms likewise, and the scores of the one sparse product equal each segment's own."""

from __future__ import annotations

import numpy as np
import polars as pl
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.channels import lexical, segvocab
from pipeline.channels.candidates import node_fields
from pipeline.ops import topk

WORDS = "apple river stone cloud garden piano Paris Oslo budget train music letter".split()


def _table(rng, n):
    texts = [" ".join(rng.choice(WORDS, rng.integers(0, 7))) for _ in range(n)]
    titles = [" ".join(rng.choice(WORDS, rng.integers(0, 3))) for _ in range(n)]
    return pl.DataFrame({"node_id": [f"n{i}" for i in range(n)], "text": texts, "title": titles})


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), idf=st.sampled_from(["lucene", "reme", "fts5"]))
def test_each_segment_block_is_the_segment_alone(seed, idf):
    rng = np.random.default_rng(seed)
    nodes = _table(rng, 14)
    queries = [" ".join(rng.choice(WORDS, 3)) for _ in range(6)]
    n_seg = int(rng.integers(1, 4))
    parts = [np.sort(rng.choice(14, int(rng.integers(1, 9)), replace=False)) for _ in range(n_seg)]
    qparts = np.array_split(np.arange(6), n_seg)
    weights, k1, b = {"title": 2.0, "body": 1.0}, 1.2, 0.75
    tok = lexical.make_tokenizer("en", None, "auto")
    tokens = lexical.tokenize_fields(tok, node_fields(nodes))
    q_all = lexical.tokenize_queries(tok, queries, tokens.vocab)
    rows = np.concatenate(parts)
    seg = np.repeat(np.arange(n_seg), [len(p) for p in parts])
    qseg = np.repeat(np.arange(n_seg), [len(q) for q in qparts])
    lay = segvocab.layout(tokens.places, rows, seg, len(tokens.vocab))
    s_all = lexical.bm25_matrix(tokens, weights, rows, k1, b, idf, seg, lay)
    q_seg = segvocab.remap(q_all[np.concatenate(qparts)], qseg, lay)
    scores = lexical.score(q_seg, s_all).toarray()
    col0, row0, q0 = 0, 0, 0
    for j, (p, qp) in enumerate(zip(parts, qparts)):
        alone = lexical.make_tokenizer("en", None, "auto")
        own = lexical.tokenize_fields(alone, node_fields(nodes[p]))
        s_own = lexical.bm25_matrix(own, weights, None, k1, b, idf)
        width = int(np.bincount(lay.codes // lay.n_terms, minlength=n_seg)[j])
        block = sp.csc_matrix(s_all[row0 : row0 + len(p), col0 : col0 + width])
        own_csc = sp.csc_matrix(s_own)
        # the same nonzero columns in the same order (the segment's own vocabulary order)
        used = [np.flatnonzero(np.diff(m.indptr) > 0) for m in (block, own_csc)]
        np.testing.assert_array_equal(block[:, used[0]].toarray(), own_csc[:, used[1]].toarray())
        q_own = lexical.tokenize_queries(alone, [queries[i] for i in qp], own.vocab)
        got = scores[q0 : q0 + len(qp), row0 : row0 + len(p)]
        np.testing.assert_array_equal(got, lexical.score(q_own, s_own).toarray())
        assert not scores[q0 : q0 + len(qp), :row0].any()  # nothing from another segment
        assert not scores[q0 : q0 + len(qp), row0 + len(p) :].any()
        col0, row0, q0 = col0 + width, row0 + len(p), q0 + len(qp)


def _layout_lexsort(first, rows, seg, n_terms):
    """The layout by its definition, with lexsorts: per (segment, term) the earliest (field,
    row, position); each segment's terms numbered in that order; codes sorted."""
    from pipeline.ops.sparse_entries import spans

    doc, term, key = first
    n_docs = max(int(doc.max(initial=-1)), int(rows.max(initial=-1))) + 1
    starts = np.searchsorted(doc, np.arange(n_docs + 1))
    pick = spans(np, starts[rows], starts[rows + 1])
    vrow = np.repeat(np.arange(len(rows)), starts[rows + 1] - starts[rows])
    s, t = seg[vrow].astype(np.int64), term[pick]
    f, pos = key[pick] >> segvocab.POS_BITS, key[pick] & ((1 << segvocab.POS_BITS) - 1)
    order = np.lexsort((pos, vrow, f, t, s))
    s, t, f, vr, pos = s[order], t[order], f[order], vrow[order], pos[order]
    head = np.r_[True, (s[1:] != s[:-1]) | (t[1:] != t[:-1])] if len(s) else s > 0
    s, t, f, vr, pos = s[head], t[head], f[head], vr[head], pos[head]
    order = np.lexsort((pos, vr, f, s))
    cols = np.empty(len(s), np.int64)
    cols[order] = np.arange(len(s))
    by_code = np.argsort(s * n_terms + t, kind="stable")
    return (s * n_terms + t)[by_code], cols[by_code]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_layout_packed_sort_is_the_lexsort(seed):
    """``layout`` takes each (segment, term)'s earliest (field, row, position) by a group minimum
    over a dense array of codes (``DENSE_SPAN`` large), or sorts its tuples as one packed key when
    that fits in 63 bits (``DENSE_SPAN`` 0), else by lexsort (``ops.topk.KEY_BITS`` 0, where
    nothing packs and the dense minimum cannot run either): each gives the codes and columns of
    the definition (``_layout_lexsort``), byte for byte."""
    import pytest

    rng = np.random.default_rng(seed)
    nodes = _table(rng, 40)
    tokens = lexical.tokenize_fields(lexical.make_tokenizer("en", None, "auto"), node_fields(nodes))
    n_seg = int(rng.integers(1, 5))
    parts = [np.sort(rng.choice(40, int(rng.integers(1, 30)), replace=False)) for _ in range(n_seg)]
    rows = np.concatenate(parts)
    seg = np.repeat(np.arange(n_seg), [len(p) for p in parts])
    codes, cols = _layout_lexsort(tokens.places, rows, seg, len(tokens.vocab))
    lays = [segvocab.layout(tokens.places, rows, seg, len(tokens.vocab))]
    for mod, name, value in (
        (segvocab, "DENSE_SPAN", 1 << 40),  # the dense minimum whatever the span
        (segvocab, "DENSE_SPAN", 0),  # the packed sort
        (topk, "KEY_BITS", 0),  # nothing packs: the lexsorts
    ):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(mod, name, value)
            lays.append(segvocab.layout(tokens.places, rows, seg, len(tokens.vocab)))
    for lay in lays:
        assert lay.n_cols == len(codes) and lay.n_terms == len(tokens.vocab)
        assert lay.codes.dtype == codes.dtype and lay.codes.tobytes() == codes.tobytes()
        assert lay.cols.dtype == cols.dtype and lay.cols.tobytes() == cols.tobytes()


def test_token_keys_by_hand():
    """Every token once, grouped by document; within a document field by field, each field's
    tokens in order; key = field << POS_BITS | position. One field alone is taken as it is."""
    i = lambda *v: np.array(v, np.int64)  # noqa: E731
    flat = {
        "title": (i(0, 2), i(0, 0), i(5, 6)),  # (doc, position, term)
        "tags": (i(), i(), i()),
        "body": (i(0, 0, 1, 2), i(0, 1, 0, 0), i(5, 7, 8, 5)),
    }
    doc, term, key = segvocab.token_keys(flat)
    b = 2 << segvocab.POS_BITS
    assert doc.tolist() == [0, 0, 0, 1, 2, 2]
    assert term.tolist() == [5, 5, 7, 8, 6, 5]
    assert key.tolist() == [0, b, b + 1, b, 0, b]
    one = segvocab.token_keys({"body": flat["body"]})
    assert [a.tolist() for a in one] == [[0, 0, 1, 2], [5, 7, 8, 5], [0, 1, 0, 0]]
