"""Leave-one-dataset-out selection on synthetic per-query tables (no real runs)."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.report.lodo import choose_recipe, lodo_table, means, worst_regret


def _pq(values: list[float], metric: str = "m") -> pl.DataFrame:
    return pl.DataFrame({"query_id": [f"q{i}" for i in range(len(values))], metric: values})


# means: spiky  = d1 0.9, d2 0.2, d3 0.9 ; steady = d1 0.7, d2 0.6, d3 0.5 ; weak = d1 0.1, d2 0.1, d3 0.95
TABLES = {
    ("spiky", "d1"): _pq([1.0, 0.8]),
    ("spiky", "d2"): _pq([0.2, 0.2]),
    ("spiky", "d3"): _pq([0.9, 0.9]),
    ("steady", "d1"): _pq([0.7, 0.7]),
    ("steady", "d2"): _pq([0.6, 0.6]),
    ("steady", "d3"): _pq([0.5, 0.5]),
    ("weak", "d1"): _pq([0.1, 0.1]),
    ("weak", "d2"): _pq([0.1, 0.1]),
    ("weak", "d3"): _pq([1.0, 0.9]),
}
METRIC = {"d1": "m", "d2": "m", "d3": "m"}
RECIPES = ["spiky", "steady", "weak"]


def test_worst_regret_by_hand():
    scores = means(TABLES, METRIC)
    # on d1, d2 the best scores are 0.9 and 0.6: spiky falls 0.4 short on d2, steady 0.2 on d1
    assert worst_regret(scores, "spiky", ["d1", "d2"]) == pytest.approx(0.4)
    assert worst_regret(scores, "steady", ["d1", "d2"]) == pytest.approx(0.2)
    assert worst_regret(scores, "weak", ["d1", "d2"]) == pytest.approx(0.8)


def test_choice_is_by_worst_dataset():
    scores = means(TABLES, METRIC)
    # fit d1, d3 (best 0.9, 0.95): worst shortfall spiky 0.05, steady 0.45, weak 0.8 → spiky
    assert choose_recipe(scores, ["d1", "d3"], RECIPES) == "spiky"
    # fit d1, d2 (best 0.9, 0.6): spiky 0.4, steady 0.2, weak 0.8 → steady
    assert choose_recipe(scores, ["d1", "d2"], RECIPES) == "steady"
    # fit d2, d3 (best 0.6, 0.95): spiky 0.4, steady 0.45, weak 0.5 → spiky
    assert choose_recipe(scores, ["d2", "d3"], RECIPES) == "spiky"


def test_worst_shortfall_overrules_a_higher_average():
    # best per set: 1.0 (d1), 0.5 (d2). a: mean 0.6, worst shortfall 0.3 (d2); b: mean 0.575, worst 0.2 (d1);
    # c: mean 0.5, worst 0.5 (d1). The average would pick a; the worst shortfall picks b.
    scores = {
        "a": {"d1": 1.0, "d2": 0.2},
        "b": {"d1": 0.8, "d2": 0.35},
        "c": {"d1": 0.5, "d2": 0.5},
    }
    assert choose_recipe(scores, ["d1", "d2"], ["a", "b", "c"]) == "b"


def test_ties_go_to_the_first_listed():
    same = {(r, d): _pq([0.5, 0.5]) for r in ("a", "b") for d in ("d1", "d2")}
    assert choose_recipe(means(same, {"d1": "m", "d2": "m"}), ["d1", "d2"], ["b", "a"]) == "b"


def test_lodo_table_reports_the_held_out_set_with_an_interval():
    out = lodo_table(TABLES, METRIC, RECIPES).sort("held_out")
    assert out["held_out"].to_list() == ["d1", "d2", "d3"]
    assert out["chosen"].to_list() == ["spiky", "spiky", "steady"]
    d3 = out.row(2, named=True)
    assert (d3["held_out_mean"], d3["low"], d3["high"], d3["n"]) == pytest.approx(
        (0.5, 0.5, 0.5, 2)
    )
    assert (d3["oracle"], d3["oracle_mean"]) == ("weak", pytest.approx(0.95))
    d1 = out.row(0, named=True)  # spiky on d1: queries 1.0 and 0.8 → interval [0.8, 1.0]
    assert (d1["held_out_mean"], d1["low"], d1["high"]) == pytest.approx((0.9, 0.8, 1.0))


def test_a_missing_run_is_a_config_error():
    partial = {k: v for k, v in TABLES.items() if k != ("steady", "d2")}
    with pytest.raises(ConfigError, match="steady"):
        choose_recipe(means(partial, METRIC), ["d1", "d2"], RECIPES)


def test_half_gains_split_by_the_query_hash_and_pair_by_query():
    import hashlib

    from pipeline.report.lodo import half_gains

    ids = [f"q{i}" for i in range(12)]
    half_b = {
        q for q in ids if hashlib.sha1(q.encode()).digest()[0] & 1
    }  # ingest.query_half's rule
    base = pl.DataFrame({"query_id": ids, "m": [0.5] * 12})
    # the recipe gains +0.25 on every half-b query and loses 0.5 on every half-a one
    tuned = pl.DataFrame({"query_id": ids, "m": [0.75 if q in half_b else 0.0 for q in ids]})
    out = half_gains(
        {("best", "d"): base, ("tuned", "d"): tuned}, {"d": "m"}, "best", ["best", "tuned"]
    )
    rows = {r["half"]: r for r in out.iter_rows(named=True)}
    assert rows["b"]["n"] == len(half_b) and rows["a"]["n"] == 12 - len(half_b)
    assert (rows["b"]["gain"], rows["b"]["low"], rows["b"]["high"]) == pytest.approx(
        (0.25, 0.25, 0.25)
    )
    assert (rows["a"]["gain"], rows["a"]["low"], rows["a"]["high"]) == pytest.approx(
        (-0.5, -0.5, -0.5)
    )


def test_lodo_script_report_on_synthetic_runs():
    from tests.report.test_bootstrap import _load_script

    lodo = _load_script("lodo")
    ids = [f"q{i}" for i in range(8)]
    tables = {}
    for i, name in enumerate(
        lodo.RECIPES
    ):  # recipe i scores 0.5 + 0.1·i on every dataset: the last wins all
        for data, m in lodo.METRIC.items():
            tables[(name, data)] = pl.DataFrame({"query_id": ids, m: [0.5 + 0.1 * i] * 8})
    text = lodo.report(tables, list(lodo.METRIC), lodo.RECIPES)
    last = list(lodo.RECIPES)[-1]  # the fifth recipe: 0.5 + 0.1·4 = 0.9
    assert len(lodo.RECIPES) == 5
    assert f"| scifact | ndcg@10 | {last} | 0.000 | 0.900 [0.900, 0.900] | {last} (0.900) |" in text
    assert f"| locomo | recall@5 | {last} | 0.000 | 90.0 [90.0, 90.0] | {last} (90.0) |" in text
    assert (
        f"| musique | {last} | b |" in text and "40.0 [40.0, 40.0]" in text
    )  # +0.4 over best, each half


def test_lodo_search_recipes_are_best_with_drawn_values_and_a_fold_may_choose_one():
    from tests.report.test_bootstrap import _load_script

    lodo = _load_script("lodo")
    drawn = lodo.searched(3, seed=5)
    assert list(drawn) == ["search-00", "search-01", "search-02"]
    assert all(o[0] == "preset=best" for o in drawn.values())
    assert drawn == lodo.searched(3, seed=5) and drawn != lodo.searched(3, seed=6)
    keys = [o.split("=")[0] for o in drawn["search-01"][1:]]
    assert "lexical.k1" in keys and "diffuse.seed_k" in keys
    recipes = lodo.RECIPES | drawn
    ids = [f"q{i}" for i in range(4)]
    tables = {
        (name, data): pl.DataFrame({"query_id": ids, m: [0.9 if name == "search-02" else 0.5] * 4})
        for name in recipes
        for data, m in lodo.METRIC.items()
    }
    text = lodo.report(tables, list(lodo.METRIC), recipes)
    assert (
        "| musique | recall@5 | search-02 | 0.000 | 90.0 [90.0, 90.0] | search-02 (90.0) |" in text
    )
    assert "| search-02 | " + " ".join(drawn["search-02"][1:]) + " |" in text
    clean = lodo.report(tables, list(lodo.METRIC), recipes, search_only=True)
    assert (
        "| locomo | recall@5 | search-02 | 0.000 | 90.0 [90.0, 90.0] | search-02 (90.0) |" in clean
    )
    assert lodo.candidates(recipes, search_only=True) == list(drawn)
