"""The xp-generic diffusion code on the shapes CuPy rejects (issue 13, item 9).

``cupy.bincount`` raises on an empty input and on ``minlength=0``; one-query blocks, one-pair PPR
chunks and seedless blocks produce exactly those. These tests run the numpy twin with
``numpy.bincount`` replaced by one that keeps CuPy's contract, so an unguarded call fails here, and
compare the outputs with hand computations.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.core import backend
from pipeline.ops.pedsa import pedsa
from pipeline.ops.ppr import ppr
from pipeline.ops.sparse_entries import per_entry, segment_ids

_np_bincount = np.bincount


def _cupy_like_bincount(x, weights=None, minlength=None):
    if np.asarray(x).size == 0:
        raise ValueError("cupy.bincount: empty input (cupy.max of an empty array)")
    if minlength is not None and int(minlength) <= 0:
        raise ValueError("minlength must be positive")
    return _np_bincount(x, weights=weights, minlength=minlength or 0)


@pytest.fixture(autouse=True)
def cupy_contract(monkeypatch):
    monkeypatch.setattr(np, "bincount", _cupy_like_bincount)


def _path_graph():
    """0 — 1 (weight 1) and an isolated node 2."""
    return sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], np.float32))


def test_the_contract_is_enforced():
    with pytest.raises(ValueError):
        np.bincount(np.zeros(0, np.int64))


def test_bincount_guard_empty_and_one_element():
    assert backend.bincount(np.zeros(0, np.int64), minlength=3).tolist() == [0, 0, 0]
    assert backend.bincount(np.zeros(0, np.int64)).tolist() == []
    empty_w = backend.bincount(np.zeros(0, np.int64), weights=np.zeros(0), minlength=2)
    assert empty_w.tolist() == [0.0, 0.0] and empty_w.dtype == np.float64
    assert backend.bincount(np.array([2]), weights=np.array([0.5])).tolist() == [0.0, 0.0, 0.5]


def test_segment_ids_one_row_no_rows_and_empty_rows():
    assert segment_ids(np, np.array([0, 3]), 3).tolist() == [
        0,
        0,
        0,
    ]  # one row: indptr[1:-1] is empty
    assert segment_ids(np, np.array([0]), 0).tolist() == []  # no rows
    assert segment_ids(np, np.array([0, 0]), 0).tolist() == []  # one empty row
    assert segment_ids(np, np.array([0, 0, 2, 2, 3]), 3).tolist() == [1, 1, 3]  # empty rows 0 and 2


def test_segment_ids_device_path_equals_numpys_repeat():
    """The bincount + cumsum path CuPy takes (reached here through a namespace that is not numpy)
    gives numpy's ``repeat``; ``per_entry`` gathers each row's value through it."""
    xp = SimpleNamespace(int32=np.int32, int64=np.int64, cumsum=np.cumsum, arange=np.arange)
    for indptr in ([0, 3], [0], [0, 0], [0, 0, 2, 2, 3], [0, 1, 1, 4, 6]):
        indptr = np.array(indptr)
        want = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)).tolist()
        assert segment_ids(xp, indptr, int(indptr[-1])).tolist() == want
        vals = np.arange(len(indptr) - 1) * 10.0
        assert per_entry(xp, vals, indptr, int(indptr[-1])).tolist() == [10.0 * r for r in want]
        assert per_entry(np, vals, indptr, int(indptr[-1])).tolist() == [10.0 * r for r in want]


def test_pedsa_one_query():
    e0 = np.zeros((3, 1), np.float32)
    e0[0, 0] = 1.0
    out = pedsa(_path_graph(), None, e0, steps=2)
    # step 1: node 1 gets 1·0.6·(1−0.15) = 0.51; step 2 sends 0.51·0.51 = 0.26 back to the seed,
    # whose teleport mix 0.85·0.26 + 0.15 stays below its own 1.0; node 2 is not connected
    np.testing.assert_allclose(out[:, 0], [1.0, 0.51, 0.0], rtol=1e-6)


def test_pedsa_seed_without_edges_and_seedless_block():
    e0 = np.zeros((3, 2), np.float32)
    e0[2, 0] = 0.7  # query 0: an isolated seed (the step's product is empty); query 1: no seed
    out = pedsa(_path_graph(), None, e0)
    np.testing.assert_allclose(out, [[0, 0], [0, 0], [0.7, 0]], rtol=1e-6)
    out = pedsa(
        _path_graph(), None, sp.csr_matrix((3, 1), dtype=np.float32)
    )  # sparse, no seeds at all
    assert out.shape == (3, 1) and out.nnz == 0


def test_ppr_one_pair_chunk():
    p = np.zeros((3, 1))
    p[0, 0] = 1.0
    x, info = ppr(_path_graph(), p, damping=0.5, tol=1e-12)
    # x0 = 0.5 + 0.5·x1, x1 = 0.5·x0 → x0 = 2/3, x1 = 1/3; node 2 is in another component
    np.testing.assert_allclose(x[:, 0], [2 / 3, 1 / 3, 0.0], atol=1e-10)
    assert info.converged


def test_ppr_seedless_block_and_isolated_seed():
    x, info = ppr(_path_graph(), np.zeros((3, 2)))
    assert x.shape == (3, 2) and not x.any() and info.n_iter == 0
    p = np.zeros((3, 2))
    p[2, 1] = 1.0  # query 0: no seed; query 1: the isolated node keeps all its mass
    x, _ = ppr(_path_graph(), p)
    np.testing.assert_allclose(x, [[0, 0], [0, 0], [0, 1.0]])
