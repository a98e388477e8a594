"""The dense channel's threshold scan (``channels.dense_range``) and ``dense.exact_top`` on data
whose exact cosine ties cross the cut: hand-computed pairs, the per-element reference top-k, the
same bits whatever the batch, and only the items near the cut rescored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.channels import dense, dense_range
from pipeline.core import backend
from tests.helpers.reference import fold_dot

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not backend.has_cuda(), reason="no GPU")),
]


def _sides(xb, device):
    """``xb`` as the scan meets it: a host array, or a torch tensor on ``device``."""
    return xb if device is None else torch.from_numpy(xb).to(device)


@pytest.mark.parametrize("device", [None, *DEVICES])
@pytest.mark.parametrize("scores", [None, 2, 6])  # one block; blocks of 1 and of 2 node rows
def test_within_hand_computed(device, scores):
    xb = np.array([[1, 0], [0, 1], [0.6, 0.8], [1, 0], [-1, 0]], np.float32)
    xq = np.array([[1, 0], [0, 1], [0.8, 0.6]], np.float32)
    # products: q0: 1, 0, .6, 1, -1   q1: 0, 1, .8, 0, 0   q2: .8, .6, .96, .8, -.8
    thr = np.array([0.5, 0.9, -0.9], np.float32)
    q, n = dense_range.within(xq, _sides(xb, device), thr, scores)
    assert q.tolist() == [0, 0, 0, 1, 2, 2, 2, 2, 2]
    assert n.tolist() == [0, 2, 3, 1, 0, 1, 2, 3, 4]
    assert q.dtype == n.dtype == np.int64


def test_within_empty_and_memmap(tmp_path):
    xb = np.eye(4, dtype=np.float32)
    q, n = dense_range.within(np.zeros((0, 4), np.float32), xb, np.zeros(0, np.float32))
    assert q.shape == n.shape == (0,)
    path = tmp_path / "xb.npy"
    np.save(path, xb)
    mm = np.load(path, mmap_mode="r")  # the blocked index's vectors: read block by block
    q, n = dense_range.within(np.eye(4, dtype=np.float32)[[2, 0]], mm, np.full(2, 0.5), 3)
    assert q.tolist() == [0, 1] and n.tolist() == [2, 0]


def _tied(seed=4, n_unique=60, copies=5, d=24, nq=40):
    """Sparse quantised unit vectors (a few ±1 features, as word hashing gives): many distinct
    vectors share a cosine exactly, and each vector is stored ``copies`` times under scattered
    ids, so exact ties cross every cut; queries are such vectors too."""
    rng = np.random.default_rng(seed)

    def sparse(m, nnz):
        x = np.zeros((m, d), np.float32)
        for row in x:
            row[rng.choice(d, nnz, replace=False)] = rng.choice([-1.0, 1.0], nnz)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    base = sparse(n_unique, 4)
    xb = np.tile(base, (copies, 1))[rng.permutation(n_unique * copies)]
    return np.ascontiguousarray(xb), sparse(nq, 3)


def _reference_top(xq, xb, k):
    """Each query's k best of every item by (−fold_dot, item): the per-element reference dot
    (``reference.fold_dot``) of every pair, a Python sort."""
    out = []
    for q in range(len(xq)):
        s = [(-float(fold_dot(xq[q], xb[i])), i) for i in range(len(xb))]
        out.append(sorted(s)[:k])
    return out


def _exact_top(xq, xb, k, index="flat"):
    D, I = dense.search(dense.build_index(xb, index), xq, k + dense.RESCORE_EXTRA)
    qi, ni, s = dense.exact_top(xq, xb, D, I, k, exact=True)
    return [[(-float(v), int(i)) for i, v in zip(ni[qi == q], s[qi == q])] for q in range(len(xq))]


@pytest.mark.parametrize("index", ["flat", "blocked", "torch"])
def test_exact_top_is_the_reference_top_k_on_tied_data(index):
    xb, xq = _tied()
    k = 12
    ref = _reference_top(xq, xb, k)
    # the data is what the test says: the k-th and (k+1)-th reference scores tie for most queries
    full = [sorted((-float(fold_dot(q, x)), i) for i, x in enumerate(xb)) for q in xq]
    assert sum(f[k - 1][0] == f[k][0] for f in full) >= len(xq) // 2
    assert _exact_top(xq, xb, k, index) == ref


def test_exact_top_bits_do_not_depend_on_the_batch():
    xb, xq = _tied(seed=9, nq=60)
    k = 7
    whole = _exact_top(xq, xb, k)
    perm = np.random.default_rng(2).permutation(len(xq))
    shuffled = _exact_top(xq[perm], xb, k)
    assert [shuffled[j] for j in np.argsort(perm)] == whole
    alone = [_exact_top(xq[j : j + 1], xb, k)[0] for j in range(0, len(xq), 7)]
    assert alone == whole[::7]


def test_tied_queries_rescore_only_the_items_near_the_cut(monkeypatch):
    """Tie-heavy data costs what tie-free data costs: a query tied at the cut rescores its hits and
    the items whose cosine is within the tolerance band of its k-th (float64 reference), never its
    whole scope."""
    rng = np.random.default_rng(3)
    d, k = 32, 10
    far = rng.normal(size=(3000, d))
    far /= np.linalg.norm(far, axis=1, keepdims=True)
    xq = rng.normal(size=(30, d))
    xq /= np.linalg.norm(xq, axis=1, keepdims=True)
    xq = xq.astype(np.float32)
    near = np.repeat(xq, 30, axis=0)  # 30 copies of every query: ties far past the cut
    xb = np.concatenate([far, near]).astype(np.float32)[rng.permutation(3000 + 30 * 30)]
    seen = []
    real = dense.pair_scores
    monkeypatch.setattr(
        dense, "pair_scores", lambda *a, **kw: seen.append(len(a[2])) or real(*a, **kw)
    )
    got = _exact_top(xq, xb, k)
    cos = xq.astype(np.float64) @ xb.T.astype(np.float64)
    band = int((cos >= 1.0 - 2 * dense.RESCORE_TOL).sum())  # the copies of each query
    assert band == 30 * 30
    assert sum(seen) <= len(xq) * (k + dense.RESCORE_EXTRA) + band
    copies = [sorted(np.flatnonzero(np.isclose(c, 1.0, atol=1e-6)).tolist())[:k] for c in cos]
    assert [[i for _s, i in row] for row in got] == copies  # the copies of lowest id
