"""ReMe's BM25 arithmetic and top-k (``pipeline.ops.reme_bm25``, ``lexical.order=reme``), by hand
and against ReMe's ``bm25_index.py`` @ c8e12487 (its formulas written out here)."""

import math

import numpy as np
import scipy.sparse as sp

from pipeline.ops import reme_bm25


def test_scores_by_hand_and_empty_rows_get_no_slot():
    # docs (terms × counts): d0 = {t0: 2}, d1 = {} (no term: no slot), d2 = {t0: 1, t1: 1}
    tf = sp.csr_matrix(np.array([[2, 0], [0, 0], [1, 1]], np.float32))
    csc, lens, rows = reme_bm25.slots(tf, np.array([0, 1, 2]))
    assert rows.tolist() == [0, 2] and lens.tolist() == [2, 2]
    # N = 2 slots, avgdl = 2: norm = k1·(1 − b) + k1·b·2/2 = 1.5
    # t0: df 2, idf = ln(1 + 0.5/2.5) = ln 1.2; t1: df 1, idf = ln(1 + 1.5/1.5) = ln 2
    s = reme_bm25.scores(csc, lens, [0, 1], 1.5, 0.75)
    # d0 = ln 1.2 · 2 · 2.5 / (2 + 1.5) = 0.260459; d2 = ln 1.2 + ln 2 = 0.875469 (tf 1: 2.5/2.5)
    assert s.dtype == np.float32
    assert abs(float(s[0]) - 0.260459) < 1e-6 and abs(float(s[1]) - 0.875469) < 1e-6
    assert abs(float(s[0]) - math.log(1.2) * 5 / 3.5) < 1e-7


def test_slots_follow_the_store_order():
    tf = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1]], np.float32))
    _csc, _lens, rows = reme_bm25.slots(tf, np.array([2, 0, 1]))
    assert rows.tolist() == [1, 2, 0]  # store places 0, 1, 2


def test_top_k_is_bm25_index_top_k():
    # BM25Index._top_k: positive scores only; k = 4 positive < 5 scores, so argpartition then the
    # unstable argsort. The expected lists are what ReMe's own BM25Index._top_k returned on these
    # arrays (ReMe @ c8e12487 in its venv, numpy 2.4.6, the project's numpy too): equal scores in
    # numpy's order, not the slot order
    s = np.array([0.5, 0.0, 2.0, 0.5, 1.0], np.float32)
    assert reme_bm25.top_k(s, 10).tolist() == [2, 4, 3, 0]
    assert reme_bm25.top_k(s, 2).tolist() == [2, 4]
    assert reme_bm25.top_k(np.zeros(3, np.float32), 2).tolist() == []
    s = np.array(
        [
            1,
            3,
            2,
            3,
            1,
            2,
            3,
            1,
            2,
            3,
            3,
            2,
            1,
            2,
            3,
            1,
            1,
            3,
            2,
            2,
            3,
            1,
            2,
            3,
            3,
            1,
            2,
            2,
            3,
            1,
            2,
            3,
        ],
        np.float32,
    )
    want = [1, 3, 6, 9, 10, 14, 20, 17, 24, 23, 31, 28, 11, 13, 5, 2, 30, 27, 19, 26, 22, 8, 18]
    assert reme_bm25.top_k(s, 25).tolist() == [*want, 0, 15]
