"""recall feedback RUN --format reme: ReMe's access log merged per (path, day), by hand; idempotent,
atomic (a failed write leaves the old file), and nothing but meta/access_log.json ever changes."""

import datetime as dt
import hashlib
import json
import os
import stat

import polars as pl
import pytest

import pipeline.cli.main as cli
from pipeline.contract.errors import DataError
from pipeline.run import runner
from pipeline.writeback import reme as wb
from tests.adapters.test_adapter_reme import A, B, C, D, _queries, build

NOW = dt.datetime(2026, 1, 10, 9, 30, tzinfo=dt.timezone.utc)


def test_merge_by_hand():
    old = {
        "version": 1,
        "computed_at": "2026-01-05T00:00:00Z",
        "paths": {
            "x.md": {"last_read": "2026-01-05T08:00:00Z", "hit_days": ["2025-12-01", "2026-01-05"]},
            "y.md": {"last_read": "2025-11-01T08:00:00Z", "hit_days": ["2025-11-01"]},
        },
    }
    new = wb.merge(old, ["x.md", "z.md", "x.md"], NOW)
    # 30 days up to 2026-01-10 are 2025-12-12 … 2026-01-10: 2025-12-01 and 2025-11-01 fall out
    assert new == {
        "version": 1,
        "computed_at": "2026-01-10T09:30:00Z",
        "window_days": 30,
        "paths": {
            "x.md": {
                "last_read": "2026-01-10T09:30:00Z",
                "hit_days": ["2026-01-05", "2026-01-10"],
                "last_hit_count_30d": 2,
            },
            "y.md": {"last_read": "2025-11-01T08:00:00Z", "hit_days": [], "last_hit_count_30d": 0},
            "z.md": {
                "last_read": "2026-01-10T09:30:00Z",
                "hit_days": ["2026-01-10"],
                "last_hit_count_30d": 1,
            },
        },
    }
    later = wb.merge(new, ["x.md"], NOW + dt.timedelta(hours=5))  # same day: counted once
    assert later["paths"]["x.md"]["last_hit_count_30d"] == 2
    assert later["paths"]["x.md"]["last_read"] == "2026-01-10T14:30:00Z"


def test_merging_runs_out_of_order_gives_the_same_log():
    """12-05 then 12-01 keeps both days (the window ends on the latest day seen), like the other
    order; last_read and computed_at keep the latest time."""
    dec1 = dt.datetime(2025, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    dec5 = dt.datetime(2025, 12, 5, 9, 0, tzinfo=dt.timezone.utc)
    late_first = wb.merge(wb.merge(None, ["a.md"], dec5), ["a.md", "b.md"], dec1)
    assert late_first == {
        "version": 1,
        "computed_at": "2025-12-05T09:00:00Z",
        "window_days": 30,
        "paths": {
            "a.md": {
                "last_read": "2025-12-05T09:00:00Z",
                "hit_days": ["2025-12-01", "2025-12-05"],
                "last_hit_count_30d": 2,
            },
            "b.md": {
                "last_read": "2025-12-01T09:00:00Z",
                "hit_days": ["2025-12-01"],
                "last_hit_count_30d": 1,
            },
        },
    }
    assert wb.merge(wb.merge(None, ["a.md", "b.md"], dec1), ["a.md"], dec5) == late_first


def test_an_entry_without_hit_days_keeps_its_count_unless_hit():
    """A count another writer kept (last_read and last_hit_count_30d, no hit_days) is not reset by
    a run that did not hit the path; a hit starts hit_days from its last_read day."""
    old = {
        "version": 1,
        "computed_at": "2026-01-09T00:00:00Z",
        "paths": {
            "kept.md": {"last_read": "2026-01-08T08:00:00Z", "last_hit_count_30d": 5},
            "hit.md": {"last_read": "2026-01-08T08:00:00Z", "last_hit_count_30d": 5},
        },
    }
    new = wb.merge(old, ["hit.md"], NOW)
    assert new["paths"] == {
        "kept.md": {"last_read": "2026-01-08T08:00:00Z", "last_hit_count_30d": 5},
        "hit.md": {
            "last_read": "2026-01-10T09:30:00Z",
            "last_hit_count_30d": 2,
            "hit_days": ["2026-01-08", "2026-01-10"],
        },
    }


def _hashes(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def run_dir(compose, tmp_path):
    store = tmp_path / "store"
    build(store, signals_files=False)
    q = tmp_path / "q.parquet"
    # q1 by vector finds s1.jsonl's chunks and guide.md; q2 by words finds the jwt and oauth chunks
    _queries(
        q,
        [
            {"query_id": "q1", "text": "zzz", "embedding": [0.0, 0.0, 1.0, 1.0]},
            {"query_id": "q2", "text": "rotation keys", "embedding": [1.0, 0.0, 0.0, 0.0]},
        ],
    )
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={q}",
            "preset=reme",
            "k=2",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    runner.run(cfg, tmp_path / "run")
    return tmp_path / "run", store


def test_cli_merges_hits_idempotently_and_touches_nothing_else(run_dir):
    run, store = run_dir
    before = _hashes(store)
    rows = pl.read_parquet(run / "recall.parquet")
    assert (
        cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-10T09:30:00Z"]) == 0
    )
    log = store / "meta" / "access_log.json"
    got = json.loads(log.read_text())
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(log.stat().st_mode) == 0o666 & ~mask  # 0644 under umask 022, not 0600
    hit = sorted(set(rows["doc_id"]))
    # q1 (no word matches): the vector list, guide.md and s1.jsonl#L1-L2; q2: jwt#L5-L9 (vector and
    # both words) then oauth (vector 0.6, "rotation"): RRF 0.7/62 + 0.3/(60+r) beats jwt#L10-L14
    assert hit == sorted([A, B, C, D])
    assert sorted(got["paths"]) == hit and all(
        e["last_hit_count_30d"] == 1 for e in got["paths"].values()
    )
    first = log.read_bytes()
    assert (
        cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-10T09:30:00Z"]) == 0
    )
    assert log.read_bytes() == first  # the same run again: byte-identical
    cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-10T20:00:00Z"])
    assert all(e["last_hit_count_30d"] == 1 for e in json.loads(log.read_text())["paths"].values())
    cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-11T08:00:00Z"])
    assert all(
        e["hit_days"] == ["2026-01-10", "2026-01-11"]
        for e in json.loads(log.read_text())["paths"].values()
    )
    after = _hashes(store)
    assert (
        after.pop("meta/access_log.json") and after == before
    )  # bodies, front matter, index: untouched


def test_the_next_run_reads_the_log_as_hits(run_dir, compose, tmp_path):
    run, store = run_dir
    cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-03T00:00:00Z"])
    from pipeline.adapters import reme

    ds = reme.load(str(store))
    hits = dict(zip(ds.nodes["doc_id"], ds.nodes["hits_30d"]))
    assert {d for d, h in hits.items() if h == 1} == set(
        pl.read_parquet(run / "recall.parquet")["doc_id"]
    )
    assert ds.freshness["access_log"]["status"] == "fresh"


def test_a_failed_write_leaves_the_old_file(run_dir, monkeypatch):
    run, store = run_dir
    cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-10T09:30:00Z"])
    log = store / "meta" / "access_log.json"
    old = log.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-12T09:30:00Z"])
    assert log.read_bytes() == old
    assert sorted(p.name for p in log.parent.iterdir()) == ["access_log.json"]  # no temp file left


def test_another_version_is_never_merged_into(run_dir):
    run, store = run_dir
    (store / "meta").mkdir(exist_ok=True)
    (store / "meta" / "access_log.json").write_text('{"version": 7, "paths": {}}')
    with pytest.raises(DataError, match="access log version 7.*move the old file away"):
        wb.write_back(
            run,
            json.loads((run / "manifest.json").read_text())["config"],
            pl.read_parquet(run / "recall.parquet"),
            dt.datetime(2026, 1, 10, tzinfo=dt.timezone.utc),
            None,
        )


def test_a_kill_mid_write_leaves_the_old_file(run_dir):
    import subprocess
    import sys

    run, store = run_dir
    cli.main(["feedback", str(run), "--format", "reme", "--now", "2026-01-10T09:30:00Z"])
    log = store / "meta" / "access_log.json"
    old = log.read_bytes()
    args = [sys.executable, "-m", "pipeline.cli.main", "feedback", str(run), "--format", "reme"]
    env = {**os.environ, "RECALL_FAULT_AT": "write:access_log.json"}  # SIGKILL half-way (io.py)
    got = subprocess.run([*args, "--now", "2026-01-12T09:30:00Z"], env=env, capture_output=True)
    assert got.returncode == -9 and log.read_bytes() == old
