"""``pipeline.serve``: documented keys a client recomputes by hand, hits equal to the batch run bit
for bit, misses equal to a fresh ``recall run`` of the text, micro-batching, namespaces."""

from __future__ import annotations

import hashlib
import json
import threading

import polars as pl
import pytest
from omegaconf import OmegaConf

from pipeline.contract.registry import call_target
from pipeline.recallcache import keys
from pipeline.run import precompute
from pipeline.serve import RecallCache, Service
from tests.helpers.serve_support import config, reference, rows_of, same_bits


def test_text_key_is_sha256_of_the_documented_normalisation():
    assert keys.normalise("  a\r\nb\rc \t\n") == "a\nb\nc"
    want = hashlib.sha256(b"hello world").hexdigest()
    assert keys.text_key(" hello world\r\n") == want == keys.text_key("hello world")
    assert keys.text_key("Hello world") != want
    assert keys.text_key("caf\u00e9") == hashlib.sha256("café".encode()).hexdigest()
    # a plain query row: group, category, doc_scope and query_id are not part of the key
    row = {"query_id": "q1", "group": "g", "category": "x", "doc_scope": ["a"], "viewer": None}
    assert keys.query_key("hello world", row) == want
    # a field that changes the recall: text + "\n" + compact sorted JSON of the set fields
    extra = '{"context":["hi"],"viewer":"bob"}'
    assert keys.query_key("hello world ", {"viewer": "bob", "context": ["hi"], "now": None}) == (
        hashlib.sha256(f"hello world\n{extra}".encode()).hexdigest()
    )
    assert keys.scope_id(None) == "all"
    assert keys.scope_id(("c1",)) == hashlib.sha256(b'["c1"]').hexdigest()[:12]
    two = hashlib.sha256(b'["a", "b"]').hexdigest()[:12]
    assert keys.scope_id(keys.scope_tuple(["b", "a", "b"])) == two


@pytest.mark.parametrize("bad", ["../etc", "a/../b", "", "/abs", "a\x00b", ["ok", "./x"], [], 3])
def test_a_bad_scope_is_refused(bad):
    from pipeline.contract.errors import ConfigError

    with pytest.raises(ConfigError):
        keys.scope_tuple(bad)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The bundled sample precomputed (inject.format=reme) and its reference run."""
    tmp = tmp_path_factory.mktemp("sample")
    cfg = config(tmp, "data=sample", "inject.format=reme")
    res = precompute.precompute(cfg)
    recall, inj = reference(cfg, tmp, "reference")
    return cfg, res, recall, inj, tmp


def test_hit_rows_and_injection_equal_the_batch_run_bit_for_bit(sample):
    cfg, res, recall, inj, _tmp = sample
    queries = call_target(cfg.data).queries
    cache = RecallCache(cfg.cache_dir)
    assert cache.namespaces() == [res["namespace"]] and len(cache) == queries.height
    service = Service(cfg)
    try:
        plain = 0
        for row in queries.iter_rows(named=True):
            qid, text = row["query_id"], row["text"]
            want = rows_of(recall, qid)
            entry = cache.get(text, fields=row)
            assert entry["query_id"] == qid and entry["query_text"] == text
            same_bits(entry["rows"], want)
            block = inj.filter(pl.col("query_id") == qid)["text"].to_list()
            assert entry["injection"] == (block[0] if block else None)
            if row["context"] or row["viewer"]:  # keyed with its fields: not a plain text lookup
                assert cache.get(text) is None
                continue
            plain += 1
            got = service.recall(f"\r\n {text}  ", k=None)  # the same key after normalisation
            assert set(got) == {"rows", "injection", "cache", "scope_version"}
            assert got["cache"] == "hit" and got["scope_version"] == entry["scope_version"]
            same_bits(got["rows"], want)
            assert got["injection"] == entry["injection"]
            json.dumps(got)  # the body is JSON as it stands
        assert plain >= 20
        assert service.recall(text, k=3)["rows"] == got["rows"][:3]
    finally:
        service.close()


TEXTS = [
    ("how do I rotate the warehouse credentials?", None),
    ("who approves a new PII source?", None),
    ("orders connector lag", "procedures"),
    ("kickoff of the lakehouse migration", ["events", "projects"]),
    ("retention of customer addresses", None),
    ("who is Ravi Menon", "people"),
]


def test_misses_equal_a_fresh_run_of_their_texts_and_are_micro_batched(sample):
    cfg, _res, _recall, _inj, tmp = sample
    ds = call_target(cfg.data)
    q = pl.DataFrame(
        {
            "query_id": [f"new{i}" for i in range(len(TEXTS))],
            "text": [t for t, _s in TEXTS],
            "doc_scope": [
                None if s is None else ([s] if isinstance(s, str) else s) for _t, s in TEXTS
            ],
        },
        schema={"query_id": pl.String, "text": pl.String, "doc_scope": pl.List(pl.String)},
    )
    ref, ref_inj = reference(cfg, tmp, "misses-reference", dataset=ds.part(q))
    service = Service(OmegaConf.merge(cfg, {"serve": {"batch_window_ms": 200}}))
    got: dict = {}
    try:
        threads = [
            threading.Thread(target=lambda i=i, t=t, s=s: got.update({i: service.recall(t, s)}))
            for i, (t, s) in enumerate(TEXTS)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert service.batcher.batches < len(TEXTS)  # computed together, not one by one
        for i in range(len(TEXTS)):
            assert got[i]["cache"] == "miss"
            same_bits(got[i]["rows"], rows_of(ref, f"new{i}"))
            block = ref_inj.filter(pl.col("query_id") == f"new{i}")["text"].to_list()
            assert got[i]["injection"] == (block[0] if block else None)
        again = service.recall(*TEXTS[0])
        assert again["cache"] == "hit" and again["rows"] == got[0]["rows"]  # kept in memory
        assert service.prefetch(*TEXTS[0]) is None  # nothing to do for a hit
        ahead = service.prefetch("the next turn: who approves a new PII source?")
        entry = ahead.result(timeout=60)
        nxt = service.recall("the next turn: who approves a new PII source?")
        assert nxt["cache"] == "hit" and nxt["rows"] == entry["rows"] and entry["rows"]
        oks = service.recall(TEXTS[0][0], format="oks")["injection"]
        assert oks.splitlines()[0] == "## 相关记忆"  # OKS's hook section, rendered on demand
    finally:
        service.close()


def test_two_datasets_share_one_cache_dir_side_by_side(sample, tmp_path):
    from tests.run.test_precompute import make_data

    cfg, res, _recall, _inj, _tmp = sample
    data = make_data(tmp_path / "data")
    other = config(tmp_path, "data=parquet", f"data.path={data}", f"cache_dir={cfg.cache_dir}")
    before = {
        p: p.read_bytes()
        for p in precompute.live(cfg.cache_dir, res["namespace"]).rglob("*.parquet")
    }
    got = precompute.precompute(other)
    assert got["namespace"] != res["namespace"]
    assert RecallCache(cfg.cache_dir).namespaces() == sorted([res["namespace"], got["namespace"]])
    after = {
        p: p.read_bytes()
        for p in precompute.live(cfg.cache_dir, res["namespace"]).rglob("*.parquet")
    }
    assert after == before  # the sample's entries are untouched
    q = pl.read_parquet(data / "queries.parquet").row(0, named=True)
    entry = RecallCache(cfg.cache_dir, got["namespace"]).get(q["text"], q["doc_scope"])
    assert entry["query_id"] == q["query_id"]
    assert RecallCache(cfg.cache_dir, res["namespace"]).get(q["text"], q["doc_scope"]) is None
    with pytest.raises(Exception, match="several namespaces"):
        RecallCache(cfg.cache_dir).get("x")


def test_another_format_on_demand_equals_a_run_with_that_inject_format(sample):
    """The recipe injects ReMe blocks; asking a hit for ``format=bme`` renders BME's block from the
    entry's rows, which equals the block a run with ``inject.format=bme`` writes for that query."""
    cfg, _res, _recall, _inj, tmp = sample
    bme_cfg = OmegaConf.merge(cfg, {"inject": {"format": "bme"}})
    _ref, ref_inj = reference(bme_cfg, tmp, "bme-reference")
    queries = call_target(cfg.data).queries.filter(
        pl.col("context").list.len().fill_null(0).eq(0) & pl.col("viewer").is_null()
    )
    service = Service(cfg)
    try:
        for qid, text in zip(queries["query_id"], queries["text"], strict=True):
            got = service.recall(text, format="bme")
            want = ref_inj.filter(pl.col("query_id") == qid)["text"].to_list()
            assert got["cache"] == "hit" and got["injection"] == (want[0] if want else None), qid
    finally:
        service.close()
