"""Fusion on hand-computed cases."""

import numpy as np
import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
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

    from pipeline.contract.errors import ConfigError
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


def test_join_pairs_is_the_two_key_full_join():
    from pipeline.stages.fuse import _join_pairs

    cand = pl.DataFrame(
        {"query_idx": [0, 0, 1, 3], "node_idx": [5, 7, 5, 2**31 - 1], "dense": [0.9, 0.8, 0.7, 0.6]}
    )
    hits = pl.DataFrame({"query_idx": [0, 1, 2], "node_idx": [7, 6, 5], "graph": [0.1, 0.2, 0.3]})
    on = ["query_idx", "node_idx"]
    want = cand.join(hits, on=on, how="full", coalesce=True).sort(on)
    got = _join_pairs(cand, hits)
    assert got.columns == ["query_idx", "node_idx", "dense", "graph"]
    assert got.sort(on).equals(want)
    # (0, 7) met in both; (0, 5), (1, 5), (3, 2**31 - 1) only candidates; (1, 6), (2, 5) only hits
    assert got.height == 6
    big = cand.with_columns(pl.col("node_idx") + 1)  # 2**31 does not fit: the two-key join
    assert (
        _join_pairs(big, hits)
        .sort(on)
        .equals(big.join(hits, on=on, how="full", coalesce=True).sort(on))
    )


@pytest.mark.parametrize("seed", range(6))
def test_join_pairs_merge_equals_polars_full_join_on_random_frames(seed):
    """The binary-search join (sorted or shuffled candidates), and its fallback when a pair repeats
    within a frame, give polars' two-key full join row for row (as sets of rows)."""
    from pipeline.stages.fuse import _join_pairs

    rng = np.random.default_rng(seed)
    on = ["query_idx", "node_idx"]

    def frame(n, col, dup):
        q, d = rng.integers(0, 30, n), rng.integers(0, 40, n)
        f = pl.DataFrame({"query_idx": q, "node_idx": d, col: rng.random(n).astype(np.float32)})
        f = f if dup else f.unique(on, keep="first", maintain_order=True)
        return f.with_columns(pl.col(col).cast(pl.Float32))

    cand = frame(300, "dense", dup=seed == 4)
    cand = cand.sort(on) if seed % 2 else cand.sample(fraction=1.0, shuffle=True, seed=seed)
    hits = frame(400, "graph", dup=seed == 5)
    hits = hits.with_columns(pl.when(pl.col("graph") > 0.9).then(None).otherwise(pl.col("graph")))
    want = cand.join(hits, on=on, how="full", coalesce=True)
    got = _join_pairs(cand, hits)
    assert got.columns == want.columns and got.schema == want.schema
    assert got.height == want.height
    assert got.sort(on + ["dense", "graph"], nulls_last=True).equals(
        want.sort(on + ["dense", "graph"], nulls_last=True)
    )


@pytest.mark.parametrize("block", [1, 2, 5, 1024])
def test_join_component_in_query_blocks_equals_one_join(block, monkeypatch):
    """``join_component`` per block of 1, 2, 5 and 1,024 queries gives the rows of one join, fused
    with per-query max normalisation (each block holds whole queries): graph-only nodes get their
    cosine, a query with hits but no candidates and candidates without hits included."""
    from types import SimpleNamespace

    from pipeline.stages import fuse as fuse_mod

    rng = np.random.default_rng(block)
    xb = rng.normal(size=(50, 8)).astype(np.float32)
    xq = rng.normal(size=(12, 8)).astype(np.float32)
    rows = [(q, int(n)) for q in range(10) for n in rng.choice(50, 6, replace=False)]
    cand = pl.DataFrame(rows, schema=["query_idx", "node_idx"], orient="row").sort(
        ["query_idx", "node_idx"]
    )
    cand = cand.with_columns(
        dense=pl.Series(rng.random(cand.height), dtype=pl.Float32),
        dense_rank=pl.lit(1, pl.Int32),
        lexical=pl.Series(rng.random(cand.height), dtype=pl.Float32),
        lexical_rank=pl.lit(1, pl.Int32),
    )
    fusion = {"method": "wsum", "weights": {"dense": 0.6, "lexical": 0.4}}
    cand = fuse(cand, ["dense", "lexical"], "wsum", weights=fusion["weights"])
    hits = pl.DataFrame(
        {
            "query_idx": rng.integers(2, 12, 80),  # queries 10, 11: hits, no candidates
            "node_idx": rng.integers(0, 50, 80),
        }
    ).unique(["query_idx", "node_idx"], keep="first", maintain_order=True)
    hits = hits.with_columns(graph=pl.Series(rng.random(hits.height), dtype=pl.Float32))
    ctx = SimpleNamespace(
        cand=cand,
        run=SimpleNamespace(device="cpu"),
        fusion=fuse_mod.FuseParams(
            "wsum", {"weights": fusion["weights"]}, ("dense", "lexical"), False, False, "flat"
        ),
        vectors=(xq, np.arange(12), np.ones(12)),
        xb=xb,
        xb_resident=None,
    )
    on = ["query_idx", "node_idx"]
    monkeypatch.setattr(fuse_mod, "JOIN_QUERIES", 1 << 30)
    want = fuse_mod.join_component(ctx, hits, "graph").sort(on)
    monkeypatch.setattr(fuse_mod, "JOIN_QUERIES", block)
    got = fuse_mod.join_component(ctx, hits, "graph").sort(on)
    assert got.equals(want) and got.height > cand.height
    assert want.filter(pl.col("query_idx") >= 10)["dense"].null_count() == 0
