"""Dense channel: flat search is exact; IVF and HNSW agree with it closely on clustered data."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.channels import dense
from tests.helpers.reference import fold_dot


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


def _tied_data(seed=1, n_unique=300, copies=3, d=48, nq=120):
    """Unit vectors, each stored ``copies`` times under scattered ids (exact cosine ties at every
    cut), and queries near some of them; enough queries for FAISS's BLAS path."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_unique, d))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    xb = np.tile(base, (copies, 1))[rng.permutation(n_unique * copies)].astype(np.float32)
    xq = base[rng.integers(0, n_unique, nq)] + 0.4 * rng.normal(size=(nq, d))
    return xb, (xq / np.linalg.norm(xq, axis=1, keepdims=True)).astype(np.float32)


def _brute_top(xq, xb, k):
    """Reference: each query's best k items by (−cosine in float64, item id). Copies of a vector
    tie exactly (scored once per distinct vector: a BLAS product may round two equal columns
    differently, as an AVX-512 Xeon's dgemm did); distinct vectors are far from ties in this data."""
    uniq, inv = np.unique(xb, axis=0, return_inverse=True)
    s = (xq.astype(np.float64) @ uniq.astype(np.float64).T)[:, inv.ravel()]
    top = np.lexsort((np.broadcast_to(np.arange(len(xb)), s.shape), -s), axis=1)[:, :k]
    return top, np.take_along_axis(s, top, 1)


def _hits(xb, xq, rows, k=25):
    from pipeline.channels.candidates import DenseChannel
    from pipeline.stages.channels import DenseParams

    ch = DenseChannel(
        xb, xq, np.arange(len(xq)), np.ones(len(xq), np.float32),
        DenseParams.defaults(candidates=k), 0, "cpu",
    )  # fmt: skip
    r, n, s = ch.hits(np.arange(len(xb)), rows)
    return {int(q): sorted(zip(n[r == q].tolist(), s[r == q].tolist()), key=lambda t: (-t[1], t[0])) for q in rows}  # fmt: skip


def test_dense_hits_are_exact_cosines_cut_by_node_whatever_the_batch():
    """Regression (differential harness, best-full-api_shuffled): FAISS's BLAS scan gives a
    query's cosines bits that depend on its place among the batch's queries, so an item tied at
    the ``candidates`` cut stayed or went with the query order. Each query's hits are its exact
    cosines (one dot per pair), cut by (−cosine, item id), alone or in any batch order."""
    xb, xq = _tied_data()
    k = 25
    rows = np.arange(len(xq))
    got = _hits(xb, xq, rows, k)
    ids, cos = _brute_top(xq, xb, k)
    assert [[i for i, _s in got[q]] for q in rows] == ids.tolist()
    assert np.allclose([[s for _i, s in got[q]] for q in rows], cos, atol=1e-6)
    rng = np.random.default_rng(5)
    perm = rng.permutation(len(xq))  # the same queries in another order (rows are positions)
    shuffled = _hits(xb, xq[perm], rows, k)
    assert {int(perm[j]): v for j, v in shuffled.items()} == got  # the same bits
    few = np.sort(rng.choice(len(xq), 7, replace=False))  # a small batch: the per-query path
    assert _hits(xb, xq[few], np.arange(7), k) == {j: got[int(q)] for j, q in enumerate(few)}


@pytest.mark.parametrize("block", [1, 7, 2048])
def test_pair_scores_on_threads_are_each_pairs_own_dot(block):
    """Blocks spread over threads (block 1 and 7: many blocks) give every pair the bits of its own
    dot product in ops.pairdot's order, computed alone (the per-element reference), whatever block
    it fell in."""
    rng = np.random.default_rng(5)
    xq = rng.normal(size=(9, 16)).astype(np.float32)
    xb = rng.normal(size=(40, 16)).astype(np.float32)
    qi, di = rng.integers(0, 9, 300), rng.integers(0, 40, 300)
    got = dense.pair_scores(xq, xb, qi, di, block=block)
    alone = [fold_dot(xq[q], xb[d]) for q, d in zip(qi, di)]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(alone, np.float32))
    np.testing.assert_allclose(got, (xq[qi] * xb[di]).sum(1), rtol=1e-5, atol=1e-5)
