"""Fusion on hand-computed cases."""

import polars as pl
import pytest

from pipeline.errors import ConfigError
from pipeline.stages.fuse import fuse


def _cand():
    # query 0: dense list n1 (r1), n2 (r2); lexical list n2 (r1), n3 (r2)
    # query 1: only dense returned anything
    return pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 1],
            "node_idx": [1, 2, 3, 4],
            "dense_rank": [1, 2, None, 1],
            "dense": [0.9, 0.8, 0.1, 0.42],
            "lexical_rank": [None, 1, 2, None],
            "lexical": [0.0, 10.0, 4.0, 0.0],
        },
        schema_overrides={"dense_rank": pl.Int32, "lexical_rank": pl.Int32},
    )


def test_weighted_rrf_hand_computed():
    out = fuse(_cand(), ["dense", "lexical"], "rrf", weights={"dense": 0.7, "lexical": 0.3}, k=60)
    f = dict(zip(out["node_idx"], out["fused"]))
    assert f[1] == pytest.approx(0.7 / 61)
    assert f[2] == pytest.approx(0.7 / 62 + 0.3 / 61)
    assert f[3] == pytest.approx(0.3 / 62)
    assert f[4] == pytest.approx(0.7 / 61)


def test_rrf_single_branch_raw_passthrough_is_a_flag():
    out = fuse(
        _cand(),
        ["dense", "lexical"],
        "rrf",
        weights={"dense": 0.7, "lexical": 0.3},
        k=60,
        single_branch_raw=True,
    )
    f = dict(zip(out["node_idx"], out["fused"]))
    assert f[4] == pytest.approx(0.42)  # query 1 had only dense hits → raw cosine (ReMe)
    assert f[2] == pytest.approx(0.7 / 62 + 0.3 / 61)  # query 0 had both → RRF


def test_wsum_with_per_query_max_norm():
    out = fuse(
        _cand(),
        ["dense", "lexical"],
        "wsum",
        weights={"dense": 0.5, "lexical": 0.5},
        norm={"dense": "none", "lexical": "max"},
    )
    f = dict(zip(out["node_idx"], out["fused"]))
    assert f[2] == pytest.approx(0.5 * 0.8 + 0.5 * 1.0)
    assert f[3] == pytest.approx(0.5 * 0.1 + 0.5 * 0.4)
    assert f[4] == pytest.approx(0.5 * 0.42)  # lexical max is 0 for query 1 → term 0


def test_wsum_minmax_and_errors():
    out = fuse(_cand(), ["dense"], "wsum", weights={"dense": 1.0}, norm="minmax")
    f = dict(zip(out["node_idx"], out["fused"]))
    assert (
        f[1] == pytest.approx(1.0)
        and f[3] == pytest.approx(0.0)
        and f[2] == pytest.approx(0.7 / 0.8)
    )
    assert f[4] == pytest.approx(1.0)  # a single candidate: max == min > 0
    with pytest.raises(ConfigError, match="choose from"):
        fuse(_cand(), ["dense"], "zigzag", weights={"dense": 1.0})
    with pytest.raises(ConfigError, match="no weight"):
        fuse(_cand(), ["dense", "lexical"], "wsum", weights={"dense": 1.0})


def test_fuse_ignores_the_other_methods_options_and_rejects_unknown_ones():
    import pytest

    from pipeline.errors import ConfigError
    from pipeline.stages.fuse import fuse

    cand = pl.DataFrame(
        {"query_idx": [0, 0], "node_idx": [1, 2], "dense": [0.9, 0.5], "dense_rank": [1, 2]}
    )
    out = fuse(
        cand, ["dense"], "rrf", weights={"dense": 1.0}, norm={"dense": "none"}
    )  # wsum's norm: ignored
    assert out["fused"].to_list() == [1 / 61, 1 / 62]
    with pytest.raises(ConfigError, match="fuse.nrom is not an option of fuse=rrf"):
        fuse(cand, ["dense"], "rrf", weights={"dense": 1.0}, nrom="max")
