"""Residual-novelty stage: basis choice, skip reasons, gates and residual hits outside the basis."""

import numpy as np
import polars as pl

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
