"""Residual-novelty stage: basis choice, skip reasons, gates and residual hits outside the basis."""

import numpy as np
import polars as pl
import pytest

from pipeline.stages.novelty import NoveltyParams, run


def _setup():
    rng = np.random.default_rng(0)
    n, d = 12, 16
    xb = rng.normal(size=(n, d)).astype(np.float32)
    xb /= np.linalg.norm(xb, axis=1, keepdims=True)
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(n)],
            "text": ["t"] * n,
            "title": [f"T{i}" if i != 3 else None for i in range(n)],
            "type": ["event" if i == 4 else "fact" for i in range(n)],
            "visibility": [["ann"] if i == 11 else None for i in range(n)],
        }
    )
    # q0: query = mix of n0, n1 plus a component along n9 → the residual points at n9
    xq = np.stack([xb[0] + xb[1] + 0.9 * xb[9], xb[2]]).astype(np.float32)
    queries = pl.DataFrame({"query_id": ["q0", "q1"], "text": ["a", "b"]})
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 0, 0, 1],
            "node_idx": [0, 1, 3, 4, 2, 2],
            "dense_rank": [1, 2, 3, 4, 5, 1],
        },
        schema_overrides={"dense_rank": pl.Int32},
    )
    return nodes, queries, xb, xq, cand


def test_basis_is_eligible_dense_hits_and_hits_leave_the_basis():
    nodes, queries, xb, xq, cand = _setup()
    table, hits = run(
        cand, nodes, queries, xb, xq, NoveltyParams.defaults(residual_top_k=3, mode="abs")
    )
    t = table.row(0, named=True)
    assert t["basis_size"] == 3  # n3 has no title, n4 is an event: basis = n0, n1, n2
    assert t["novelty_gate"] and t["residual_gate"] and t["skip_reason"] is None
    q0 = hits.filter(pl.col("query_idx") == 0)
    assert not set(q0["node_idx"]) & {0, 1, 2}
    assert q0.sort("residual", descending=True)["node_idx"][0] == 9
    assert 11 not in set(hits["node_idx"])  # invisible to a query without viewer
    assert table.row(1, named=True)["skip_reason"] == "basis_too_small"  # one eligible hit only


def test_gates_follow_thresholds():
    nodes, queries, xb, xq, cand = _setup()
    table, hits = run(cand, nodes, queries, xb, xq, NoveltyParams.defaults(residual_threshold=10.0))
    assert (
        table.row(0, named=True)["skip_reason"] == "residual_below_threshold" and hits.height == 0
    )
    table, hits = run(cand, nodes, queries, xb, xq, NoveltyParams.defaults(novelty_threshold=10.0))
    assert table.row(0, named=True)["skip_reason"] == "novelty_below_threshold" and hits.height == 0


def _gate_problems(seed: int, nq: int = 24, n: int = 200, d: int = 64):
    rng = np.random.default_rng(seed)
    xb = rng.standard_normal((n, d)).astype(np.float32)
    xq = rng.standard_normal((nq, d)).astype(np.float32)
    m = rng.integers(0, 25, nq)  # basis sizes from skipped (< basis_min) up to basis_max
    basis = {q: list(rng.choice(n, m[q], replace=False)) for q in range(nq)}
    return xb, xq, m, basis


def _gates_in(order, batch, xb, xq, m, basis):
    """_gates on the queries in ``order`` with ``novelty.batch=batch``, rows put back in query order."""
    from pipeline.stages.novelty import _gates

    inv = np.argsort(order)
    p = NoveltyParams.defaults("bme", batch=batch)
    got, r = _gates(xb, xq[order], m[order], {i: basis[q] for i, q in enumerate(order)}, p, "cpu")
    return {k: v[inv] for k, v in got.items()}, r[inv]


@pytest.mark.parametrize("seed", [0, 1])
def test_gate_bits_do_not_depend_on_the_batch_or_its_order(seed):
    # Each query alone (a batch of one) is the reference; batches of 2/5/7/all and a shuffled order
    # must give the same float bits for every query (issue 26: one answer whatever the batch).
    xb, xq, m, basis = _gate_problems(seed)
    nq = len(m)
    alone = [_gates_in(np.array([0]), 1, xb, xq[[q]], m[[q]], {0: basis[q]}) for q in range(nq)]
    ref_stats = {k: np.concatenate([a[0][k] for a in alone]) for k in alone[0][0]}
    ref_r = np.concatenate([a[1] for a in alone])
    rng = np.random.default_rng(seed + 100)
    for batch, order in [
        (2, None),
        (5, None),
        (7, None),
        (2048, None),
        (2048, "shuffled"),
        (5, "shuffled"),
    ]:
        o = rng.permutation(nq) if order else np.arange(nq)
        got, r = _gates_in(o, batch, xb, xq, m, basis)
        for k, v in ref_stats.items():
            assert np.array_equal(got[k].view(np.int64), v.view(np.int64)), (batch, order, k)
        assert np.array_equal(r.view(np.int32), ref_r.view(np.int32)), (batch, order, "residual")
