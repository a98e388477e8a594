"""Access feedback: BME reinforcement and the ReMe access log, by hand; a new table every time."""

import datetime as dt
import json
import subprocess
import sys

import polars as pl
import pytest

from pipeline.contract import ingest, registry
from pipeline.run import feedback, runner
from pipeline.stages import signals
from tests.helpers.paths import tiny_ws_overrides

NOW = dt.datetime(2025, 3, 10, 15, 0, tzinfo=dt.timezone.utc)


def _table():
    return pl.DataFrame(
        {
            "node_id": ["a", "b", "c"],
            "pagerank": [0.5, 0.3, 0.2],
            "access_count": [2, None, 7],
            "importance": [9.95, None, 3.0],
            "access_days": [
                [dt.date(2025, 1, 1), dt.date(2025, 3, 1)],
                None,
                [dt.date(2025, 2, 20)],
            ],
        },
        schema_overrides={"access_days": pl.List(pl.Date)},
    )


def _recall():
    return pl.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2"],
            "node_id": ["a", "b", "a", "a"],
            "rank": [1, 2, 1, 2],
        }
    )


def test_accesses_count_distinct_queries():
    assert feedback.accesses(_recall()).rows() == [("a", 2), ("b", 1)]


def test_reinforcement_and_access_log_by_hand():
    out = feedback.apply(_table(), feedback.accesses(_recall()), NOW)
    assert out["node_id"].to_list() == ["a", "b", "c"] and out["pagerank"].to_list() == [
        0.5,
        0.3,
        0.2,
    ]
    assert out["access_count"].to_list() == [
        4,
        1,
        7,
    ]  # a: 2 + 2 queries; b: missing → 0 + 1; c untouched
    assert out["importance"].to_list() == pytest.approx(
        [10.0, 5.1, 3.0]
    )  # 9.95 + 0.2 capped; missing → 5 + 0.1
    assert out["last_access_at"].to_list()[:2] == [NOW, NOW] and out["last_access_at"][2] is None
    today = NOW.date()
    assert out["access_days"].to_list() == [
        [dt.date(2025, 1, 1), dt.date(2025, 3, 1), today],
        [today],
        [dt.date(2025, 2, 20)],
    ]
    # 30 days up to 2025-03-10 = 2025-02-09 … 2025-03-10
    assert out["hits_30d"].to_list() == [2, 1, 1]
    assert out["revision"].to_list() == [1, 1, 1] and out["computed_at"][0] == NOW


def test_same_day_access_is_logged_once_and_revision_grows():
    acc = feedback.accesses(_recall())
    once = feedback.apply(_table(), acc, NOW)
    twice = feedback.apply(once, acc, NOW + dt.timedelta(hours=2))
    assert twice["access_days"].to_list() == once["access_days"].to_list()
    assert twice["hits_30d"].to_list() == once["hits_30d"].to_list()
    assert twice["access_count"].to_list() == [6, 2, 7] and twice["revision"][0] == 2
    later = feedback.apply(
        twice, acc, NOW + dt.timedelta(days=40)
    )  # old days fall out of the window
    assert later["hits_30d"].to_list() == [1, 1, 0]


def test_start_values_from_nodes_when_table_lacks_them():
    table = pl.DataFrame({"node_id": ["a", "b"], "pagerank": [0.6, 0.4]})
    nodes = pl.DataFrame(
        {"node_id": ["a", "b"], "importance": [8.0, None], "access_count": [3, None]}
    )
    out = feedback.apply(table, feedback.accesses(_recall()), NOW, nodes)
    assert out["access_count"].to_list() == [5, 1] and out["importance"].to_list() == pytest.approx(
        [8.2, 5.1]
    )
    assert set(out.columns) >= {"node_id", "pagerank", "hits_30d", "access_days", "revision"}


def test_overlay_prefers_feedback_values():
    nodes = pl.DataFrame(
        {"node_id": ["a", "b", "z"], "importance": [1.0, 2.0, 3.0], "text": ["x", "y", "w"]}
    )
    table = pl.DataFrame({"node_id": ["a", "b"], "importance": [4.0, None], "hits_30d": [2, 0]})
    out = signals.overlay(nodes, table)
    assert out["importance"].to_list() == [4.0, 2.0, 3.0] and out["hits_30d"].to_list() == [
        2,
        0,
        None,
    ]
    assert out["text"].to_list() == ["x", "y", "w"]


def test_cli_writes_a_new_table_the_next_run_reads(compose, tmp_path):
    over = [*tiny_ws_overrides(), "embed=hashing", "signals=default", "report=false", "k=3"]
    run_dir = tmp_path / "r1"
    runner.run(compose([*over, f"out_dir={run_dir}"]), run_dir)
    src = run_dir / "signals.parquet"
    before = src.read_bytes()
    args = [
        sys.executable,
        "-m",
        "pipeline.cli.main",
        "feedback",
        str(run_dir),
        "--now",
        "2025-03-10T15:00:00Z",
    ]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    new = run_dir / "signals-r1.parquet"
    assert out.stdout.strip() == f"wrote {new}" and src.read_bytes() == before
    again = subprocess.run(args, capture_output=True, text=True)
    assert again.returncode == 2 and "never overwrites" in again.stderr
    table, recall = pl.read_parquet(new), pl.read_parquet(run_dir / "recall.parquet")
    got = dict(zip(table["node_id"], table["access_count"]))
    for nid, n in recall.group_by("node_id").agg(pl.col("query_id").n_unique()).iter_rows():
        assert got[nid] >= n
    res = runner.run(
        compose(
            [*over, f"signals.path={new}", "now=2025-03-10T16:00:00Z", f"out_dir={tmp_path / 'r2'}"]
        ),
        tmp_path / "r2",
    )
    assert res["manifest"]["signals_freshness"]["revision"] == 1
    assert res["manifest"]["signals_freshness"]["status"] == "fresh"


def test_injected_counts_only_injected_rows(compose, tmp_path):
    run_dir = tmp_path / "r"
    cfg = compose(
        [
            *tiny_ws_overrides(),
            "embed=hashing",
            "signals=default",
            "report=false",
            "inject.format=oks",
            "inject.max_nodes=1",
            f"out_dir={run_dir}",
        ]
    )
    runner.run(cfg, run_dir)
    table = pl.read_parquet(feedback.feedback_run(run_dir, injected=True, now=NOW))
    nodes, _q = ingest.drop_empty(registry.call_target(cfg.data))
    base = table.select("node_id").join(
        nodes.select("node_id", "access_count")
        if "access_count" in nodes.columns
        else nodes.select("node_id", access_count=pl.lit(0)),
        on="node_id",
        how="left",
    )
    added = (table["access_count"] - base["access_count"].fill_null(0)).sum()
    assert (
        added == pl.read_parquet(run_dir / "recall.parquet")["query_id"].n_unique()
    )  # one injected node per query
    assert json.loads((run_dir / "manifest.json").read_text())["config"]["inject"]["max_nodes"] == 1


def test_feeding_runs_out_of_order_gives_the_same_table():
    """Feeding the 12-05 run and then the 12-01 run keeps both days (the window ends on the latest
    day seen, 12-05), as the other order does; times keep the latest."""
    dec1 = dt.datetime(2025, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    dec5 = dt.datetime(2025, 12, 5, 9, 0, tzinfo=dt.timezone.utc)
    table = pl.DataFrame({"node_id": ["a", "b"], "pagerank": [0.5, 0.5]})
    a = feedback.accesses(pl.DataFrame({"query_id": ["q"], "node_id": ["a"], "rank": [1]}))
    late_first = feedback.apply(feedback.apply(table, a, dec5), a, dec1)
    early_first = feedback.apply(feedback.apply(table, a, dec1), a, dec5)
    assert late_first["access_days"].to_list() == [
        [dt.date(2025, 12, 1), dt.date(2025, 12, 5)],
        [],
    ]
    assert late_first["hits_30d"].to_list() == [2, 0]
    assert late_first["last_access_at"].to_list() == [dec5, None]
    assert late_first["computed_at"].to_list() == [dec5, dec5]
    assert late_first.equals(early_first)
