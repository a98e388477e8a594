"""Every top-k of ``ops/topk.py``: tie rules by hand, and parity with a sort-based reference on
inputs that reach every code path (ties, per-column k, k = 0, long rows, float32 and float64)."""

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops.topk import (
    topk_abs_mask,
    topk_by_row,
    topk_dense,
    topk_entry_mask,
    topk_long,
    topk_sparse,
)
from tests.helpers.reference import topk_reference


def test_topk_breaks_ties_by_item_index_and_ranks_from_one():
    qi = np.array([0, 0, 0, 1, 1])
    di = np.array([5, 2, 9, 3, 1])
    sc = np.array([0.5, 0.5, 0.9, 0.1, 0.2], dtype=np.float32)
    q, d, s, r = topk_long(qi, di, sc, k=2)
    assert q.tolist() == [0, 0, 1, 1]
    assert d.tolist() == [9, 2, 1, 3]
    assert r.tolist() == [1, 2, 1, 2]


def test_topk_dense_drops_padding():
    D = np.array([[0.3, 0.3, -1.0]], dtype=np.float32)
    I = np.array([[7, 4, -1]])
    q, d, s, r = topk_dense(D, I, k=5)
    assert d.tolist() == [4, 7] and r.tolist() == [1, 2]


def test_topk_abs_mask_ties_by_row_order():
    x = np.array([[0.5], [-0.5], [0.5], [0.1], [0.0]])
    assert topk_abs_mask(x, 2)[:, 0].tolist() == [True, True, False, False, False]
    assert topk_abs_mask(x, 10)[:, 0].tolist() == [True, True, True, True, False]


def test_topk_abs_mask_per_column_k():
    x = np.array([[0.9, 0.1], [0.5, 0.8], [0.7, 0.3]])
    np.testing.assert_array_equal(
        topk_abs_mask(x, np.array([2, 0])), [[True, False], [False, False], [True, False]]
    )


def test_topk_abs_mask_k_zero_keeps_nothing():
    x = np.array([[0.5, 0.2], [-0.7, 0.0], [0.1, 0.3]])
    assert not topk_abs_mask(x, 0).any()
    assert not topk_abs_mask(x, np.int64(0)).any()
    assert not topk_abs_mask(x, -1).any()
    # |x| per column: 0.5, 0.7, 0.1 and 0.2, 0, 0.3
    np.testing.assert_array_equal(
        topk_abs_mask(x, 1), [[False, False], [True, False], [False, True]]
    )
    np.testing.assert_array_equal(
        topk_abs_mask(x, np.array([0, 1])), [[False, False], [False, False], [False, True]]
    )
    np.testing.assert_array_equal(topk_abs_mask(x, 3), [[True, True], [True, False], [True, True]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_topk_abs_mask_matches_reference(dtype):
    rng = np.random.default_rng(3)
    for trial in range(30):
        n, b = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        x = (rng.integers(-4, 5, size=(n, b)) * 0.25).astype(dtype)  # many ties and zeros
        for k in (0, 1, int(rng.integers(1, n + 1)), n, n + 3, rng.integers(0, n + 2, size=b)):
            got = topk_abs_mask(x, k)
            for q in range(b):
                kq = int(k[q]) if np.ndim(k) else k
                want = topk_reference(np.abs(x[:, q]).tolist(), kq)
                assert np.flatnonzero(got[:, q]).tolist() == want, f"trial {trial} k {k} column {q}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k, per_row", [(1, 5), (3, 400), (20, 60), (50, 20)])
def test_topk_entry_mask_matches_reference(dtype, k, per_row):
    """Entries in any order; rows far longer than k take the sampled-threshold path, rows of at most
    k entries are kept whole, and dyadic values make ties."""
    rng = np.random.default_rng(k * 1000 + per_row)
    b, n = 12, 2000
    q, i = [], []
    for row in range(b):
        m = 0 if row % 5 == 4 else int(rng.integers(1, 2 * per_row))
        q += [row] * m
        i += sorted(rng.choice(n, size=m, replace=False).tolist())
    q, i = np.array(q, np.int64), np.array(i, np.int64)
    a = (rng.integers(0, 64, size=q.size) / 16.0).astype(dtype)
    perm = rng.permutation(q.size)
    q, i, a = q[perm], i[perm], a[perm]
    for cnt in (None, np.bincount(q, minlength=b)):
        keep = topk_entry_mask(np, q, i, a, k, b, cnt)
        for row in range(b):
            at = np.flatnonzero(q == row)
            by_node = at[np.argsort(i[at])]
            want = topk_reference(a[by_node].tolist(), k, keep_zero=True)
            assert sorted(np.flatnonzero(keep[by_node]).tolist()) == want, f"row {row}"


def test_topk_entry_mask_long_rows_of_one_value():
    """Long rows whose sampled threshold cuts nothing (every entry tied) are ranked by node, not
    sent round the sampled path again (that recursed without end)."""
    b, per = 3, 2000
    q = np.repeat(np.arange(b), per)
    i = np.tile(np.arange(per)[::-1], b)
    keep = topk_entry_mask(np, q, i, np.ones(q.size, np.float32), 5, b)
    assert sorted(i[keep & (q == 1)].tolist()) == [0, 1, 2, 3, 4]
    assert int(keep.sum()) == 15


def _sparse_reference(m, k: int, positive_only: bool = True):
    """Per row, a full Python sort of its stored entries by (float32 score desc, column asc)."""
    m = sp.csr_matrix(m)
    out = []
    for r in range(m.shape[0]):
        a, b = m.indptr[r], m.indptr[r + 1]
        ent = [
            (float(np.float32(v)), int(c))
            for c, v in zip(m.indices[a:b], m.data[a:b])
            if v > 0 or not positive_only
        ]
        ent.sort(key=lambda e: (-e[0], e[1]))
        out += [(r, c, v, rank + 1) for rank, (v, c) in enumerate(ent[: max(k, 0)])]
    return out


@pytest.mark.parametrize("per_row", [3, 90, 2500])
def test_topk_sparse_equals_a_full_sort(per_row):
    """Rows shorter and longer than k (the entry-mask cut), far longer (its sampled threshold),
    empty rows, stored zeros and negatives, ties at the cut, float64 scores that round together
    in float32, CSR and COO input, k = 0: the triples of a full per-row sort."""
    rng = np.random.default_rng(per_row)
    b, n = 40, 6000
    rows, cols = [], []
    for r in range(b):
        m = 0 if r % 7 == 3 else int(rng.integers(1, 2 * per_row))
        rows += [r] * m
        cols += rng.choice(n, size=m, replace=False).tolist()
    vals = rng.integers(-3, 40, size=len(rows)) / 8.0  # ties, zeros, negatives
    vals[::5] += 1e-12  # distinct in float64, equal in float32
    m = sp.csr_matrix((vals, (rows, cols)), shape=(b, n))
    m.data[::11] = 0.0  # stored zeros
    for k in (0, 1, 7, 30, 400):
        for x in (m, m.tocoo()):
            got = topk_sparse(x, k)
            assert (
                got[0].dtype == np.int64 and got[2].dtype == np.float32 and got[3].dtype == np.int32
            )
            assert list(zip(*(a.tolist() for a in got))) == _sparse_reference(m, k), (k, x.format)
    got = topk_sparse(m, 5, positive_only=False)
    assert list(zip(*(a.tolist() for a in got))) == _sparse_reference(m, 5, positive_only=False)


def test_topk_by_row_orders_by_score_then_id():
    s = np.array([[0.1, 0.9, 0.5, 0.9], [0.3, 0.2, 0.3, 0.1]], np.float32)
    ids = np.array([13, 12, 11, 10])
    d, i = topk_by_row(s, ids, 2)
    np.testing.assert_array_equal(d, np.float32([[0.9, 0.9], [0.3, 0.3]]))
    assert i.tolist() == [[10, 12], [11, 13]]
    d, i = topk_by_row(s, ids, 9)  # k above the width: every column, sorted
    assert i.tolist() == [[10, 12, 11, 13], [11, 13, 12, 10]]


def test_diffusion_hits_keep_cut_by_hand():
    """``diffuse._hits``: column 0 holds 0.5 (row 1), 0.5 (row 3), 0.9 (row 5); keep=2 keeps 0.9 and
    the tie at the cut goes to the lower row (1). Hits come back row-major."""
    from pipeline.stages.diffuse import _hits

    out = np.zeros((10, 2), np.float32)
    out[[1, 3, 5], 0] = [0.5, 0.5, 0.9]
    out[2, 1] = 0.1
    r, c, g = _hits(out, 2)
    assert r.tolist() == [1, 2, 5] and c.tolist() == [0, 1, 0]
    assert g.tolist() == pytest.approx([0.5, 0.1, 0.9]) and g.dtype == np.float32
    r, c, g = _hits(out, 0)  # 0: every positive entry
    assert r.tolist() == [1, 2, 3, 5]


@pytest.mark.parametrize(
    "qmax,dmax", [(3, 4), (1000, 1 << 20), (1 << 30, 1 << 40), (1 << 40, 5), (1 << 30, 1 << 30)]
)
def test_lex_order_is_lexsort(qmax, dmax):
    """The packed-key sort gives numpy's lexsort order exactly: ties, ±0, ±inf, subnormals, and ids
    too wide to pack (two stable sorts, or lexsort itself); ``int_order`` with the position packed
    too, with the pair alone (60 bits: no room for it) and with lexsort."""
    from pipeline.ops.topk import int_order, lex_order

    rng = np.random.default_rng(qmax % 97)
    special = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, 3.25e-40, -1e-39], np.float32)
    for trial in range(40):
        n = int(rng.integers(0, 400))
        qi, di = rng.integers(0, qmax, n), rng.integers(0, dmax, n)
        s = rng.choice(special, n) if trial % 2 else rng.normal(size=n).astype(np.float32)
        np.testing.assert_array_equal(lex_order(qi, s, di), np.lexsort((di, -s, qi)))
        np.testing.assert_array_equal(int_order(qi, di), np.lexsort((di, qi)))
    s64 = rng.normal(size=50)  # float64 scores: lexsort itself
    qi, di = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
    np.testing.assert_array_equal(lex_order(qi, s64, di), np.lexsort((di, -s64, qi)))


@pytest.mark.parametrize("qmax,dmax", [(3, 4), (1000, 1 << 20), (1 << 20, 1 << 12), (1 << 30, 5)])
def test_topk_long_equals_the_lexsort_cut(qmax, dmax):
    """The packed-key path (keys sorted and decoded) and its fallbacks (ids too wide to pack, −0.0,
    NaN, float64 scores) give the triples, dtypes and ranks of a plain ``np.lexsort`` cut."""
    rng = np.random.default_rng(qmax % 89)
    special = np.array([0.0, 1.5, -2.0, np.inf, -np.inf, 3.25e-40, -1e-39, 7.0], np.float32)
    for trial in range(40):
        n = int(rng.integers(1, 500))
        qi = rng.integers(0, qmax, n).astype(np.int32 if trial % 3 == 0 else np.int64)
        di = rng.integers(0, dmax, n)
        s = rng.choice(special, n) if trial % 2 else rng.normal(size=n).astype(np.float32)
        if trial % 5 == 0:
            s[rng.integers(0, n)] = -0.0 if trial % 10 else np.nan
        if trial % 7 == 0:
            s = s.astype(np.float64)
        k = int(rng.integers(1, 6))
        order = np.lexsort((di, -s, qi))
        q2, d2, s2 = qi[order], di[order], s[order]
        rank = np.array([np.sum(q2[:j] == q2[j]) + 1 for j in range(n)])
        keep = rank <= k
        got = topk_long(qi, di, s, k)
        for a, b in zip(got, (q2[keep], d2[keep], s2[keep], rank[keep].astype(np.int32))):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))  # bits: −0.0 too


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64])
@pytest.mark.parametrize(
    "lo, high",
    [
        (0, 1),
        (0, 10),
        (-5, 1 << 15),
        (0, 1 << 16),
        (-(1 << 30), 1 << 30),
        (0, 1 << 40),
        (0, 1 << 62),
    ],
)
def test_stable_argsort_is_numpys_stable_argsort(dtype, lo, high):
    """Every path (already ascending, the uint16 radix sort, the packed sort, numpy's own when
    ``(max − min)`` and the positions overflow 63 bits) gives ``np.argsort(kind="stable")``: ties
    in input order, negative keys and every integer dtype included."""
    from pipeline.ops.topk import int_order

    info = np.iinfo(dtype)
    lo, high = max(lo, int(info.min)), min(high, int(info.max))
    assert high > lo
    rng = np.random.default_rng(abs(lo) % 97 + high % 89)
    keys = rng.integers(lo, high, 50_000, dtype=np.int64).astype(dtype)
    for k in (keys, np.sort(keys), keys[:1], keys[:0], np.full(9, keys[0])):
        got = int_order(k)
        assert np.array_equal(got, np.argsort(k, kind="stable")), (dtype, lo, high, len(k))
    assert int_order(np.array([3, 1, 3, 0, 1])).tolist() == [3, 1, 4, 0, 2]
