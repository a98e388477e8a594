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
    lay = segvocab.layout(tokens.first, rows, seg, len(tokens.vocab))
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
