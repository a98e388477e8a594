"""Bootstrap intervals over queries: hand-checkable cases, the normal approximation, scipy parity."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from pipeline.contract.errors import DataError
from pipeline.report.bootstrap import bootstrap_ci, bootstrap_means, metric_cis
from tests.helpers.paths import REPO


def test_constant_values_give_a_zero_width_interval():
    ci = bootstrap_ci([0.4] * 25)
    assert (ci.mean, ci.low, ci.high, ci.n) == pytest.approx((0.4, 0.4, 0.4, 25))


def test_two_queries_span_zero_to_one():
    # resample means of [0, 1] are 0 (p 1/4), 0.5 (p 1/2), 1 (p 1/4): the 2.5% / 97.5% points are 0 and 1
    ci = bootstrap_ci([0.0, 1.0])
    assert (ci.mean, ci.low, ci.high) == (0.5, 0.0, 1.0)


def test_binary_values_match_the_normal_approximation():
    # 400 queries, half hit: the mean's standard error is sqrt(.25 / 400) = 0.025 → 95% ≈ 0.5 ± 0.049
    values = np.array([0.0, 1.0] * 200)
    ci = bootstrap_ci(values, n_resamples=4000)
    assert ci.mean == 0.5
    assert ci.low == pytest.approx(0.5 - 1.96 * 0.025, abs=0.008)
    assert ci.high == pytest.approx(0.5 + 1.96 * 0.025, abs=0.008)


def test_matches_scipy_percentile_bootstrap():
    values = np.random.default_rng(0).beta(2, 5, size=60)
    ours = bootstrap_ci(values, n_resamples=5000)
    ref = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=5000,
        method="percentile",
        confidence_level=0.95,
        random_state=1,
    ).confidence_interval
    se = values.std() / np.sqrt(len(values))
    assert ours.low == pytest.approx(ref.low, abs=0.15 * se)
    assert ours.high == pytest.approx(ref.high, abs=0.15 * se)


def test_same_seed_same_interval_and_paired_columns():
    values = np.random.default_rng(1).random((30, 2))
    a, b = bootstrap_means(values, 300), bootstrap_means(values, 300)
    assert np.array_equal(a, b)
    # two identical columns are resampled with the same rows: identical means in every resample
    twin = bootstrap_means(np.column_stack([values[:, 0], values[:, 0]]), 300)
    assert np.array_equal(twin[:, 0], twin[:, 1])


def test_metric_cis_by_group():
    pq = pl.DataFrame(
        {
            "query_id": list("abcdef"),
            "group": ["1", "1", "1", "2", "2", None],
            "recall@5": [1.0, 1.0, 1.0, 0.0, 1.0, 0.25],
        }
    )
    out = metric_cis(pq, ["recall@5"], by="group")
    assert out["group"].to_list() == ["1", "2", "none"]
    assert out["n"].to_list() == [3, 2, 1]
    assert out["mean"].to_list() == [1.0, 0.5, 0.25]
    assert out.row(0, named=True)["low"] == 1.0 and out.row(1, named=True)["low"] == 0.0


def test_missing_metric_and_empty_input_are_clear_errors():
    with pytest.raises(DataError, match="recall@7"):
        metric_cis(pl.DataFrame({"query_id": ["a"], "recall@5": [1.0]}), ["recall@7"])
    with pytest.raises(DataError, match="no queries"):
        bootstrap_ci([])


def _load_script(name: str):
    import importlib.util

    path = REPO / "scripts" / f"{name}.py"  # name: "lodo", "bench/x"
    spec = importlib.util.spec_from_file_location(f"scripts_{name.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_run(root, name: str, per_query: pl.DataFrame):
    import json

    run = root / name
    run.mkdir()
    (run / "manifest.json").write_text(
        json.dumps(
            {"config": {"data": {"name": "toy"}, "eval": {"metrics": ["recall@5", "ndcg@10"]}}}
        )
    )
    (run / "recall.parquet").write_bytes(b"")
    per_query.write_parquet(run / "per_query.parquet")
    return run


def test_ci_table_prints_mean_and_half_width_per_run_and_group(tmp_path, capsys):
    pq = pl.DataFrame(
        {
            "query_id": ["a", "b", "c", "d"],
            "group": ["1", "1", "2", "2"],
            "recall@5": [1.0, 1.0, 0.5, 0.5],
            "ndcg@10": [0.2, 0.2, 0.2, 0.2],
        }
    )
    run = _fake_run(tmp_path, "toy-run", pq)
    assert _load_script("ci_table").main([str(run), "--by-group"]) == 0
    out = capsys.readouterr().out
    assert "| toy-run | 4 |" in out
    assert "| 1 | 2 | 100.0 ± 0.0 | 0.200 ± 0.000 |" in out  # group 1: constant values
    assert "| 2 | 2 | 50.0 ± 0.0 | 0.200 ± 0.000 |" in out


def test_ci_table_bad_run_dir_exits_2(tmp_path, capsys):
    assert _load_script("ci_table").main([str(tmp_path / "nope")]) == 2
    assert "manifest.json" in capsys.readouterr().err


def test_paired_difference_pairs_by_query_id():
    from pipeline.report.bootstrap import paired_difference

    a = pl.DataFrame({"query_id": ["x", "y", "z"], "m": [0.5, 0.9, 0.3]})
    b = pl.DataFrame(
        {"query_id": ["z", "y", "x", "w"], "m": [0.2, 0.8, 0.4, 1.0]}
    )  # w only in b: dropped
    ci = paired_difference(
        a, b, "m"
    )  # every paired gain is +0.1 → [0.1, 0.1] whatever the resample
    assert (ci.n, ci.mean, ci.low, ci.high) == (
        3,
        pytest.approx(0.1),
        pytest.approx(0.1),
        pytest.approx(0.1),
    )
    c = pl.DataFrame({"query_id": ["x", "y"], "m": [1.0, 0.0]})
    d = pl.DataFrame({"query_id": ["y", "x"], "m": [0.0, 0.0]})
    assert (paired_difference(c, d, "m").low, paired_difference(c, d, "m").high) == (
        0.0,
        1.0,
    )  # gains 1, 0
