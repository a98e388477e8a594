"""Score terms and factors on hand-computed cases."""

import datetime as dt
import math

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.stages import score

NOW = dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)


def _frame():
    nodes = pl.DataFrame(
        {
            "node_id": ["a", "b", "c"],
            "importance": [8.0, None, 2.0],
            "created_at": [NOW - dt.timedelta(days=1), NOW - dt.timedelta(days=30), None],
        },
        schema_overrides={"importance": pl.Float32, "created_at": pl.Datetime("us", "UTC")},
    )
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0],
            "node_idx": [0, 1, 2],
            "dense": [0.8, 1.3, -0.2],
            "lexical": [2.0, 4.0, 0.0],
            "graph": [3.0, 1.0, 0.0],
            "fused": [0.9, 0.5, 0.1],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["t"]})
    return cand, nodes, queries


def test_bme_hybrid_hand_computed():
    cand, nodes, queries = _frame()
    terms = {"bme_graph": 0.6, "bme_dense": 0.3, "lexical_max": 0.18, "importance": 0.1}
    df = score.attach(cand, nodes, queries, None, [*terms, "bme_time_decay"], NOW)
    out = score.compute(df, terms, ["bme_time_decay"], normalize=True).sort("node_idx")
    decay = [0.8 + 0.2 / (1 + math.log(1 + d)) for d in (1, 30, 0)]
    assert decay[0] == pytest.approx(0.918, abs=1e-3) and decay[1] == pytest.approx(
        0.845, abs=1e-3
    )  # spec values
    a = (
        (0.6 * 1.0 + 0.3 * 0.8 + 0.18 * 0.5 + 0.1 * 0.8) / 1.18 * decay[0]
    )  # graph 3 → clip(1.5) = 1
    b = (0.6 * 0.5 + 0.3 * 1.0 + 0.18 * 1.0 + 0.1 * 0.5) / 1.18 * decay[1]  # importance missing → 5
    c = (0.0 + 0.0 + 0.0 + 0.1 * 0.2) / 1.18 * 1.0  # no created_at → decay 1
    assert out["score"].to_list() == pytest.approx([a, b, c])
    assert out["bme_time_decay"].to_list() == pytest.approx(decay)


def test_reme_factors_hand_computed():
    cand, nodes, queries = _frame()
    sig = pl.DataFrame({"inbound": [0, 3, 10], "community": [1, 2, 1]})
    nodes = nodes.with_columns(
        updated_at=pl.lit(NOW - dt.timedelta(days=60)).cast(pl.Datetime("us", "UTC"))
    )
    names = ["fused", "reme_inbound", "reme_community", "reme_recency"]
    df = score.attach(cand, nodes, queries, sig, names, NOW)
    out = score.compute(df, {"fused": 1.0}, names[1:], normalize=False).sort("node_idx")
    assert out["reme_inbound"].to_list() == pytest.approx(
        [1.0, 1 + 0.15 * math.log(4), 1 + 0.15 * math.log(11)]
    )
    assert out["reme_community"].to_list() == [1.2, 1.2, 1.2]  # top-3 fused are all three nodes
    assert out["reme_recency"].to_list() == pytest.approx([math.exp(-1)] * 3)
    f = [0.9, 0.5, 0.1]
    assert out["score"].to_list() == pytest.approx(
        [f[i] * out["reme_inbound"][i] * 1.2 * math.exp(-1) for i in range(3)]
    )


def test_community_factor_only_for_top3_communities():
    cand = pl.DataFrame(
        {"query_idx": [0] * 5, "node_idx": [0, 1, 2, 3, 4], "fused": [0.9, 0.8, 0.7, 0.6, 0.5]}
    )
    sig = pl.DataFrame({"community": [1, 1, 2, 3, 2]})
    df = score.attach(
        cand,
        pl.DataFrame({"node_id": list("abcde")}),
        pl.DataFrame({"query_id": ["q"]}),
        sig,
        ["reme_community"],
        NOW,
    )
    out = score.compute(df, {"fused": 1.0}, ["reme_community"], normalize=False).sort("node_idx")
    assert out["reme_community"].to_list() == [1.2, 1.2, 1.2, 1.0, 1.2]


def test_unknown_factor_and_empty_terms_are_config_errors():
    cand, nodes, queries = _frame()
    with pytest.raises(ConfigError, match="unknown factor"):
        score.compute(cand, {"fused": 1.0}, ["nope"], False)
    with pytest.raises(ConfigError, match="selects no component"):
        score.compute(cand, {"missing": 1.0}, [], False)


def test_bme_lexical_unit_coverage_hand_computed():
    from pipeline.bme.lexcover import field_match, lexical, units

    assert units("Hello, World  a 中文记忆") == {
        "hello",
        "world",
        "中文记忆",
        "中文",
        "文记",
        "记忆",
    }
    # title equal to the query → P = 1
    assert lexical(["alice chen"], ["Alice Chen"], []) == 1.0
    # title contained in the query → P = 0.92
    assert lexical(["where does alice chen work"], ["Alice Chen"], []) == pytest.approx(0.92)
    # coverage only: query units {budget, farm, month}; summary shares {farm, month} → S = 0.52·2/3
    s = 0.52 * 2 / 3
    t = field_match("the farm costs money each month", ["budget farm month"], 0.65, 0.55, 0.45)
    assert t == pytest.approx(0.45 * 2 / 3)
    got = lexical(["budget farm month"], [""], ["the farm costs money each month"])
    assert got == pytest.approx(max(0.82 * s, 0.7 * t, 0.35 * s + 0.2 * t))
    assert lexical(["zebra"], ["Alpha"], ["beta"]) == 0.0
