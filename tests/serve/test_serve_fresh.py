"""Freshness and concurrency of ``pipeline.serve``: an edited store is never served stale, a
precompute running during serving never yields an error or a mixed answer, two precomputes into
one namespace are serialised by its lock."""

from __future__ import annotations

import subprocess
import threading
import time

import polars as pl
import pytest

from pipeline.recallcache import layout
from pipeline.recallcache.reader import load_generation
from pipeline.run import precompute
from pipeline.serve import RecallCache, Service
from tests.helpers.serve_support import config, reference, rows_of, same_bits
from tests.run.test_precompute import make_data, precompute_argv


@pytest.fixture
def store(tmp_path):
    data = make_data(tmp_path / "data")
    cfg = config(tmp_path, "data=parquet", f"data.path={data}", "k=5")
    return data, cfg


def _queries(data) -> list[dict]:
    return pl.read_parquet(data / "queries.parquet").to_dicts()


def _scope(q: dict):
    return q["doc_scope"][0] if q["doc_scope"] else None


def test_an_edited_store_is_never_served_stale(store, tmp_path):
    data, cfg = store
    precompute.precompute(cfg)
    service = Service(cfg)  # serve.check_interval=0: the files are checked on every request
    try:
        qs = {q["query_id"]: q for q in _queries(data)}
        before = {qid: service.recall(q["text"], _scope(q)) for qid, q in qs.items()}
        assert {b["cache"] for b in before.values()} == {"hit"}
        make_data(data, changed="c2-04")  # one note of conversation c2 edited in place
        ref, _inj = reference(cfg, tmp_path, "edited-reference")
        for qid, q in qs.items():
            got = service.recall(q["text"], _scope(q))
            same_bits(got["rows"], rows_of(ref, qid))
            touched = _scope(q) in ("c2", None)  # the edit is in c2 and in the whole corpus
            assert got["cache"] == ("miss" if touched else "hit"), qid
            assert (got["scope_version"] != before[qid]["scope_version"]) == touched
        assert service.health()["reloads"] == 1
    finally:
        service.close()


def _cli(cfg, data) -> list[str]:
    return precompute_argv(data, cfg.cache_dir, cfg.out_dir)


def test_a_precompute_during_serving_never_gives_an_error_or_a_mixed_answer(store, tmp_path):
    data, cfg = store
    first = precompute.precompute(cfg)
    ns_dir = layout.namespace_dir(cfg.cache_dir, first["namespace"])
    old = load_generation(ns_dir / first["generation"], first["namespace"])
    make_data(data, changed="c2-04")
    qs = _queries(data)
    reader, service = RecallCache(cfg.cache_dir, check_interval=0), Service(cfg)
    seen, answers = [], []
    job = subprocess.Popen(_cli(cfg, data), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        while job.poll() is None or len(seen) < 50:
            for q in qs:
                e = reader.get(q["text"], q["doc_scope"])
                seen.append((e["generation"], e["query_id"], e["rows"], e["scope_version"]))
                answers.append((q["query_id"], service.recall(q["text"], _scope(q))))
            time.sleep(0.005)
        assert job.wait() == 0, job.stderr.read().decode()[-2000:]
        new_gen = layout.current(ns_dir)
        new = load_generation(ns_dir / new_gen, first["namespace"])
    finally:
        service.close()
    builds = {first["generation"]: old, new_gen: new}
    by_qid = {g: {e["query_id"]: e for e in b.values()} for g, b in builds.items()}
    for gen, qid, rows, version in seen:  # every lookup: exactly one build's entry
        want = by_qid[gen][qid]
        assert (rows, version) == (want["rows"], want["scope_version"])
    assert {g for g, *_ in seen} == {first["generation"], new_gen}  # both builds were read
    for qid, got in answers:  # the service answers for the edited store, hit or miss alike
        assert got["rows"] == by_qid[new_gen][qid]["rows"]
        assert got["scope_version"] == by_qid[new_gen][qid]["scope_version"]


def test_two_precomputes_into_one_namespace_are_serialised_by_its_lock(store):
    data, cfg = store
    ns = precompute.serve_keys.namespace("parquet", **precompute.recipe.namespace_parts(cfg))
    ns_dir = layout.namespace_dir(cfg.cache_dir, ns)
    done = {}
    with layout.locked(ns_dir):  # someone else holds the namespace
        t = threading.Thread(target=lambda: done.update(res=precompute.precompute(cfg)))
        t.start()
        time.sleep(2.0)
        assert t.is_alive() and layout.current(ns_dir) is None  # waiting, nothing written
    t.join(timeout=120)
    assert done["res"]["generation"] == "g-000001"
    # two processes at once: one builds, the other waits for it and finds every entry a hit
    jobs = [subprocess.Popen(_cli(cfg, data), stdout=subprocess.PIPE, text=True) for _ in range(2)]
    lasts = sorted(j.communicate()[0].strip().splitlines()[-1] for j in jobs)
    assert lasts == ["cache: 8 hits, 0 misses"] * 2
    make_data(data, changed="c1-03")
    jobs = [subprocess.Popen(_cli(cfg, data), stdout=subprocess.PIPE, text=True) for _ in range(2)]
    lasts = sorted(j.communicate()[0].strip().splitlines()[-1] for j in jobs)
    assert lasts == ["cache: 4 hits, 4 misses", "cache: 8 hits, 0 misses"]
    assert layout.current(ns_dir) == "g-000005"
    assert sorted(p.name for p in ns_dir.iterdir()) == ["CURRENT", "LOCK", "g-000004", "g-000005"]


def test_a_store_caught_mid_write_is_a_503_never_the_old_answer(store, tmp_path):
    from pipeline.serve.service import BadRequest

    data, cfg = store
    precompute.precompute(cfg)
    service = Service(cfg)
    q = _queries(data)[0]
    try:
        assert service.recall(q["text"], _scope(q))["cache"] == "hit"
        good = (data / "nodes.parquet").read_bytes()
        (data / "nodes.parquet").write_bytes(good[: len(good) // 2])  # half written
        for _ in range(2):  # every request until the store reads again: 503, not stale rows
            with pytest.raises(BadRequest) as err:
                service.recall(q["text"], _scope(q))
            assert err.value.status == 503
        make_data(data, changed="c1-00")
        ref, _inj = reference(cfg, tmp_path, "after-write")
        got = service.recall(q["text"], _scope(q))
        assert got["cache"] == "miss"  # q-c1-0: its scope c1 holds the edited note
        same_bits(got["rows"], rows_of(ref, q["query_id"]))
    finally:
        service.close()
