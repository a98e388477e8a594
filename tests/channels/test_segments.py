"""``candidates.Segments``' positions: the closed form for consecutive rows and queries equals
the binary search over the laid-out keys, on random segments with and without gaps and with
keys inside and outside each segment's span."""

import numpy as np
import pytest

from pipeline.channels.candidates import Segments


def _search_rows(segs: Segments, seg: np.ndarray, ni: np.ndarray) -> np.ndarray:
    """The definition: the place of (segment, node) among the sorted (segment, node) keys."""
    n = int(max(segs.rows.max(initial=0), ni.max(initial=0))) + 1
    return np.searchsorted(segs.seg * n + segs.rows, seg * n + ni)


def _search_queries(segs: Segments, qi: np.ndarray) -> np.ndarray:
    order = np.argsort(segs.qs, kind="stable")
    return order[np.searchsorted(segs.qs[order], qi)]


def _parts(rng, gaps: bool, k: int):
    parts, node, query = [], 0, 0
    for _ in range(k):
        size = int(rng.integers(1, 30))
        rows = np.arange(node, node + size)
        if gaps:
            rows = np.sort(rng.choice(node + 3 * size, size, replace=False))
        node = int(rows[-1]) + 1 - (int(rng.integers(0, 5)) if not gaps else 0)  # overlap
        nq = int(rng.integers(1, 6))
        parts.append(("k", rows, np.arange(query, query + nq)))
        query += nq + (int(rng.integers(0, 2)) if gaps else 0)
    return parts


@pytest.mark.parametrize("gaps", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_positions_equal_the_binary_search(seed, gaps):
    rng = np.random.default_rng(seed)
    segs = Segments.of(_parts(rng, gaps, int(rng.integers(1, 5))))
    # valid pairs: a query's segment and one of its nodes
    vq = rng.integers(0, len(segs.qs), 200)
    s = segs.qseg[vq]
    start = np.searchsorted(segs.seg, np.arange(len(segs.parts) + 1))
    at = start[s] + (rng.random(200) * (start[s + 1] - start[s])).astype(np.int64)
    ni = segs.rows[at]
    assert np.array_equal(segs.row_pos(s, ni), at)
    assert np.array_equal(segs.row_pos(s, ni), _search_rows(segs, s, ni))
    assert np.array_equal(segs.query_pos(segs.qs[vq]), vq)
    # keys outside a span: both give the search's answer
    out = ni + np.where(rng.random(200) < 0.5, 40, 0)
    assert np.array_equal(segs.row_pos(s, out), _search_rows(segs, s, out))
    qo = segs.qs[vq] + np.where(rng.random(200) < 0.5, 7, 0)
    assert _outcome(segs.query_pos, qo) == _outcome(lambda q: _search_queries(segs, q), qo)


def _outcome(fn, *a):
    """The result's values, or the exception's type (a query past the last one has no place)."""
    try:
        return fn(*a).tolist()
    except IndexError:
        return IndexError


def test_positions_by_hand():
    # segment 0: nodes 4, 5, 6; segment 1: nodes 5, 6 (consecutive); queries 10, 11, 12
    segs = Segments.of(
        [("a", np.array([4, 5, 6]), np.array([10, 11])), ("b", np.array([5, 6]), np.array([12]))]
    )
    assert segs.row_pos(np.array([0, 1, 1, 0]), np.array([6, 5, 6, 4])).tolist() == [2, 3, 4, 0]
    assert segs.query_pos(np.array([12, 10, 11])).tolist() == [2, 0, 1]
    gap = Segments.of([("a", np.array([1, 3]), np.array([0, 2]))])  # not consecutive: the search
    assert gap.row_pos(np.array([0, 0]), np.array([3, 1])).tolist() == [1, 0]
    assert gap.query_pos(np.array([2, 0])).tolist() == [1, 0]
