"""Dense channel: flat search is exact; IVF and HNSW agree with it closely on clustered data."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.channels import dense


def _data(n=3000, d=32, nq=50, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(30, d))
    xb = (centers[rng.integers(0, 30, n)] + 0.3 * rng.normal(size=(n, d))).astype(np.float32)
    xb /= np.linalg.norm(xb, axis=1, keepdims=True)
    xq = xb[rng.choice(n, nq, replace=False)] + 0.05 * rng.normal(size=(nq, d)).astype(np.float32)
    return xb, (xq / np.linalg.norm(xq, axis=1, keepdims=True)).astype(np.float32)


def test_flat_equals_brute_force():
    xb, xq = _data()
    D, I = dense.search(dense.build_index(xb, "flat"), xq, 10)
    ref = np.argsort(-(xq @ xb.T), axis=1, kind="stable")[:, :10]
    assert (I == ref).mean() > 0.999 and np.allclose(
        D, np.take_along_axis(xq @ xb.T, ref, 1), atol=1e-5
    )


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_indexes_recall_most_of_flat(kind):
    xb, xq = _data()
    _, I = dense.search(dense.build_index(xb, kind, nlist=32, nprobe=8), xq, 10)
    _, ref = dense.search(dense.build_index(xb, "flat"), xq, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(I, ref)])
    assert overlap >= 0.9


def test_unknown_index_and_small_k():
    xb, xq = _data(n=5, nq=3)
    with pytest.raises(Exception, match="choose from"):
        dense.build_index(xb, "annoy")
    D, I = dense.search(dense.build_index(xb), xq, 10)
    assert I.shape == (len(xq), 5)  # k is capped at the corpus size


def test_tiny_flat_scan_on_one_thread_gives_the_same_bits(monkeypatch):
    """A small scope's scan runs on one OpenMP thread (``dense._tiny_flat``): the same scores and
    ids as the default thread count, and the brute-force top-k."""
    rng = np.random.default_rng(16)
    xb = rng.normal(size=(40, 384)).astype(np.float32)
    xq = rng.normal(size=(5, 384)).astype(np.float32)
    index = dense.build_index(xb)
    assert dense._tiny_flat(index, len(xq))
    D1, I1 = dense.search(index, xq, 10)
    monkeypatch.setattr(dense, "TINY", 0)
    assert not dense._tiny_flat(index, len(xq))
    D2, I2 = dense.search(index, xq, 10)
    assert np.array_equal(D1, D2) and np.array_equal(I1, I2)
    want = np.argsort(-(xq @ xb.T), axis=1, kind="stable")[:, :10]
    assert np.array_equal(I1, want)
    assert np.allclose(D1, np.take_along_axis(xq @ xb.T, want, axis=1), atol=1e-4)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 12), max_size=40),
    st.lists(st.lists(st.integers(0, 14), unique=True, max_size=6).map(sorted), max_size=5),
)
def test_part_rows_are_each_groups_parts_in_order(part_q, groups):
    from pipeline.channels.candidates import DenseChannel

    part_q = np.asarray(part_q, np.int64)
    ch = DenseChannel(None, None, part_q, None, None, 0, "cpu")
    got = ch.part_rows([np.asarray(g, np.int64) for g in groups])
    for qs, rows in zip(groups, got):
        assert rows.tolist() == np.flatnonzero(np.isin(part_q, qs)).tolist()
