"""pipeline.ops.collab's factorisation and incidence against independent references: Python's
sorted set of key tuples for ``codes`` (integer, negative, int64-wide, string and mixed keys, so
both the offset path and the overflow fallback run), ``np.unique`` for ``_dense_ranks`` on both of
its paths, scipy's COO → CSR for ``incidence``, and the plain loops on edge-case logs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops import collab

BIG = np.iinfo(np.int64).max


def _tuple_ranks(*keys):
    rows = list(zip(*(k.tolist() for k in keys), strict=True))
    rank = {t: n for n, t in enumerate(sorted(set(rows)))}
    return np.array([rank[t] for t in rows], dtype=np.int64), len(rank)


def _keys(kind: str, g: np.random.Generator, n: int) -> np.ndarray:
    if kind == "small":
        return g.integers(0, 7, n)
    if kind == "negative":
        return g.integers(-50, 50, n)
    if kind == "wide":  # offsets span almost all of int64: combining must factorise first
        return np.where(g.random(n) < 0.5, -BIG + g.integers(0, 3, n), BIG - g.integers(0, 3, n))
    if kind == "half":  # 2**40 wide: two of them overflow int64 once combined
        return g.integers(0, 2**40, n)
    if kind == "huge":  # 2**62 wide: after any other column, it is factorised on its own
        return g.integers(0, 2**62, n)
    if kind == "uint":
        return g.integers(0, 2**63, n, dtype=np.uint64) + np.uint64(2**63 - 1)
    return np.array([f"k{x}" for x in g.integers(0, 9, n)])  # strings


KINDS = ["small", "negative", "wide", "half", "huge", "uint", "str"]


@pytest.mark.parametrize("first", KINDS)
@pytest.mark.parametrize("second", KINDS)
def test_codes_are_the_sorted_tuple_ranks(first, second):
    g = np.random.default_rng(len(first) * 31 + len(second))
    a, b = _keys(first, g, 300), _keys(second, g, 300)
    got, n = collab.codes(a, b)
    want, m = _tuple_ranks(a, b)
    assert n == m and got.dtype == np.int64
    assert np.array_equal(got, want)


def test_codes_of_three_wide_columns():
    g = np.random.default_rng(5)
    keys = [_keys("wide", g, 200), _keys("small", g, 200), _keys("wide", g, 200)]
    got, n = collab.codes(*keys)
    want, m = _tuple_ranks(*keys)
    assert n == m and np.array_equal(got, want)


@pytest.mark.parametrize("high", [1000, 2**60])  # packed sort, then the stable argsort
def test_dense_ranks_both_paths_match_numpy_unique(high):
    x = np.random.default_rng(1).integers(0, high, 5000)
    uniq, inv = np.unique(x, return_inverse=True)
    got, n = collab._dense_ranks(x)
    assert n == len(uniq) and np.array_equal(got, inv.ravel())
    assert collab._dense_ranks(np.zeros(0, dtype=np.int64))[1] == 0


def test_incidence_is_binary_csr_like_scipy():
    g = np.random.default_rng(2)
    b, i = g.integers(0, 40, 3000), g.integers(0, 30, 3000)
    got = collab.incidence(b, i, (41, 30))
    want = sp.coo_matrix((np.ones(len(b)), (b, i)), shape=(41, 30)).tocsr()
    want.data[:] = 1.0
    assert got.has_sorted_indices and got.shape == (41, 30)
    assert np.array_equal(got.toarray(), want.toarray())
    with pytest.raises(ValueError, match="outside the shape"):
        collab.incidence(np.array([0, 41]), np.array([0, 1]), (41, 30))


def test_empty_and_one_item_pairs():
    empty = collab.incidence(np.zeros(0, np.int64), np.zeros(0, np.int64), (3, 4))
    assert collab.swing(empty).nnz == 0 and collab.itemcf(empty).nnz == 0
    # baskets 0, 1 share item 0 only: a pair, but no swing entry (one shared item)
    r = collab.incidence(np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 2, 3]), (3, 4))
    assert collab.swing(r).nnz == 0
    assert collab.itemcf(r).toarray()[1, 2] == pytest.approx(0.0)
    assert collab.itemcf(r).toarray()[0, 1] == pytest.approx(1 / np.sqrt(2))


@pytest.mark.parametrize("name", ["itemcf", "usercf", "swing"])
def test_similarities_are_canonical_without_diagonal(name):
    g = np.random.default_rng(4)
    r = collab.incidence(g.integers(0, 60, 2000), g.integers(0, 50, 2000), (60, 50))
    s = getattr(collab, name)(r)
    for row in range(s.shape[0]):
        cols = s.indices[s.indptr[row] : s.indptr[row + 1]]
        assert np.all(np.diff(cols) > 0), (name, row)  # ascending, no duplicate
        assert row not in cols
    assert np.allclose(s.toarray(), s.toarray().T)
