"""select.spread_gap: repeated documents pushed down the ranking (hand-checked orders and properties)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contract.errors import ConfigError
from pipeline.stages.select import SelectParams, select
from pipeline.stages.spread import spread


def _ranked(docs_in_rank_order: list[int], query: int = 0) -> tuple[pl.DataFrame, np.ndarray]:
    """One query whose node i (rank i+1) belongs to document docs[i]."""
    n = len(docs_in_rank_order)
    frame = pl.DataFrame(
        {
            "query_idx": [query] * n,
            "node_idx": list(range(n)),
            "rank": pl.Series(range(1, n + 1), dtype=pl.Int32),
        }
    )
    return frame, np.array(docs_in_rank_order)


def test_gap_two_by_hand():
    # docs A A A B C (0 0 0 1 2); keys: 1, 2+2, 3+4, 4, 5 → A1, A2 (4, rank 2) before B (4, rank 4), C, A3
    r, docs = _ranked([0, 0, 0, 1, 2])
    out = spread(r, docs, 2)
    assert out["node_idx"].to_list() == [0, 1, 3, 4, 2]
    assert out["rank"].to_list() == [1, 2, 3, 4, 5]


def test_gap_three_by_hand():
    # keys: 1, 2+3, 3+6, 4, 5 → A1, B (4), A2 (5, rank 2), C (5, rank 5), A3 (9)
    r, docs = _ranked([0, 0, 0, 1, 2])
    assert spread(r, docs, 3)["node_idx"].to_list() == [0, 3, 1, 4, 2]


def test_zero_gap_is_identity_and_negative_is_an_error():
    r, docs = _ranked([0, 0, 1])
    assert spread(r, docs, 0).equals(r)
    with pytest.raises(ConfigError, match="spread_gap"):
        spread(r, docs, -1)
    with pytest.raises(ConfigError, match="doc_id"):
        spread(r, None, 1)


def test_queries_are_spread_separately():
    a, docs = _ranked([0, 0, 1], query=0)
    b = a.with_columns(query_idx=pl.lit(1, pl.Int64), node_idx=pl.col("node_idx") + 3)
    docs = np.array([0, 0, 1, 5, 6, 7])  # query 1's nodes are all in different documents: unchanged
    out = spread(pl.concat([a, b]), docs, 10)
    assert out.filter(pl.col("query_idx") == 0)["node_idx"].to_list() == [0, 2, 1]
    assert out.filter(pl.col("query_idx") == 1)["node_idx"].to_list() == [3, 4, 5]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=30), st.floats(0.5, 8.0))
def test_properties(docs_list, gap):
    r, docs = _ranked(docs_list)
    out = spread(r, docs, gap)["node_idx"].to_list()
    assert sorted(out) == list(range(len(docs_list)))  # a permutation
    for d in set(docs_list):  # a document's own units keep their order
        mine = [n for n in out if docs[n] == d]
        assert mine == sorted(mine)
    big = spread(r, docs, len(docs_list) + 1)[
        "node_idx"
    ].to_list()  # round robin: every doc's j-th before any (j+1)-th
    nth = [sum(docs[m] == docs[n] for m in big[:i]) for i, n in enumerate(big)]
    assert nth == sorted(nth)


def test_select_topk_applies_the_gap_before_the_cut():
    cand = pl.DataFrame(
        {"query_idx": [0] * 4, "node_idx": [0, 1, 2, 3], "score": [0.9, 0.8, 0.7, 0.1]}
    )
    docs = np.array([0, 0, 0, 1])
    plain = select(cand, 2, SelectParams.defaults(), doc_idx=docs)
    spread_out = select(cand, 2, SelectParams.defaults(spread_gap=5), doc_idx=docs)
    assert plain["node_idx"].to_list() == [0, 1]
    assert spread_out["node_idx"].to_list() == [0, 3]
