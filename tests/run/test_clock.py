"""The reference time of a query without its own ``now`` (``default_now``, ``pipeline/run/clock.py``;
issue #53, OKS (d)): ``preset=oks`` reads the memory curve at the run's start by the wall clock, as
OKS does, records that time in the manifest so ``default_now=`` / ``now=`` reproduce the run, and
``recall serve`` computes a miss at the time of the generation it serves; a query's own ``now``
still wins, and the newest-timestamp rule stays the default elsewhere."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from omegaconf import OmegaConf

from pipeline.contract.registry import call_target
from pipeline.ops.scope import run_groups
from pipeline.recallcache import keys, recipe
from pipeline.run import clock, precompute
from pipeline.serve import Service
from tests.helpers.isolated import fresh_run
from tests.helpers.paths import TESTS_DATA
from tests.helpers.serve_support import config, rows_of, same_bits

STORE = TESTS_DATA / "oks_store"
UTC = dt.timezone.utc
T1, T2 = "2026-12-04T09:00:00+00:00", "2027-03-01T09:00:00+00:00"


def test_resolve_default_time_and_the_recipe():
    cfg = OmegaConf.create({"default_now": "start", "k": 5})
    assert clock.resolve(cfg, T1).default_now == T1 and cfg.default_now == "start"
    assert clock.default_time(clock.resolve(cfg, T1)) == dt.datetime(2026, 12, 4, 9, tzinfo=UTC)
    for other in ({"default_now": None}, {"default_now": T2}, {"k": 5}):
        same = OmegaConf.create(other)
        assert clock.resolve(same, T1) is same  # only `start` is resolved
    assert clock.default_time(OmegaConf.create({"default_now": None})) is None
    before = dt.datetime.now(UTC).replace(microsecond=0)
    at = dt.datetime.fromisoformat(clock.resolve(cfg).default_now)
    assert before <= at <= dt.datetime.now(UTC)
    # the resolved time is in the entries' recipe, not in the namespace's; unset, it is left out
    # (a config without the key hashes as before the key existed)
    a, b = clock.resolve(cfg, T1), clock.resolve(cfg, T2)
    assert recipe.recipe_hash(a) != recipe.recipe_hash(b)
    assert recipe.recipe_hash(a, versions=False) == recipe.recipe_hash(b, versions=False)
    unset = OmegaConf.create({"default_now": None, "k": 5})
    assert recipe.recipe_hash(unset) == recipe.recipe_hash(OmegaConf.create({"k": 5}))


def test_a_querys_own_now_wins_then_default_then_the_newest_stamp():
    nodes = pl.DataFrame(
        {
            "node_id": ["a", "b"],
            "created_at": [
                dt.datetime(2026, 1, 1, tzinfo=UTC),
                dt.datetime(2026, 6, 1, tzinfo=UTC),
            ],
        }
    )
    own = dt.datetime(2026, 3, 1, tzinfo=UTC)
    queries = pl.DataFrame({"query_id": ["q1", "q2"], "now": [own, None]})
    start, fixed = dt.datetime(2026, 12, 4, tzinfo=UTC), dt.datetime(2025, 1, 1, tzinfo=UTC)

    def times(**kw):
        return {int(q): t for _k, _rows, qs, t in run_groups(nodes, queries, **kw) for q in qs}

    assert times(default=start) == {0: own, 1: start}  # a query's now wins over default_now
    assert times() == {0: own, 1: dt.datetime(2026, 6, 1, tzinfo=UTC)}  # the newest stamp
    assert times(now=fixed, default=start) == {0: fixed, 1: fixed}  # the config's now: all


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Preset oks with OKS's native backend (its score includes the memory curve), run at its
    start, then again at the recorded time, by ``now=``, and by the newest-date rule."""
    tmp = tmp_path_factory.mktemp("clock")
    over = ["data=oks", f"data.path={STORE}", f"data.queries={STORE / 'queries.jsonl'}",
            "data.goals=none", "preset=oks", "oks_backend.search_backend=native"]  # fmt: skip
    cfg = config(tmp, *over)
    before = dt.datetime.now(UTC).replace(microsecond=0)
    start = fresh_run(cfg, tmp, "start")
    after = dt.datetime.now(UTC)
    at = start.manifest["config"]["default_now"]
    again = fresh_run(config(tmp, *over, f"default_now={at}"), tmp, "default-now")
    by_now = fresh_run(config(tmp, *over, f"now={at}"), tmp, "now")
    newest = fresh_run(config(tmp, *over, "default_now=null"), tmp, "newest")
    return tmp, over, before, after, start, again, by_now, newest


def test_preset_oks_reads_the_memory_curve_at_the_runs_start(runs):
    _tmp, _over, before, after, start, again, by_now, newest = runs
    at = dt.datetime.fromisoformat(start.manifest["config"]["default_now"])
    assert before <= at <= after  # the wall clock at the run's start, recorded
    assert again.recall_bytes() == start.recall_bytes()  # default_now=<recorded> reproduces it
    assert by_now.recall_bytes() == start.recall_bytes()  # so does now= (no query has its own)
    # the newest-date rule (2026-06-01, the newest page) scores the memory curve otherwise
    a, b = start.recall(), newest.recall()
    assert a["node_id"].to_list() != b["node_id"].to_list() or not np.array_equal(
        a["score"].to_numpy(), b["score"].to_numpy()
    )


def test_precompute_records_the_time_and_serve_computes_misses_at_it(runs, monkeypatch):
    tmp, over, *_rest = runs
    cfg = config(tmp / "cache-side", *over)
    monkeypatch.setattr(clock, "wall_clock", lambda: T1)
    first = precompute.precompute(cfg)
    man = json.loads((Path(first["root"]) / "_manifest.json").read_text())
    assert man["default_now"] == T1 and first["misses"] == 5
    monkeypatch.setattr(clock, "wall_clock", lambda: "2099-01-01T00:00:00+00:00")  # not used
    service = Service(cfg)
    try:
        assert service.cfg.default_now == T1  # the served generation's time, not the clock's
        ds = call_target(cfg.data)
        for text in ds.queries["text"].to_list():
            assert service.recall(text)["cache"] == "hit"  # same recipe as the precompute's
        new = "rollback plan before a deploy"
        got = service.recall(new)
        assert got["cache"] == "miss"
        q = pl.DataFrame({"query_id": ["n0"], "text": [new]})
        ref = fresh_run(
            config(tmp, *over, f"default_now={T1}"), tmp, "miss-ref", dataset=ds.part(q)
        )
        same_bits(got["rows"], rows_of(ref.recall(), "n0"))
        # a later precompute: the same namespace, a new time; the service follows it
        monkeypatch.setattr(clock, "wall_clock", lambda: T2)
        second = precompute.precompute(cfg)
        assert (
            second["namespace"]
            == first["namespace"]
            == keys.namespace(ds.name, **recipe.namespace_parts(cfg))
        )
        assert second["misses"] == 5  # every entry recomputed at the new time
        assert service.recall(ds.queries["text"][0])["cache"] == "hit"
        assert service.cfg.default_now == T2
        assert service.recall(new)["cache"] == "miss"  # the T1 computation is not reused
    finally:
        service.close()
