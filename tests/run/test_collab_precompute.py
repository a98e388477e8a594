"""Precompute with the collab channel (preset=oks_team): a new injection-log row of one team
misses exactly that team's queries; the other team's cached recall is served unchanged. The
reference time is pinned to the newest-stamp rule (``default_now=null``): with the preset's
``start`` every precompute has a new time and recomputes every entry (``tests/run/test_clock.py``)."""

from __future__ import annotations

import polars as pl

from pipeline.contract.dataset import Dataset
from pipeline.run import precompute
from tests.helpers.paths import TESTS_DATA

SLUGS = ["a", "b", "c", "d"]
TEXTS = ["alpha apple", "beta berry", "gamma grape", "delta date"]


def _dataset(log_rows):
    nodes = pl.DataFrame(
        {
            "node_id": [f"{t}/{s}" for t in ("t1", "t2") for s in SLUGS],
            "doc_id": [f"{t}/{s}.md" for t in ("t1", "t2") for s in SLUGS],
            "text": TEXTS * 2,
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q1b", "q2"],
            "text": ["alpha please", "beta please", "alpha please"],
            "team": ["t1", "t1", "t2"],
            "doc_scope": [["t1"], ["t1"], ["t2"]],
        }
    )
    log = pl.DataFrame(
        log_rows,
        schema={"team": pl.String, "session_id": pl.String, "slugs": pl.List(pl.String)},
        orient="row",
    )
    return Dataset(name="teams", nodes=nodes, queries=queries, tables={"access_log": log})


BASE = [("t1", "s1", ["a", "b"]), ("t1", "s2", ["a", "c"]), ("t2", "s1", ["a", "d"])]


def test_new_log_row_recomputes_exactly_its_team(compose, tmp_path):
    cfg = compose(
        ["preset=oks_team", "default_now=null", "embed=hashing", f"cache_dir={tmp_path / 'c'}"]
    )
    first = precompute.precompute(cfg, _dataset(BASE))
    assert (first["hits"], first["misses"]) == (0, 3)
    again = precompute.precompute(cfg, _dataset(BASE))
    assert (again["hits"], again["misses"]) == (3, 0)
    grown = precompute.precompute(cfg, _dataset([*BASE, ("t2", "s2", ["a", "b"])]))
    assert (grown["hits"], grown["misses"]) == (2, 1)  # q2 (team t2) only
    other = precompute.precompute(
        cfg, _dataset([*BASE, ("t2", "s2", ["a", "b"]), ("t1", "s3", ["b", "d"])])
    )
    assert (other["hits"], other["misses"]) == (1, 2)  # q1, q1b (team t1)


def test_precompute_after_a_new_row_equals_a_plain_run(compose, tmp_path):
    from pipeline.run import runner

    grown = [*BASE, ("t2", "s2", ["a", "b"]), ("t2", "s3", ["a", "b"])]
    cfg = compose(
        ["preset=oks_team", "default_now=null", "embed=hashing", f"cache_dir={tmp_path / 'c'}"]
    )
    precompute.precompute(cfg, _dataset(BASE))
    precompute.precompute(cfg, _dataset(grown))
    cached = precompute.served(tmp_path / "c")
    plain_cfg = compose(
        [
            "preset=oks_team",
            "default_now=null",
            "embed=hashing",
            f"cache_dir={tmp_path / 'p'}",
            "report=false",
        ]
    )
    runner.run(plain_cfg, tmp_path / "plain", dataset=_dataset(grown))
    plain = pl.read_parquet(tmp_path / "plain" / "recall.parquet").sort(["query_id", "rank"])
    assert cached.equals(plain)
    # the grown t2 log makes b a collab candidate of q2 (co-used with its hit page a)
    q2 = plain.filter(pl.col("query_id") == "q2")
    assert (
        "t2/b" in q2["node_id"].to_list()
        and q2.filter(pl.col("node_id") == "t2/b")["collab"][0] > 0
    )


def test_other_teams_rows_leave_a_teams_recall_bytes(compose, tmp_path):
    """Full run (preset=oks_team, injection too): team t2's log rows change q2's recall but not
    a byte of team t1's rows of recall.parquet / injection.parquet."""
    from pipeline.run import runner

    def t1_bytes(rows, name):
        cfg = compose(
            ["preset=oks_team", "default_now=null", "embed=hashing", f"cache_dir={tmp_path / name}"]
        )
        runner.run(cfg.copy(), tmp_path / name, dataset=_dataset(rows))
        out = {}
        for table in ("recall", "injection"):
            df = pl.read_parquet(tmp_path / name / f"{table}.parquet")
            out[table] = df.filter(pl.col("query_id") != "q2")
            out[f"{table}_q2"] = df.filter(pl.col("query_id") == "q2")
        return out

    alone = t1_bytes(BASE, "alone")
    more = [("t2", "s2", ["a", "b"]), ("t2", "s3", ["a", "b"]), ("t2", "s4", ["c", "a"])]
    mixed = t1_bytes([*BASE, *more], "mixed")
    assert alone["injection"].height == 2  # q1, q1b inject (prompts of ≥ 6 characters)
    for table in ("recall", "injection"):
        assert alone[table].equals(mixed[table])
    assert not alone["recall_q2"].equals(mixed["recall_q2"])  # the rows did reach their own team


def test_oks_instance_without_an_inject_log_precomputes(compose, tmp_path):
    """An OKS instance whose hook never wrote ``records/inject.jsonl``: every query's team-log
    version is the hash of zero rows (sha256 of "0"), and precompute computes every query."""
    import hashlib
    import shutil

    from pipeline.contract.registry import call_target
    from pipeline.recallcache import recipe

    store = tmp_path / "oks"
    shutil.copytree(TESTS_DATA / "oks_store", store)
    (store / "records" / "inject.jsonl").unlink()
    cfg = compose(
        [
            "data=oks",
            f"data.path={store}",
            f"data.queries={store / 'queries.jsonl'}",
            "preset=oks_team",
            "default_now=null",
            "embed=hashing",
            f"cache_dir={tmp_path / 'c'}",
        ]
    )
    ds = call_target(cfg.data)
    assert ds.use_log().height == 0
    empty = hashlib.sha256(b"0").hexdigest()[:16]
    assert recipe.team_log_versions(ds.use_log(), ds.queries) == [empty] * ds.queries.height
    done = precompute.precompute(cfg, ds)
    assert (done["hits"], done["misses"]) == (0, ds.queries.height)
