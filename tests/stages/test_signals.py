"""Maintenance signals: PageRank vs networkx, in-degree, Leiden, ReMe recency, OKS memory curve, load()."""

import datetime as dt
import logging
import math

import networkx as nx
import numpy as np
import polars as pl
import pytest

from pipeline.stages import signals
from pipeline.stages.graph import EDGE_SCHEMA
from pipeline.stages.signals import SIGNALS_VERSION, SignalsParams

NOW = dt.datetime(2025, 6, 1, 12, tzinfo=dt.timezone.utc)
TS = pl.Datetime("us", "UTC")


def _edges(rows):
    """rows: (src, dst, weight, inhibit)."""
    return pl.DataFrame(
        [(s, d, w, i, "edge") for s, d, w, i in rows], schema=EDGE_SCHEMA, orient="row"
    )


def _nodes(n, **cols):
    return pl.DataFrame({"node_id": [f"n{i}" for i in range(n)], "text": ["t"] * n, **cols})


def _days_ago(*days):
    return pl.Series([None if d is None else NOW - dt.timedelta(days=d) for d in days], dtype=TS)


def test_pagerank_matches_networkx_and_in_degree_skips_inhibitory():
    rows = [
        (0, 1, 1.0, False),
        (0, 2, 2.0, False),
        (1, 2, 1.0, False),
        (2, 0, 1.0, False),
        (2, 3, 0.5, False),
        (1, 2, 0.5, False),
        (3, 1, 5.0, True),
    ]  # 3 is dangling; 3→1 is inhibitory
    out = signals.compute(_nodes(4), _edges(rows), NOW, SignalsParams.defaults())
    g = nx.DiGraph()
    g.add_nodes_from(range(4))
    for s, d, w, inh in rows:
        if not inh:
            g.add_edge(s, d, weight=g.get_edge_data(s, d, {"weight": 0.0})["weight"] + w)
    ref = nx.pagerank(g, alpha=0.85, tol=1e-13, weight="weight")
    np.testing.assert_allclose(out["pagerank"].to_numpy(), [ref[i] for i in range(4)], atol=1e-8)
    assert out["pagerank"].sum() == pytest.approx(1.0, abs=1e-12)
    assert out["in_degree"].to_list() == [1, 1, 3, 1]  # parallel 1→2 edges each count
    assert out["inbound"].to_list() == out["in_degree"].to_list()
    assert out["version"].to_list() == [SIGNALS_VERSION] * 4 and out["computed_at"][0] == NOW


def test_leiden_two_triangles_and_an_isolated_node():
    tri = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (2, 3)]
    e = _edges([(s, d, 1.0, False) for s, d in tri])
    a = signals.compute(_nodes(7), e, NOW, SignalsParams.defaults(seed=13))["community"].to_list()
    b = signals.compute(_nodes(7), e, NOW, SignalsParams.defaults(seed=13))["community"].to_list()
    assert (
        a == b == [0, 0, 0, 1, 1, 1, 2]
    )  # renumbered by smallest node index; isolated node 6 alone
    # direction and weight are ignored (undirected, unweighted)
    e2 = _edges([(d, s, 9.0, False) for s, d in tri])
    assert signals.compute(_nodes(7), e2, NOW, SignalsParams.defaults())["community"].to_list() == a


def test_recency_hand_values_and_archived():
    nodes = _nodes(
        5,
        updated_at=_days_ago(60, None, 120, 0, None),
        created_at=_days_ago(90, 60, 120, 0, None),
        access_count=pl.Series([0, 0, 0, 1, 0]),
    )
    out = signals.compute(nodes, _edges([(0, 3, 1.0, False)]), NOW, SignalsParams.defaults())
    rec = out["recency"].to_list()
    assert rec[0] == pytest.approx(math.exp(-1), abs=1e-12)  # 60 d, no hits, no inbound: 0.3679
    assert rec[1] == pytest.approx(math.exp(-1), abs=1e-12)  # no updated_at → created_at
    assert rec[2] == pytest.approx(math.exp(-2), abs=1e-12)  # 0.1353 < 0.15
    assert rec[3] == pytest.approx((1 + math.log(2)) * (1 + math.log(2) / 10), abs=1e-12)
    assert rec[4] is None
    assert out["archived_signal"].to_list() == [False, False, True, False, None]


def test_memory_curve_hand_cases_and_tiers():
    """Importance is on the contract's 0–10 scale (a 0–1 input is scaled at ingest); OKS's curve uses /10."""
    nodes = _nodes(
        8,
        type=["concept", "strategy", "strategy", "note", "note", "concept", None, "concept"],
        importance=pl.Series([5.0, 5.0, 5.0, 5.0, 9.0, 7.0, None, 0.8], dtype=pl.Float32),
        created_at=_days_ago(1000, 10, 10.9, 0, 0, 5, None, 0),
        status=[
            "active",
            "active",
            "provisional",
            "provisional",
            "dropped",
            "provisional",
            None,
            "active",
        ],
        pinned=[False, False, False, True, True, False, None, False],
        access_count=pl.Series([0, 0, 0, 3, 9, 0, None, 0]),
        archived=[False, False, False, False, False, False, None, False],
    )
    out = signals.compute(nodes, pl.DataFrame(schema=EDGE_SCHEMA), NOW, SignalsParams.defaults())
    want = [
        0.5 * 1.2,  # concept never decays
        0.5 * math.exp(-0.14) * 1.2,  # strategy, 10 days, active = 0.52157
        0.5 * math.exp(-0.14),  # 10.9 days counts as 10 whole days; not active = 0.4347
        0.5 + 0.5 * math.log(4) + 0.5,  # other type, day 0, 3 hits, pinned
        0.0,  # dropped
        0.7,  # importance 7 → OKS 0.7
        0.5 * 1.2,  # all missing: importance 5 → OKS 0.5, 0 days, status active
        0.08 * 1.2,
    ]  # 0.8 is 0.8 on 0–10 (no second guess at the scale): 0.096
    np.testing.assert_allclose(out["memory_score"].to_numpy(), want, atol=1e-6)
    assert out["tier"].to_list() == [
        "warm",
        "warm",
        "warm",
        "hot",
        "evictable",
        "hot",
        "warm",
        "evictable",
    ]
    archived = nodes.with_columns(archived=pl.lit(True))
    assert (
        signals.compute(archived, pl.DataFrame(schema=EDGE_SCHEMA), NOW, SignalsParams.defaults())[
            "memory_score"
        ].sum()
        == 0
    )
    assert list(signals.tier(np.array([0.7, 0.6999, 0.4, 0.3999, 0.15, 0.1499, 0.0]))) == [
        "hot",
        "warm",
        "warm",
        "cold",
        "cold",
        "evictable",
        "evictable",
    ]


def test_factors_are_one_where_missing():
    np.testing.assert_allclose(
        signals.inbound_factor(pl.Series([0, 3, None])), [1.0, 1 + 0.15 * math.log(4), 1.0]
    )
    np.testing.assert_allclose(
        signals.same_community(pl.Series([0, 1, None]), [1, None]), [1.0, 1.2, 1.0]
    )
    np.testing.assert_allclose(
        signals.recency_decay([60.0, np.nan, -5.0]), [math.exp(-1), 1.0, 1.0]
    )


@pytest.fixture
def table():
    nodes = _nodes(3, created_at=_days_ago(1, 2, 3))
    return signals.compute(nodes, _edges([(0, 1, 1.0, False)]), NOW, SignalsParams.defaults())


def test_write_load_round_trip(tmp_path, table):
    path = tmp_path / "sig" / "signals.parquet"
    signals.write(table, path)
    got, fresh = signals.load(path, NOW + dt.timedelta(days=3))
    assert fresh == {"status": "fresh", "computed_at": NOW, "age_days": pytest.approx(3.0)}
    assert got.equals(table)


def test_load_missing_stale_and_version_mismatch(tmp_path, table, caplog):
    caplog.set_level(logging.WARNING, logger="pipeline.stages.signals")
    got, fresh = signals.load(tmp_path / "nope.parquet", NOW)
    assert got is None and fresh == {"status": "missing", "computed_at": None, "age_days": None}
    assert "missing" in caplog.text

    path = tmp_path / "signals.parquet"
    signals.write(table, path)
    caplog.clear()
    got, fresh = signals.load(path, NOW + dt.timedelta(days=15), max_age_days=14)
    assert got is None and fresh["status"] == "stale" and fresh["age_days"] == pytest.approx(15.0)
    assert "stale" in caplog.text

    signals.write(table.with_columns(version=pl.lit(SIGNALS_VERSION + 1, pl.Int32)), path)
    caplog.clear()
    got, fresh = signals.load(path, NOW)
    assert got is None and fresh["status"] == "version_mismatch" and "version" in caplog.text


def test_resolve_disabled_in_run_and_from_path(tmp_path, table):
    nodes = _nodes(3)
    e = _edges([(0, 1, 1.0, False)])
    assert signals.resolve(nodes, e, NOW, SignalsParams.defaults(enabled=False)) == (
        None,
        {"status": "disabled", "computed_at": None, "age_days": None},
    )
    got, fresh = signals.resolve(nodes, e, NOW, SignalsParams.defaults())
    assert fresh["status"] == "fresh" and got.height == 3
    signals.write(table, tmp_path / "s.parquet")
    got, fresh = signals.resolve(
        nodes, e, NOW, SignalsParams.defaults(path=str(tmp_path / "s.parquet"))
    )
    assert fresh["status"] == "fresh" and got.equals(table)
