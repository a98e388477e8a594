"""Snake Merge (fuse=snake) on a hand-written three-backend case."""

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.stages.fuse import fuse

# query 0 — a: n1 n2 n3 · b: n2 n4 n5 · c: n6 n1 n7; query 1 — only b: n9
RANKS = {
    1: (1, None, 2),
    2: (2, 1, None),
    3: (3, None, None),
    4: (None, 2, None),
    5: (None, 3, None),
    6: (None, None, 1),
    7: (None, None, 3),
}


def _cand():
    rows = [(0, n, *r) for n, r in RANKS.items()] + [(1, 9, None, 1, None)]
    df = pl.DataFrame(
        rows, schema=["query_idx", "node_idx", "a_rank", "b_rank", "c_rank"], orient="row"
    )
    return df.with_columns(pl.col("^.*_rank$").cast(pl.Int32), a=0.0, b=0.0, c=0.0)


def _order(out, q=0):
    return out.filter(pl.col("query_idx") == q).sort("fused", descending=True)["node_idx"].to_list()


def test_snake_order_and_dedupe():
    # round 1 a b c: n1 n2 n6; round 2 c b a: n1 (dup) n4 n2 (dup); round 3 a b c: n3 n5 n7
    out = fuse(_cand(), ["a", "b", "c"], "snake", top_n=3)
    assert _order(out) == [1, 2, 6, 4, 3, 5, 7]
    f = dict(zip(out.filter(pl.col("query_idx") == 0)["node_idx"], out["fused"]))
    assert f[4] == pytest.approx(1 / (1 + 4))  # place 4 of a1 b1 c1 c2 b2 …
    assert _order(out, 1) == [9]


def test_snake_top_n_and_order():
    assert _order(fuse(_cand(), ["a", "b", "c"], "snake", top_n=2)) == [1, 2, 6, 4]
    # backends' order c, b, a: c1 b1 a1 | a2 b2 c2 | …
    out = fuse(_cand(), ["a", "b", "c"], "snake", top_n=3, order=["c", "b", "a"])
    assert _order(out) == [6, 2, 1, 4, 7, 5, 3]


def test_snake_order_must_name_enabled_channels():
    with pytest.raises(ConfigError, match="fuse.order"):
        fuse(_cand(), ["a", "b"], "snake", order=["a", "c"])
