"""preset reme's order of equal scores and its keyword-only store, by hand: ReMe @ c8e12487
``search.py`` (``_rrf_merge``'s stable sort), ``local_file_store.py`` (the chunk store order,
``vector_search`` without an embedding store)."""

import json

import polars as pl
import pytest

from pipeline.adapters import reme
from pipeline.contract.errors import DataError
from pipeline.run import runner
from pipeline.stages.select import ranked
from pipeline.synth.reme_store import chunk_record, file_node, write_store


def test_tie_break_keeps_the_vector_list_then_the_keyword_list():
    # three nodes with one fused score: ReMe's merged dict holds the vector hits in vector order,
    # then keyword-only hits in keyword order; the stable sort keeps that order among equals
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 0],
            "node_idx": [0, 1, 2, 3],
            "score": [0.5, 0.5, 0.5, 0.9],
            "dense_rank": [None, 4, 2, 1],
            "lexical_rank": [1, 2, None, 3],
        }
    )
    assert ranked(cand)["node_idx"].to_list() == [3, 0, 1, 2]  # by node
    got = ranked(cand, (), ("dense_rank", "lexical_rank"))
    assert got["node_idx"].to_list() == [3, 2, 1, 0] and got["rank"].to_list() == [1, 2, 3, 4]


def _store(root):
    """Two files, three chunks without vectors (ReMe indexed them with no embedding model), the
    chunk store in the order c, a2, a1 (not the path order)."""
    a, c = "daily/2026-01-01/x.md", "digest/y.md"
    recs = [
        chunk_record(c, 1, 2, "apple pie recipe"),
        chunk_record(a, 5, 6, "apple pie recipe"),
        chunk_record(a, 1, 4, "banana bread"),
    ]
    files = [
        file_node(a, 1.0e9, [], [recs[1]["id"], recs[2]["id"]]),
        file_node(c, 1.0e9, [], [recs[0]["id"]]),
    ]
    write_store(root, files, recs)
    for path in (a, c):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x\n")


def test_a_store_without_vectors_is_searched_by_keyword_with_ties_in_store_order(compose, tmp_path):
    _store(tmp_path / "ws")
    ds = reme.load(str(tmp_path / "ws"))
    assert ds.notes["store_vectors"] == "none"
    order = dict(zip(ds.nodes["node_id"], ds.nodes["store_order"]))
    assert order == {
        "digest/y.md#L1-L2": 0,
        "daily/2026-01-01/x.md#L5-L6": 1,
        "daily/2026-01-01/x.md#L1-L4": 2,
    }
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"query_id": "q", "text": "apple"}) + "\n")
    over = ["data=reme", f"data.path={tmp_path / 'ws'}", f"data.queries={q}", "preset=reme"]
    out = runner.run(compose([*over, f"out_dir={tmp_path / 'run'}"]), tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet").sort("rank")
    # N = 3, df(apple) = 2: idf = ln(1 + 1.5/2.5) = ln 1.6; |d| = 3 for both (apple, pie,
    # recipe), avgdl = 8/3: 2.5 / (1 + 1.5·(0.25 + 0.75·3/(8/3))) = 2.5/2.640625; the two
    # chunks tie, and ReMe's argsort over two slots keeps its slot order: store order, not path
    # order (digest/y.md is stored first)
    assert rec["node_id"].to_list() == ["digest/y.md#L1-L2", "daily/2026-01-01/x.md#L5-L6"]
    want = 0.444974  # ln 1.6 = 0.470004; · 2.5/2.640625 = 0.444974 (float32 in ReMe)
    assert all(abs(s - want) < 1e-6 for s in rec["score"].to_list())
    assert rec["channel"].to_list() == ["lexical", "lexical"]
    assert any("keyword search only" in f for f in out["manifest"]["fallbacks"])


def test_an_empty_chunk_store_is_one_clear_error(tmp_path):
    # ReMe wrote such workspaces (LongMemEval case gpt4_a56e767c: a graph and a chunk store,
    # both empty); before, the run failed on "nodes table has no 'node_id' column"
    write_store(tmp_path / "ws", [], [])
    with pytest.raises(DataError) as e:
        reme.load(str(tmp_path / "ws"))
    assert "file_chunks_default_v1.jsonl.zst" in str(e.value)
    assert "holds no chunk" in str(e.value) and "index_update" in str(e.value)


def test_precompute_of_a_store_without_vectors_equals_the_run(compose, tmp_path):
    """The keyword-only fallback applies on every path: a precomputed entry (precompute.recall_rows,
    the path of serve's misses too) holds the run's rows, and the namespace is the given recipe's
    (what ``recall lookup`` / serve compute without the dataset)."""
    from pipeline.recallcache import keys, recipe
    from pipeline.run import precompute
    from tests.run.test_precompute import _cached, _plain

    _store(tmp_path / "ws")
    q = tmp_path / "q.jsonl"
    q.write_text(
        "".join(
            json.dumps({"query_id": f"q{i}", "text": t}) + "\n"
            for i, t in enumerate(["apple", "bread"])
        )
    )
    over = ["data=reme", f"data.path={tmp_path / 'ws'}", f"data.queries={q}", "preset=reme"]
    cfg = compose([*over, f"cache_dir={tmp_path / 'cache'}"])
    res = precompute.precompute(cfg)
    assert res["misses"] == 2
    assert res["namespace"] == keys.namespace(
        "reme", **recipe.namespace_parts(cfg)
    )  # what lookup and serve look for
    plain = _plain(compose([*over, "report=false"]), tmp_path)
    assert plain["channel"].unique().to_list() == ["lexical"]
    assert _cached(tmp_path).select(plain.columns).equals(plain)
