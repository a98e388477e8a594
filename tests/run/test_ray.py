"""``executor=ray``: query shards on a local 2-CPU Ray cluster give the same recall bytes and metrics
as the local executor; scopes stay whole in one shard; a missing Ray is a ConfigError naming the fix."""

import os
import sys

import numpy as np
import polars as pl
import pytest

from pipeline.contract import ingest, registry
from pipeline.contract.errors import ConfigError
from pipeline.ops.scope import run_groups
from pipeline.run import executor, runner
from tests.core.test_keys import COMMON as KEYS_COMMON
from tests.core.test_keys import assert_viewers_agree, two_viewers
from tests.helpers.isolated import fresh_run
from tests.run.test_precompute import make_data


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def _both(compose, tmp_path, overrides, shards):
    """The local and the Ray run, each with its own cache, output folder and memo (isolated)."""
    out = {}
    for ex in ("local", "ray"):
        cfg = compose(
            [
                *overrides,
                "embed=hashing",
                "report=false",
                f"executor={ex}",
                f"ray.shards={shards}",
                "ray.num_workers=2",
            ]
        )
        out[ex] = fresh_run(cfg, tmp_path, ex).result
    return out


def _assert_same(tmp_path, res):
    local, ray_ = (
        (tmp_path / ex / "out" / "recall.parquet").read_bytes() for ex in ("local", "ray")
    )
    assert ray_ == local
    assert res["ray"]["metrics"] == res["local"]["metrics"]
    for key in ("rows", "skipped"):
        assert res["ray"]["manifest"][key] == res["local"]["manifest"][key], key
    assert res["local"]["manifest"]["executor"] == {"name": "local"}


def test_sample_ray_equals_local(ray_cluster, compose, tmp_path):
    # PEDSA is computed per query column, so any sharding gives the same bytes
    res = _both(compose, tmp_path, ["preset=best", "diffuse=pedsa"], shards=5)
    _assert_same(tmp_path, res)
    info = res["ray"]["manifest"]["executor"]
    assert (info["name"], info["shards"], info["num_workers"]) == ("ray", 5, 2)
    assert sum(info["shard_queries"]) == 30 and info["workers"] <= 2
    assert res["ray"]["manifest"]["config"]["executor"] == "ray"


def test_sample_ppr_ray_equals_local(ray_cluster, compose, tmp_path):
    """PPR freezes each (query, component) part at its own convergence step, so cutting one scope's
    queries into shards gives the same bytes as one batch (the current `best` is PPR)."""
    res = _both(compose, tmp_path, ["preset=best"], shards=3)
    _assert_same(tmp_path, res)


def test_auto_ray_equals_local(ray_cluster, compose, tmp_path):
    """preset=auto decides per query group from the group's nodes, so shards decide alike."""
    res = _both(compose, tmp_path, ["preset=auto"], shards=3)
    _assert_same(tmp_path, res)
    decided = [
        [(e["features"], e["overrides"]) for e in res[ex]["manifest"]["auto"]]
        for ex in ("local", "ray")
    ]
    assert decided[0] == decided[1]
    assert [o for _f, o in decided[0]] == [{}, {}]  # two visible node sets, both with edges


def test_doc_scope_ray_equals_local(ray_cluster, compose, tmp_path):
    # whole scopes per shard: every scope's index and diffusion batch is the local one, so bytes match
    data = make_data(
        tmp_path / "data"
    )  # 3 conversations + queries without doc_scope, explicit edges
    res = _both(
        compose,
        tmp_path,
        [
            "data=parquet",
            f"data.path={data}",
            "preset=best",
            "diffuse=ppr",
            "k=5",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        shards=3,
    )
    _assert_same(tmp_path, res)
    assert res["ray"]["manifest"]["executor"]["shard_queries"] == [
        4,
        4,
    ]  # scopes c1+c2, c3+whole corpus


def test_shards_keep_scopes_whole():
    scopes = [["c1"], ["c2"], ["c1"], None, ["c3"], ["c2"], ["c1"], []]
    q = pl.DataFrame(
        {"query_id": [f"q{i}" for i in range(8)], "doc_scope": scopes},
        schema={"query_id": pl.String, "doc_scope": pl.List(pl.String)},
    )
    shards = executor.shard_queries(q, 3)
    assert [s.tolist() for s in shards] == [[0, 2, 6], [1, 3, 5], [4, 7]]
    seen = np.sort(np.concatenate(shards))
    assert seen.tolist() == list(range(8))
    for group in ([0, 2, 6], [1, 5], [3], [4], [7]):  # None is the whole corpus, [] sees nothing
        assert sum(set(group) <= set(s.tolist()) for s in shards) == 1
    plain = executor.shard_queries(q.drop("doc_scope"), 3)
    assert [s.tolist() for s in plain] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    with pytest.raises(ConfigError, match="ray.shards"):
        executor.shard_queries(q, 0)


def test_missing_ray_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'recall-pipeline\[ray\]'.*executor=local"):
        executor.import_ray()


def test_unknown_executor_lists_choices(compose, tmp_path):
    cfg = compose(["embed=hashing", "report=false", "executor=rai"])
    with pytest.raises(ConfigError, match=r"executor='rai'.*'ray'.*\['local', 'ray'\]"):
        runner.run(cfg, tmp_path / "x")


def test_worker_builds_corpus_work_once(ray_cluster, compose, tmp_path, monkeypatch):
    """Called in-process: two shards, one embedding of the nodes (in __init__) and one graph per
    query group's node table, however many shards the worker runs."""
    from collections import Counter

    from pipeline.contract.dataset import Dataset
    from pipeline.stages import embed, graph

    cfg = compose(["embed=hashing", "report=false", "preset=best"])
    ds = registry.call_target(cfg.data)
    calls = Counter()
    for mod, name in ((embed, "embed_nodes"), (graph, "build")):
        fn = getattr(mod, name)
        monkeypatch.setattr(
            mod, name, lambda *a, _fn=fn, _n=name, **k: calls.update([_n]) or _fn(*a, **k)
        )
    shipped = Dataset(ds.name, ds.nodes, ds.queries, ds.edges, None, ds.fingerprints, Counter())
    worker = executor.ShardWorker(
        executor.shard_config(cfg), [ray_cluster.put(shipped)], os.getcwd()
    )
    assert calls == {"embed_nodes": 1}
    out = worker({"shard": np.array([0, 1]), "qidx": [np.arange(0, 10), np.arange(10, 20)]})
    nodes, queries = ingest.drop_empty(ds)
    tables = {
        tuple(rows) for _k, rows, _q, _t in run_groups(nodes, queries[:20])
    }  # distinct visible sets
    assert calls == {"embed_nodes": 1, "build": len(tables)} and len(out["result"]) == 2
    worker({"shard": np.array([2]), "qidx": [np.arange(0, 20)]})
    assert calls == {"embed_nodes": 1, "build": len(tables)}  # a third shard reuses them all


def test_one_worker_two_shards_with_the_same_nodes_reordered_equals_local(
    ray_cluster, compose, tmp_path
):
    """Issue 26, item 1: one worker runs a shard whose pack holds u0's then u1's nodes and then one
    whose pack holds u1's then u0's; its memo, kept across shards, must not serve the second the
    first one's graph and hubs (it was keyed by an order-blind sum of row hashes)."""
    ds = two_viewers()
    ref = fresh_run(compose(KEYS_COMMON), tmp_path, "local", dataset=ds)
    cfg = compose([*KEYS_COMMON, "executor=ray", "ray.shards=2", "ray.num_workers=1"])
    got = fresh_run(cfg, tmp_path, "ray", dataset=ds)
    info = got.manifest["executor"]
    assert (info["shards"], info["workers"], info["shard_queries"]) == (2, 1, [2, 2])
    assert_viewers_agree(got.recall())
    assert got.recall_bytes() == ref.recall_bytes()
