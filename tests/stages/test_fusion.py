"""``ops.fusion`` (via ``stages.fuse``) against the polars expressions it replaced, bit for bit:
``wsum`` with each normalisation and a per-query channel scale, ``rrf`` with ReMe's single-branch
quirk, ``snake`` in both backend orders. The reference below is the old code, kept here (with one
change for all-NaN queries, ``_norm``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.stages.fuse import fuse


def _norm(col: str, how: str) -> pl.Expr:
    """The old ``_norm``, but for one thing: polars orders NaN above every number, so for a query
    whose values are all NaN its maximum (NaN) compared ``> 0`` and every row fused to NaN; IEEE
    comparisons (``ops.fusion``) make no comparison with NaN hold, so they fuse to 0 there. The
    reference says ``mx.is_not_nan() & …`` to mean the same."""
    x = pl.col(col).fill_null(0.0).cast(pl.Float64)
    if how == "none":
        return x
    mx = x.max().over("query_idx")
    pos = mx.is_not_nan() & (mx > 0)
    if how == "max":
        return pl.when(pos).then(x / mx).otherwise(0.0)
    mn = x.min().over("query_idx")
    return (
        pl.when(mx.is_not_nan() & (mx > mn))
        .then((x - mn) / (mx - mn))
        .otherwise(pl.when(pos).then(1.0).otherwise(0.0))
    )


def _scaled(w: dict, scale: dict) -> dict:
    return {
        c: pl.lit(v) * pl.lit(pl.Series(scale[c], dtype=pl.Float64)).gather(pl.col("query_idx"))
        if c in scale
        else pl.lit(v)
        for c, v in w.items()
    }


def ref_wsum(cand, channels, weights, norm, scale):
    w = _scaled({c: float(weights[c]) for c in channels}, scale)
    return cand.with_columns(fused=pl.sum_horizontal([w[c] * _norm(c, norm[c]) for c in channels]))


def ref_rrf(cand, channels, weights, k, raw, scale):
    w = _scaled({c: float(weights[c]) for c in channels}, scale)
    terms = [w[c] / (k + pl.col(f"{c}_rank").cast(pl.Float64)) for c in channels]
    out = cand.with_columns(fused=pl.sum_horizontal([t.fill_null(0.0) for t in terms]))
    if raw:
        lists = {c: pl.col(f"{c}_rank").is_not_null().any().over("query_idx") for c in channels}
        expr = pl.col("fused")
        for c in channels:
            others = [lists[o] for o in channels if o != c]
            only = lists[c] & ~pl.any_horizontal(others) if others else lists[c]
            expr = pl.when(only).then(pl.col(c).cast(pl.Float64)).otherwise(expr)
        out = out.with_columns(fused=expr)
    return out


def ref_snake(cand, seq, top_n):
    n, places = len(seq), []
    for pos, c in enumerate(seq):
        rnd = pl.col(f"{c}_rank").cast(pl.Int64) - 1
        slot = pl.when(rnd % 2 == 0).then(pl.lit(pos)).otherwise(pl.lit(n - 1 - pos))
        places.append(pl.when(rnd < top_n).then(rnd * n + slot))
    return (
        cand.with_columns(_place=pl.min_horizontal(places))
        .filter(pl.col("_place").is_not_null())
        .with_columns(fused=1.0 / (1.0 + pl.col("_place").cast(pl.Float64)))
        .drop("_place")
    )


CHANNELS = ["dense", "lexical", "collab"]


def candidates(seed: int, n_q: int = 40) -> pl.DataFrame:
    """Rows in no order; per channel a value (float32 or float64, nulls, NaNs, zeros, negatives, a
    query whose values are all equal, one whose values are all NaN) and a rank (null where the channel did not list the node); some
    queries ranked by one channel only; query indices with gaps."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(0, 2 * n_q, 2):
        only = rng.integers(0, 4)  # 3: all channels, else only that one lists this query's nodes
        for node in rng.choice(500, rng.integers(1, 40), replace=False):
            rows.append((q, int(node), int(only)))
    cand = pl.DataFrame(rows, schema=["query_idx", "node_idx", "only"], orient="row")
    n = cand.height
    out = {}
    for i, c in enumerate(CHANNELS):
        listed = (cand["only"].to_numpy() == 3) | (cand["only"].to_numpy() == i)
        listed &= rng.random(n) < 0.8
        rank = np.where(listed, rng.integers(1, 30, n), 0)
        value = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)
        value[cand["query_idx"].to_numpy() == 6] = 0.25  # one query: every value the same
        has_value = listed | (rng.random(n) < 0.3)  # a value without a rank: a join's cosine
        out[c] = pl.Series(np.where(has_value, value, np.nan)).fill_nan(None)
        out[f"{c}_rank"] = pl.Series(rank).replace(0, None)
    cand = cand.with_columns(**out).with_columns(pl.col("dense").cast(pl.Float32)).drop("only")
    q = pl.col("query_idx")
    nan = pl.lit(float("nan"))
    cand = cand.with_columns(  # NaN values (not nulls): a few rows, and every row of query 8
        lexical=pl.when((q == 8) | (pl.col("node_idx") % 97 == 0)).then(nan).otherwise("lexical"),
        collab=pl.when(pl.col("node_idx") % 89 == 0).then(nan).otherwise("collab"),
    )
    return cand.sample(fraction=1.0, shuffle=True, seed=seed)


def scale(n_q: int, seed: int) -> dict:
    return {"dense": np.random.default_rng(seed).uniform(0.2, 1.0, 2 * n_q)}


def same(got: pl.DataFrame, want: pl.DataFrame) -> bool:
    a, b = got["fused"].to_numpy(), want["fused"].to_numpy()
    ok = got["fused"].is_null().to_numpy() == want["fused"].is_null().to_numpy()
    return bool(ok.all()) and bool((a.view(np.int64) == b.view(np.int64)).all())


WEIGHTS = {"dense": 0.6, "lexical": 0.3, "collab": 0.45}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("how", ["max", "minmax", "none", "mixed"])
@pytest.mark.parametrize("scaled", [False, True])
def test_wsum_gives_the_bits_of_the_polars_expression(seed, how, scaled):
    cand = candidates(seed)
    norm = {"dense": "none", "lexical": "max", "collab": "minmax"} if how == "mixed" else how
    norms = norm if isinstance(norm, dict) else {c: norm for c in CHANNELS}
    sc = scale(40, seed) if scaled else {}
    got = fuse(cand, CHANNELS, "wsum", weights=WEIGHTS, norm=norm, channel_scale=sc or None)
    want = ref_wsum(cand, CHANNELS, WEIGHTS, norms, sc)
    assert got.drop("fused").equals(cand) and same(got, want)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("channels", [CHANNELS, ["lexical"], ["dense", "lexical"]])
def test_rrf_gives_the_bits_of_the_polars_expression(seed, raw, channels):
    cand = candidates(seed)
    sc = scale(40, seed) if seed % 2 and "dense" in channels else {}
    got = fuse(cand, channels, "rrf", weights=WEIGHTS, k=60, single_branch_raw=raw,
               channel_scale=sc or None)  # fmt: skip
    want = ref_rrf(cand, channels, WEIGHTS, 60, raw, sc)
    assert same(got, want)
    if raw:  # the quirk was taken: some queries' rows have raw values, some of them null
        assert got["fused"].null_count() > 0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("order", [None, ["collab", "dense", "lexical"]])
@pytest.mark.parametrize("top_n", [1, 5, 40])
def test_snake_gives_the_rows_and_bits_of_the_polars_expression(seed, order, top_n):
    cand = candidates(seed)
    got = fuse(cand, CHANNELS, "snake", top_n=top_n, order=order)
    want = ref_snake(cand, order or CHANNELS, top_n)
    assert got.drop("fused").equals(want.drop("fused")) and same(got, want)
    assert got.height < cand.height


def test_wsum_by_hand():
    """Two rows of one query: dense 0.5, 1.0 → max-normalised 0.5, 1.0; lexical 2, null →
    1.0, 0.0; fused = 0.6·dense + 0.4·lexical = 0.7, 0.6."""
    cand = pl.DataFrame(
        {"query_idx": [0, 0], "node_idx": [1, 2], "dense": [0.5, 1.0], "lexical": [2.0, None]}
    )
    got = fuse(cand, ["dense", "lexical"], "wsum", weights={"dense": 0.6, "lexical": 0.4})
    assert got["fused"].to_list() == [0.6 * 0.5 + 0.4 * 1.0, 0.6 * 1.0 + 0.0]


def test_a_query_whose_values_are_all_nan_fuses_them_to_zero():
    """Query 8's lexical values are all NaN: its max-normalised lexical is 0 (no comparison with
    NaN holds), so its fused values are the dense part alone."""
    cand = candidates(0)
    got = fuse(cand, ["dense", "lexical"], "wsum", weights=WEIGHTS).filter(pl.col("query_idx") == 8)
    dense = fuse(cand, ["dense"], "wsum", weights=WEIGHTS).filter(pl.col("query_idx") == 8)
    assert got.height and same(got, dense)


def test_empty_candidates_get_an_empty_fused_column():
    cand = candidates(0).head(0)
    for method, kw in (
        ("wsum", {"weights": WEIGHTS}),
        ("rrf", {"weights": WEIGHTS}),
        ("snake", {}),
    ):
        got = fuse(cand, CHANNELS, method, **kw)
        assert got.height == 0 and got.schema["fused"] == pl.Float64
