"""``ops.scoring``: the final score against the polars expression it replaced (bits), the head cut
against a per-query reference, and the score stage's device branch (score left out of the frame,
the head cut from the array) against the host branch."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ops import scoring
from pipeline.stages import score as score_stage
from pipeline.stages import select as select_stage
from pipeline.stages.select import SelectParams


def bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float64).view(np.int64)


def test_tree_sum_by_hand():
    """Three terms add as a + (b + c): 1 + (1e16 − 1e16) = 1, where (1 + 1e16) − 1e16 = 0; four
    as (a + b) + (c + d)."""
    a, b, c = np.array([1.0]), np.array([1e16]), np.array([-1e16])
    assert scoring.tree_sum([a, b, c]).tolist() == [1.0]
    assert ((a + b) + c).tolist() == [0.0]
    assert scoring.tree_sum([b, a, c, a]).tolist() == [(1e16 + 1.0) + (-1e16 + 1.0)]


def test_combine_by_hand():
    """(2·0.5 + 1·0.25) · (1 / 3) · 2 = 0.8333…; a null factor makes the row's score null."""
    x, y = np.array([0.5, 1.0]), np.array([0.25, 0.0])
    f, ok = np.array([2.0, 3.0]), np.array([True, False])
    score, valid = scoring.combine([(2.0, x), (1.0, y)], 3.0, [(f, ok)])
    assert score[0] == (2.0 * 0.5 + 0.25) * (1.0 / 3.0) * 2.0
    assert valid.tolist() == [True, False]


@pytest.mark.parametrize("n_terms", range(1, 9))
@pytest.mark.parametrize("normalize", [False, True])
def test_combine_gives_the_bits_of_the_polars_expression(n_terms, normalize, monkeypatch):
    """The score of ``stages.score`` before this module: ``pl.sum_horizontal`` of the weighted
    terms (nulls as 0), ``/ Σw`` when normalised, × each factor — by polars, bit for bit, over
    rows of every magnitude, in blocks of 7 rows (any block gives the same bits)."""
    monkeypatch.setattr(scoring, "COMBINE_ROWS", 7)
    rng = np.random.default_rng(n_terms)
    n = 500
    cols = {f"t{i}": rng.standard_normal(n) * 10.0 ** rng.uniform(-8, 8, n) for i in range(8)}
    df = pl.DataFrame(cols).with_columns(
        t1=pl.when(pl.col("t0") > 0).then(pl.col("t1")),  # nulls in a term
        f32=pl.Series(rng.uniform(0.5, 2.0, n), dtype=pl.Float32),
        fint=pl.Series(rng.integers(1, 4, n)),
    )
    weights = rng.uniform(0.1, 100.0, n_terms).tolist()
    names = [f"t{i}" for i in range(n_terms)]
    total = sum(weights)
    expr = pl.sum_horizontal(
        [w * pl.col(c).fill_null(0.0).cast(pl.Float64) for w, c in zip(weights, names)]
    )
    if normalize:
        expr = expr / total
    want = df.select(expr * pl.col("f32") * pl.col("fint")).to_series().to_numpy()
    terms = [(w, df[c].fill_null(0.0).cast(pl.Float64).to_numpy()) for w, c in zip(weights, names)]
    factors = [(df[f].cast(pl.Float64).to_numpy(), None) for f in ("f32", "fint")]
    got, valid = scoring.combine(terms, total if normalize else None, factors)
    assert valid is None
    assert (bits(got) == bits(want)).all()


def reference_head(query: np.ndarray, score: np.ndarray, depth: int) -> list[int]:
    """Per query: its rows whose score is at least its depth-th largest (all when fewer)."""
    keep = []
    for q in np.unique(query):
        rows = np.flatnonzero(query == q)
        s = np.sort(score[rows])[::-1]
        cut = s[depth - 1] if len(rows) > depth else -np.inf
        keep += rows[score[rows] >= cut].tolist()
    return sorted(keep)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=12),
    depth=st.integers(1, 35),
    cells=st.sampled_from([1, 5, 40, 1 << 18]),
    grouped=st.booleans(),
    levels=st.integers(1, 6),
    seed=st.integers(0, 1000),
)
def test_head_equals_the_per_query_reference(sizes, depth, cells, grouped, levels, seed):
    """Queries with gaps in their ids, 0 to 30 rows each, rows in query order or shuffled, coarse
    scores (ties at every cut) with ±inf, depth below and past the widest query, blocks of 1 cell
    (every query alone) to one block."""
    rng = np.random.default_rng(seed)
    query = np.repeat(np.arange(len(sizes)) * 3 + 2, sizes).astype(np.int64)
    if not query.size:
        return
    score = rng.integers(0, levels, len(query)).astype(np.float64) / 2
    score[rng.random(len(query)) < 0.05] = -np.inf
    score[rng.random(len(query)) < 0.05] = np.inf
    if not grouped:
        perm = rng.permutation(len(query))
        query, score = query[perm], score[perm]
    got = scoring.head(query, score, depth, cells)
    assert got.tolist() == reference_head(query, score, depth)


def test_head_by_hand():
    """Depth 2: query 0 keeps 0.9 and both 0.5s; query 1 its one row; integer scores alike; a
    NaN gives None (no order to cut by); no rows, no indices."""
    q = np.array([0, 0, 0, 0, 1])
    assert scoring.head(q, np.array([0.5, 0.9, 0.1, 0.5, 0.2]), 2).tolist() == [0, 1, 3, 4]
    assert scoring.head(q, np.array([5, 9, 1, 5, 2]), 2).tolist() == [0, 1, 3, 4]
    assert scoring.head(q, np.array([0.5, np.nan, 0.1, 0.5, 0.2]), 2) is None
    assert scoring.head(q[:0], np.zeros(0), 2).tolist() == []


def _cand(rng, n_q=30, n_nodes=200) -> pl.DataFrame:
    rows = [
        (q, int(i)) for q in range(n_q) for i in rng.choice(n_nodes, rng.integers(1, 80), False)
    ]
    cand = pl.DataFrame(rows, schema=["query_idx", "node_idx"], orient="row")
    n = cand.height
    return cand.with_columns(
        fused=pl.Series(rng.integers(0, 8, n) / 8.0),
        graph=pl.Series(rng.integers(0, 3, n) / 100.0),
    ).sample(fraction=1.0, shuffle=True, seed=1)


@pytest.mark.parametrize("method", ["topk", "dpp"])
def test_the_device_branch_gives_the_host_rows(method, monkeypatch):
    """``select.scored_rows`` (the score kept as an array, the head cut from it, only its rows
    given their score) gives the frame the host branch's ``_head`` gives, and the same selection,
    in head blocks of 40 cells."""
    rng = np.random.default_rng(5)
    cand = _cand(rng)
    terms = {"fused": 1.0, "graph": 100.0}
    frame, scored = score_stage.scores(cand, terms, [], False)
    host = frame.with_columns(scored.column())
    p = SelectParams.defaults(method=method, target=4 if method == "dpp" else None)
    xb = rng.normal(size=(200, 8)).astype(np.float32)
    monkeypatch.setattr(scoring, "HEAD_CELLS", 40)
    for k in (1, 3, 10, 90):
        dev = select_stage.scored_rows(frame, scored, k, p)
        assert dev.height < host.height or k == 90
        assert dev.equals(select_stage._head(host, k, p))
        assert select_stage.select(dev, k, p, xb).equals(select_stage.select(host, k, p, xb))


def test_a_null_score_keeps_every_row():
    """A null factor: the score column has its null, and no head is cut (as on the host)."""
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0],
            "node_idx": [1, 2, 3],
            "fused": [0.3, 0.2, 0.1],
            "w": [1.0, None, 2],
        }
    )
    frame, scored = score_stage.scores(cand, {"fused": 1.0}, ["w"], False)
    out = select_stage.scored_rows(frame, scored, 1, SelectParams.defaults())
    assert out["score"].to_list() == [0.3, None, 0.2]
