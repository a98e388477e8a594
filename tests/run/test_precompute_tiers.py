"""``recall precompute`` writes the memory-curve tiers of every scope (``pipeline.run.precompute_tiers``):
hand-computed counts on two workspaces with scores exactly on the 0.7 / 0.4 / 0.15 boundaries,
sealed scopes, and an edit that rewrites only the edited scope's file. The
tests pin the newest-stamp reference time (``default_now=null``; preset oks reads the run's start)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.contract.dataset import Dataset

# memory_score = importance/10 · exp(−λ·days) + 0.5·log1p(hits) + 0.5·pinned, × 1.2 when active,
from pipeline.recallcache import recipe
from pipeline.run import precompute

# 0 when archived. type concept: λ = 0; status "stale" (not active): no × 1.2; no timestamps.
WS1 = [  # (node, importance, type, status, archived) → score → tier
    ("ws1-a", 7.0, "concept", "stale", False),  # 0.7 → hot (boundary)
    ("ws1-b", 6.99, "concept", "stale", False),  # 0.699 → warm
    ("ws1-c", 4.0, "concept", "stale", False),  # 0.4 → warm (boundary)
    ("ws1-d", 3.99, "concept", "stale", False),  # 0.399 → cold
]
WS2 = [
    ("ws2-a", 1.5, "concept", "stale", False),  # 0.15 → cold (boundary)
    ("ws2-b", 1.49, "concept", "stale", False),  # 0.149 → evictable
    ("ws2-c", 5.0, None, None, False),  # 0.5 · e^0 × 1.2 (active by default) = 0.6 → warm
    ("ws2-d", 9.0, "concept", "stale", True),  # archived → 0 → evictable
]
ID1, ID2 = recipe.scope_id(("ws1",)), recipe.scope_id(("ws2",))


def _dataset(rows):
    nodes = pl.DataFrame(
        [
            (n, f"{n.split('-')[0]}/{n}.md", f"note {n} alpha", imp, t, s, a)
            for n, imp, t, s, a in rows
        ],
        schema={
            "node_id": pl.String,
            "doc_id": pl.String,
            "text": pl.String,
            "importance": pl.Float64,
            "type": pl.String,
            "status": pl.String,
            "archived": pl.Boolean,
        },
        orient="row",
    )
    scopes = sorted({n.split("-")[0] for n, *_ in rows})
    queries = pl.DataFrame(
        {
            "query_id": [f"q-{s}" for s in scopes],
            "text": ["alpha note"] * len(scopes),
            "doc_scope": [[s] for s in scopes],
        }
    )
    return Dataset(name="tiers", nodes=nodes, queries=queries)


def _cfg(compose, cache):
    return compose(
        ["preset=oks", "default_now=null", "signals=default", "embed=hashing", f"cache_dir={cache}"]
    )


def test_tiers_per_scope_by_hand_and_an_edit_rewrites_only_its_scope(compose, tmp_path):
    cfg = _cfg(compose, tmp_path / "c")
    got = precompute.precompute(cfg, _dataset(WS1 + WS2))
    want1 = {"hot": 1, "warm": 2, "cold": 1, "evictable": 0}
    want2 = {"hot": 0, "warm": 1, "cold": 1, "evictable": 2}
    assert got["tiers"] == {ID1: want1, ID2: want2}
    assert got["tiers_rewritten"] == sorted([ID1, ID2])
    root = tmp_path / "c" / "tiers" / got["namespace"]
    t1 = pl.read_parquet(root / f"scope={ID1}" / "data.parquet")
    assert t1["node_id"].to_list() == ["ws1-a", "ws1-b", "ws1-c", "ws1-d"]
    assert t1["tier"].to_list() == ["hot", "warm", "warm", "cold"]
    score = t1["memory_score"].to_list()
    assert (score[0], score[2]) == (0.7, 0.4)  # exactly on the boundaries
    assert score == pytest.approx([0.7, 0.699, 0.4, 0.399], abs=1e-12)
    t2 = pl.read_parquet(root / f"scope={ID2}" / "data.parquet")
    assert t2["tier"].to_list() == ["cold", "evictable", "warm", "evictable"]
    assert t2["memory_score"][0] == 0.15  # exactly on the boundary
    manifest = json.loads((root / "_manifest.json").read_text())["scopes"]
    assert manifest[ID1]["doc_scope"] == ["ws1"] and manifest[ID2]["counts"] == want2
    bytes1 = (root / f"scope={ID1}" / "data.parquet").read_bytes()

    same = precompute.precompute(cfg, _dataset(WS1 + WS2))
    assert same["tiers_rewritten"] == [] and same["tiers"] == got["tiers"]

    edited = [*WS2[:1], ("ws2-b", 4.0, "concept", "stale", False), *WS2[2:]]  # 0.149 → 0.4 warm
    after = precompute.precompute(cfg, _dataset(WS1 + edited))
    assert after["tiers_rewritten"] == [ID2]
    assert after["tiers"] == {ID1: want1, ID2: {"hot": 0, "warm": 2, "cold": 1, "evictable": 1}}
    assert (root / f"scope={ID1}" / "data.parquet").read_bytes() == bytes1
    t2 = pl.read_parquet(root / f"scope={ID2}" / "data.parquet")
    assert t2["tier"].to_list() == ["cold", "warm", "warm", "evictable"]


def test_a_scopes_tiers_do_not_depend_on_other_scopes(compose, tmp_path):
    both = _cfg(compose, tmp_path / "both")
    alone = _cfg(compose, tmp_path / "alone")
    ns = precompute.precompute(both, _dataset(WS1 + WS2))["namespace"]
    assert precompute.precompute(alone, _dataset(WS1))["namespace"] == ns
    part = f"{ns}/scope={ID1}/data.parquet"
    assert (tmp_path / "both" / "tiers" / part).read_bytes() == (
        tmp_path / "alone" / "tiers" / part
    ).read_bytes()
    assert not (tmp_path / "alone" / "tiers" / ns / f"scope={ID2}").exists()


def test_no_tiers_without_signals(compose, tmp_path):
    cfg = compose(
        [
            "preset=oks",
            "default_now=null",
            "signals=none",
            "embed=hashing",
            f"cache_dir={tmp_path / 'c'}",
        ]
    )
    got = precompute.precompute(cfg, _dataset(WS1 + WS2))
    assert "tiers" not in got and not (tmp_path / "c" / "tiers").exists()


def test_precompute_tiers_add_up_to_a_plain_runs_tier_counts(compose, tmp_path):
    from pipeline.run import runner

    got = precompute.precompute(_cfg(compose, tmp_path / "c"), _dataset(WS1 + WS2))
    total = {t: sum(c[t] for c in got["tiers"].values()) for t in ("hot", "warm", "cold")}
    assert total == {"hot": 1, "warm": 3, "cold": 2}  # by hand: WS1 + WS2 above
    plain = compose(
        [
            "preset=oks",
            "default_now=null",
            "signals=default",
            "embed=hashing",
            f"cache_dir={tmp_path / 'p'}",
        ]
    )
    runner.run(plain, tmp_path / "plain", dataset=_dataset(WS1 + WS2))
    manifest = json.loads((tmp_path / "plain" / "manifest.json").read_text())
    assert manifest["tiers"] == {**total, "evictable": 2}


def test_a_feedback_table_is_overlaid_as_in_a_run(compose, tmp_path):
    import datetime as dt

    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    path = tmp_path / "signals-r1.parquet"
    pl.DataFrame(
        {"node_id": ["ws2-b"], "access_count": [1], "version": [1], "computed_at": [now]},
        schema_overrides={"version": pl.Int32, "computed_at": pl.Datetime("us", "UTC")},
    ).write_parquet(path)
    cfg = compose(
        [
            "preset=oks",
            "default_now=null",
            "signals=default",
            f"signals.path={path}",
            "now=2026-01-01T00:00:00Z",
            "embed=hashing",
            f"cache_dir={tmp_path / 'c'}",
        ]
    )
    got = precompute.precompute(cfg, _dataset(WS1 + WS2))
    # ws2-b: 0.149 + 0.5·ln 2 = 0.4956 → warm (was evictable); ws1 unchanged (concept: λ = 0)
    assert got["tiers"][ID2] == {"hot": 0, "warm": 2, "cold": 1, "evictable": 1}
    assert got["tiers"][ID1] == {"hot": 1, "warm": 2, "cold": 1, "evictable": 0}
