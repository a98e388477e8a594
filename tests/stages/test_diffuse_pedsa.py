"""The diffusion stage's PEDSA from sparse seeds (``diffuse._pedsa_hits``): the rows, order and
bits of the dense seed blocks it replaced, hubs and inhibitory edges included; and the per-query
reference (``pipeline/bme/propagate.py``'s literal ST-BME loop)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.bme.propagate import pedsa_reference
from pipeline.core import backend
from pipeline.stages import diffuse, graph, hubs

N = 40


def _case(seed: int, inhibit: bool):
    """Nodes with names (entity hubs), a chain of random edges (some inhibitory), 9 queries with
    fused candidates."""
    rng = np.random.default_rng(seed)
    names = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo"]
    texts = [" ".join(rng.choice(names, 2, replace=False)) + f" item {i}." for i in range(N)]
    nodes = pl.DataFrame({"node_id": [f"n{i:02d}" for i in range(N)], "text": texts})
    queries = pl.DataFrame(
        {"query_id": [f"q{i}" for i in range(9)], "text": names + ["x", "y", ""]}
    )
    cand = pl.DataFrame(
        {
            "query_idx": np.repeat(np.arange(9), 8),
            "node_idx": rng.choice(N, 72),
            "fused": rng.uniform(0.1, 1.0, 72),
        }
    ).unique(["query_idx", "node_idx"], maintain_order=True)
    src = rng.integers(0, N, 60)
    edges = pl.DataFrame(
        {
            "src": src,
            "dst": (src + rng.integers(1, 5, 60)) % N,
            "weight": rng.uniform(0.2, 1.0, 60),
            "inhibit": (rng.random(60) < 0.2) & inhibit,
        }
    ).with_columns(relation=pl.lit("next"))
    edges = edges.cast({k: v for k, v in graph.EDGE_SCHEMA.items() if k in edges.columns})
    return nodes, queries, cand, edges


def _dense_blocks(cand, nodes, queries, edges, p, h, qseeds):
    """PEDSA as the stage first ran it: dense (units + hubs) × queries seed blocks of
    ``p.block // size`` queries, the dense result, each column's ``keep`` largest |E| among the
    units (``diffuse._hits``), block after block."""
    rows, qs = np.arange(nodes.height), np.arange(queries.height)
    adj, inhib = graph.adjacency(edges, nodes.height, rows)
    cols = np.zeros(0, np.int64)
    if h is not None:
        adj, inhib, cols = hubs.augment(adj, inhib, h, rows)
    seeds = diffuse._seeds(cand, nodes, queries, p, None)
    size = len(rows) + len(cols)
    step = max(1, p.block // size)
    parts = []
    for b in range(0, len(qs), step):
        qb = qs[b : b + step]
        e0 = diffuse._initial_energy(seeds, qb, rows, size)
        if qseeds is not None:
            hubs.seed(e0, len(rows), qb, cols, qseeds, p.entity_seed_share)
        r, c, g = diffuse._hits(diffuse._solve(adj, inhib, e0, p)[: len(rows)], p.keep)
        parts.append(pl.DataFrame({"query_idx": qb[c], "node_idx": rows[r], "graph": g}))
    return pl.concat(parts).cast({"query_idx": pl.Int64, "node_idx": pl.Int64, "graph": pl.Float32})


@pytest.mark.parametrize("keep", [0, 4])
@pytest.mark.parametrize("with_hubs", [False, True])
@pytest.mark.parametrize("sparse_block", [2048, 2])
def test_sparse_seeds_equal_the_dense_seed_blocks(monkeypatch, keep, with_hubs, sparse_block):
    """Same rows, same order, same bits; several dense blocks (``block`` holds 3 queries) and,
    with ``PEDSA_QUERIES`` = 2, several sparse solves whose blocks cross theirs."""
    monkeypatch.setattr(diffuse, "PEDSA_QUERIES", sparse_block)
    nodes, queries, cand, edges = _case(5, inhibit=True)
    h = qseeds = None
    share = 0.0
    if with_hubs:
        h = hubs.build(nodes, hubs.HubParams.defaults(entities=True, max_df=0.5, numbers=False))
        qseeds = hubs.query_seeds(queries, h, hubs.HubParams.defaults(entities=True, numbers=False))
        share = 0.4
    size = N + (
        0
        if h is None
        else len(hubs.augment(*graph.adjacency(edges, N, np.arange(N)), h, np.arange(N))[2])
    )
    p = diffuse.DiffusionParams.defaults(
        method="pedsa", seed_k=5, keep=keep, top_k=6, entity_seed_share=share, block=3 * size
    )
    got = diffuse.run(cand, nodes, queries, edges, p, hubs=h, hub_seeds=qseeds)
    want = _dense_blocks(cand, nodes, queries, edges, p, h, qseeds)
    assert got.height > 20
    assert got.equals(want)


def test_sparse_seeds_match_the_per_query_reference():
    """Without hubs or a cut, each query's graph energies are ST-BME's literal loop's
    (``reference.pedsa_reference``) on the same edges and seeds, to float32 rounding."""
    nodes, queries, cand, edges = _case(9, inhibit=True)
    p = diffuse.DiffusionParams.defaults(method="pedsa", seed_k=5, keep=0, top_k=100)
    got = diffuse.run(cand, nodes, queries, edges, p)
    seeds = diffuse._seeds(cand, nodes, queries, p, None)
    e = edges.to_dicts()
    normal = [(d["src"], d["dst"], d["weight"]) for d in e if not d["inhibit"]]
    inhib = [(d["src"], d["dst"], d["weight"]) for d in e if d["inhibit"]]
    for q in range(queries.height):
        s = seeds.filter(pl.col("query_idx") == q)
        ref = pedsa_reference(N, normal, inhib, dict(zip(s["node_idx"], s["energy"])))
        mine = got.filter(pl.col("query_idx") == q)
        want = np.flatnonzero(ref > 0)
        assert mine["node_idx"].to_list() == want.tolist()
        np.testing.assert_allclose(mine["graph"].to_numpy(), ref[want], rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_sparse_hits_on_device_match_host():
    """``_sparse_hits`` cuts each column's ``keep`` largest |E| where the energies live: on CuPy
    the numpy path's (row, column, energy) exactly, ties at the cut to the lower row."""
    import cupy
    import cupyx.scipy.sparse as cusp
    import scipy.sparse as sp

    rng = np.random.default_rng(11)
    out = rng.uniform(-1, 1, (3000, 40)).astype(np.float32)
    out[rng.random(out.shape) < 0.7] = 0.0
    out[100:140, 5] = 0.5  # a tie across the cut of column 5
    host_m = sp.csc_matrix(out)
    for keep in (0, 7, 500):
        host = diffuse._sparse_hits(host_m, 2900, keep)
        dev = diffuse._sparse_hits(cusp.csc_matrix(cupy.asarray(out)), 2900, keep)
        for a, b in zip(host, dev):
            np.testing.assert_array_equal(a, b)


def test_sparse_hits_equal_the_dense_cut():
    """``_sparse_hits`` of a sparse result is ``_hits`` of the same dense one (negative energies
    taking places in the cut, ties at the cut, rows past the units left out)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(4)
    out = rng.uniform(-1, 1, (300, 12)).astype(np.float32)
    out[rng.random(out.shape) < 0.5] = 0.0
    out[10:30, 3] = 0.25
    for keep in (0, 5, 400):
        r, c, g = diffuse._sparse_hits(sp.csc_matrix(out), 280, keep)
        order = np.lexsort((c, r))
        want = diffuse._hits(out[:280], keep)
        for a, b in zip((r[order], c[order], g[order]), want):
            np.testing.assert_array_equal(a, b)
