"""Progress inside one big scope (issue 29): the push solve of a scope's queries and its dense search
report as their parts finish — log lines every ~10% when there is no terminal — from
``progress.INNER_MIN`` queries on, with the bits of one solve / one search and of progress off."""

import io
import logging
import sys

import numpy as np
import scipy.sparse as sp

from pipeline.channels import candidates, dense
from pipeline.core import progress
from pipeline.ops import ppr_push as pp
from pipeline.ops.ppr_push import ppr_push_top


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pipeline.core.progress"]


def _ring(n: int) -> sp.csr_matrix:
    """A weighted ring of ``n`` nodes with a chord per fifth node (symmetric)."""
    src = np.r_[np.arange(n), np.arange(0, n, 5)]
    dst = np.r_[(np.arange(n) + 1) % n, (np.arange(0, n, 5) + n // 2) % n]
    w = np.r_[np.linspace(1.0, 2.0, n), np.full(src.size - n, 0.5)]
    a = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    return (a + a.T).tocsr()


def _seeds(n: int, b: int) -> sp.csr_matrix:
    """Query j seeds node j mod n (0.75) and node 3j mod n (0.25)."""
    j = np.arange(b)
    row = np.r_[j % n, (3 * j + 1) % n]
    e = np.r_[np.full(b, 0.75), np.full(b, 0.25)].astype(np.float32)
    return sp.csr_matrix((e, (row, np.r_[j, j])), shape=(n, b))


def _one_solve(adj, pers, rows: int, keep: int):
    """Every column in one push solve: no part, no thread, no progress."""
    dtype = pp._dtype(adj, pers)
    prep = pp._prepare(adj, 0.5, 1e-4, dtype)
    return pp._push_top(prep, pp._by_query(pers, dtype), rows, keep, damping=0.5, max_iter=100)


def _no_terminal(monkeypatch, flag=None):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    if flag is None:
        monkeypatch.delenv("RECALL_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("RECALL_PROGRESS", flag)


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a[:3], b[:3]))


def test_push_solve_logs_ten_lines_with_the_bits_of_one_solve(monkeypatch, caplog):
    adj, pers = _ring(60), _seeds(60, 2000)
    _no_terminal(monkeypatch)
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        got = ppr_push_top(adj, pers, 60, 5, workers=2)
    lines = _lines(caplog)
    # 2,000 queries ≥ INNER_MIN, 2 workers: 2·⌈20/2⌉ = 20 parts of 100 queries; a line each 200
    assert len(lines) == 10, lines
    assert lines[0].startswith("diffuse push: 200/2000 query (10%), ")
    assert lines[-1].startswith("diffuse push: 2000/2000 query (100%), ")
    one = _one_solve(adj, pers, 60, 5)  # one solve of every column, no thread, no progress
    assert _same(got, one) and got[3] == one[3]
    _no_terminal(monkeypatch, "0")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        off = ppr_push_top(adj, pers, 60, 5, workers=2)
    assert _lines(caplog) == [] and _same(off, got)


def test_push_solve_below_inner_min_says_nothing(monkeypatch, caplog):
    adj, pers = _ring(60), _seeds(60, progress.INNER_MIN - 1)
    _no_terminal(monkeypatch)
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        got = ppr_push_top(adj, pers, 60, 5, workers=2)
    assert _lines(caplog) == []
    assert _same(got, _one_solve(adj, pers, 60, 5))


def _unit(rng, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_dense_search_logs_per_block_with_the_bits_of_one_search(monkeypatch, caplog):
    rng = np.random.default_rng(5)
    xs, xq = _unit(rng, 400, 16), _unit(rng, 2500, 16)
    xq[7] = xq[3]  # two identical queries: the same hits wherever their blocks fall
    index = dense.build_index(xs, "flat")
    _no_terminal(monkeypatch)
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        got = candidates._searched(index, xq, xs, 10, "flat")
    lines = _lines(caplog)
    # blocks of 1,024: after 1,024 (40%), 2,048 (81%) and 2,500 queries (the end)
    assert [m.split(",")[0] for m in lines] == [
        "dense search: 1024/2500 query (40%)",
        "dense search: 2048/2500 query (81%)",
        "dense search: 2500/2500 query (100%)",
    ]
    D, I = dense.search(index, xq, 10 + dense.RESCORE_EXTRA)
    one = dense.exact_top(xq, xs, D, I, 10)  # one search of every query
    assert all(np.array_equal(a, b) for a, b in zip(got, one))
    # an independent reference: each query's 10 best items by a float64 cosine
    qi, ni, _s = got
    best = np.argsort(-(xq.astype(np.float64) @ xs.T.astype(np.float64)), axis=1, kind="stable")
    assert np.array_equal(qi, np.repeat(np.arange(2500), 10))
    assert np.array_equal(np.sort(ni.reshape(2500, 10), 1), np.sort(best[:, :10], 1))
    _no_terminal(monkeypatch, "0")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        off = candidates._searched(index, xq, xs, 10, "flat")
    assert _lines(caplog) == [] and all(np.array_equal(a, b) for a, b in zip(off, got))


def test_bm25_device_logs_per_block_with_the_bits_of_scipy(monkeypatch, caplog):
    from pipeline.channels import bm25_device, lexical
    from pipeline.ops.topk import topk_sparse

    rng = np.random.default_rng(2)
    q = sp.random(2500, 40, density=0.1, format="csr", random_state=rng, dtype=np.float32)
    s = sp.random(300, 40, density=0.2, format="csr", random_state=rng, dtype=np.float32)
    monkeypatch.setattr(bm25_device, "BLOCK_QUERIES", 1000)
    _no_terminal(monkeypatch)
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        got = bm25_device.topk(q, s, 5)
    # blocks of 1,000 queries: after 1,000 (40%), 2,000 (80%) and 2,500 (the end)
    assert [m.split(",")[0] for m in _lines(caplog)] == [
        "bm25 device: 1000/2500 query (40%)",
        "bm25 device: 2000/2500 query (80%)",
        "bm25 device: 2500/2500 query (100%)",
    ]
    want = topk_sparse(lexical.score(q, s), 5)  # scipy's product, one call
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    _no_terminal(monkeypatch, "0")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        off = bm25_device.topk(q, s, 5)
    assert _lines(caplog) == [] and all(np.array_equal(a, b) for a, b in zip(off, got))
