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
    # BM25Index._top_k: positive scores only; argsort when k covers the array, else argpartition
    s = np.array([0.5, 0.0, 2.0, 0.5, 1.0], np.float32)
    top = reme_bm25.top_k(s, 10).tolist()  # 4 positive < 5 scores: argpartition, then argsort
    assert top[:2] == [2, 4] and sorted(top[2:]) == [0, 3]  # the tie's order is numpy's
    part = np.argpartition(-s, 3)[:4]
    assert top == part[np.argsort(-s[part])].tolist()
    assert reme_bm25.top_k(s, 2).tolist() == [2, 4]
    assert reme_bm25.top_k(np.zeros(3, np.float32), 2).tolist() == []
    # many equal scores: ReMe's order is numpy's (argpartition, then the unstable argsort)
    rng = np.random.default_rng(0)
    s = rng.integers(1, 4, 60).astype(np.float32)
    top = np.argpartition(-s, 24)[:25]
    assert reme_bm25.top_k(s, 25).tolist() == top[np.argsort(-s[top])].tolist()
