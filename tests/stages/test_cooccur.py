"""BME's co-occurrence boost (docs/presets.md, ``bme``): index, neighbour cut and bonus computed by hand."""

import math

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from pipeline.ops import cooccur as ops
from pipeline.stages import cooccur

LN2 = math.log(2)


def test_index_batches_are_runs_of_max_per_batch_nodes_of_one_doc_in_seq_order():
    docs = np.array([1, 1, 1, 2, 2, 0, 1])
    seq = np.array([0, 2, 1, 0, 1, 0, 3])
    ok = np.array([True, True, True, True, True, False, True])
    c = ops.index(docs, seq, ok, max_per_batch=2).toarray()
    # doc 1 in seq order: 0, 2, 1, 6 → batches {0, 2}, {1, 6}; doc 2: {3, 4}; node 5 is not eligible
    expect = np.zeros((7, 7))
    for i, j in ((0, 2), (1, 6), (3, 4)):
        expect[i, j] = expect[j, i] = 1
    assert (c == expect).all()


def test_neighbours_keep_the_first_by_count_desc_then_id_asc_as_log_counts():
    counts = sp.csr_matrix(
        np.array(
            [[0, 1, 3, 1, 2], [1, 0, 0, 0, 0], [3, 0, 0, 0, 0], [1, 0, 0, 0, 0], [2, 0, 0, 0, 0]],
            float,
        )
    )
    nbr = ops.neighbours(counts, max_neighbors=2).toarray()
    assert nbr[0].tolist() == pytest.approx(
        [0, 0, math.log(4), 0, math.log(3)]
    )  # counts 3 and 2 beat the 1s
    nbr3 = ops.neighbours(counts, max_neighbors=3).toarray()
    assert nbr3[0].tolist() == pytest.approx(
        [0, LN2, math.log(4), 0, math.log(3)]
    )  # tie of 1s → node 1 (id asc)


def test_boost_sums_weight_times_log_count_times_scale_over_anchors():
    nbr = ops.neighbours(sp.csr_matrix(np.array([[0, 1, 2], [1, 0, 0], [2, 0, 0]], float)), 10)
    b = ops.boost(
        np.array([0, 0, 1]), np.array([1, 2, 0]), np.array([2.0, 0.5, 1.0]), nbr, 2, 0.1
    ).toarray()
    # query 0: anchors 1 (w 2) and 2 (w 0.5), both neighbours of 0 → 2·ln2·0.1 + 0.5·ln3·0.1
    assert b[0].tolist() == pytest.approx([2 * LN2 * 0.1 + 0.5 * math.log(3) * 0.1, 0, 0])
    # query 1: anchor 0 (w 1) → node 1: ln2·0.1, node 2: ln3·0.1
    assert b[1].tolist() == pytest.approx([0, LN2 * 0.1, math.log(3) * 0.1])


def test_stage_boost_and_merge_hand_computed():
    nodes = pl.DataFrame(
        {
            "node_id": list("abcdef"),
            "text": ["t"] * 6,
            "title": ["Alpha", "Beta", "Gamma", "Delta", "E", "Zeta"],
            "doc_id": ["s1", "s1", "s1", "s2", "s2", "s2"],
            "seq": [0, 1, 2, 0, 1, 2],
            "visibility": [None, None, ["bob"], None, None, None],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["about Alpha"]})
    exact = pl.DataFrame(
        {"query_idx": [0], "node_idx": [0], "energy": [2.0]},
        schema_overrides={"energy": pl.Float32},
    )
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0],
            "node_idx": [0, 3, 5],
            "dense_rank": [2, 1, 3],
            "dense": [0.4, 0.9, 0.0],
            "fused": [0.4, 0.9, 0.0],
            "graph": [2.0, 0.0, 0.0],
        },
        schema_overrides={"graph": pl.Float32},
    )
    p = cooccur.CooccurParams.defaults(enabled=True)
    # anchors: a (exact, 2.0); supplemental: d (dense 0.9); a is already exact; f has cosine 0 → no anchor
    # e has a one-letter title → not eligible, so it is neither indexed nor boosted
    bonus = cooccur.boost(cand, nodes, queries, exact, p)
    # a → b: 2·ln2·0.1; a → c: c is invisible without viewer bob; d → f: 0.9·ln2·0.1
    assert bonus.rows() == [(0, 1, pytest.approx(0.2 * LN2)), (0, 5, pytest.approx(0.09 * LN2))]
    out = cooccur.merge(cand, bonus)
    assert out["node_idx"].to_list() == [0, 1, 3, 5]
    b = out.row(1, named=True)  # b enters the candidates with dense 0 and fused 0
    assert (b["dense"], b["fused"], b["graph"]) == (0.0, 0.0, pytest.approx(0.2 * LN2))
    assert out.row(3, named=True)["graph"] == pytest.approx(0.09 * LN2)
    assert (
        cooccur.boost(cand, nodes.drop("doc_id"), queries, exact, p).height == 0
    )  # no batches: no-op
