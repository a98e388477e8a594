"""ReMe's persisted BM25 slot layout (``data.keyword_slots=true``, ``adapters/reme_slots.py``): read
from the pickle's opcodes, never unpickled; the index layout is ReMe's ``BM25Index._snapshot``
(agentscope-ai/ReMe @ c8e12487), written here with ``pickle`` as ReMe's ``dump`` writes it."""

import json
import pickle

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from pipeline.adapters import reme, reme_slots
from pipeline.ops import reme_bm25
from pipeline.run import runner
from pipeline.synth.reme_store import chunk_record, file_node, write_store


def _snapshot(doc_ids, live, vocab=("apple", "doc_ids")):
    """BM25Index._snapshot's fields (the arrays as ReMe keeps them)."""
    n = len(doc_ids)
    deleted = np.ones(n, bool)
    deleted[list(live.values())] = False
    return {
        "tokenizer_config": {"class": "RegexTokenizer", "filter_stopwords": True},
        "tokenizer_fingerprint": "7748e1d5a050",
        "vocab": {w: i for i, w in enumerate(vocab)},  # "doc_ids" as a term comes first
        "doc_ids": doc_ids,
        "doc_id_to_idx": live,
        "doc_lens": np.ones(n, np.int32),
        "deleted": deleted,
        "doc_token_ids": [np.zeros(1, np.int32) for _ in range(n)],
        "posting_doc_idxs": {0: np.arange(n, dtype=np.int32)},
        "posting_tfs": {0: np.ones(n, np.int32)},
        "k1": 1.5,
        "b": 0.75,
    }


@pytest.mark.parametrize("protocol", [4, 5])
def test_slot_layout_reads_live_slots_and_counts_deleted_ones(tmp_path, protocol):
    # b was deleted from slot 1 and added again at slot 3 (a lazily deleted slot stays)
    ids = ["a" * 64, "b" * 64, "c" * 64, "b" * 64]
    live = {"a" * 64: 0, "c" * 64: 2, "b" * 64: 3}
    (tmp_path / "keyword_index").mkdir()
    data = pickle.dumps(_snapshot(ids, live), protocol=protocol)
    (tmp_path / "keyword_index" / reme_slots.PICKLE).write_bytes(data)
    assert reme_slots.slot_layout(tmp_path) == (live, 4)
    # one live document: pickle's single APPEND / SETITEM forms
    one = pickle.dumps(_snapshot(["a" * 64], {"a" * 64: 0}), protocol=protocol)
    (tmp_path / "keyword_index" / reme_slots.PICKLE).write_bytes(one)
    assert reme_slots.slot_layout(tmp_path) == ({"a" * 64: 0}, 1)
    (tmp_path / "keyword_index" / reme_slots.PICKLE).write_bytes(b"\x80\x04N.")  # None
    assert reme_slots.slot_layout(tmp_path) is None


def test_deleted_slots_stay_in_the_score_array():
    # rows r0, r1 at slots 2 and 0 of 3; slot 1 deleted: length 0, score 0, N = 2
    tf = sp.csr_matrix(np.array([[1, 0], [1, 1]], np.float32))
    csc, lens, rows = reme_bm25.slots(tf, np.array([0, 1]), np.array([2, 0]), 3)
    assert rows.tolist() == [1, -1, 0] and lens.tolist() == [2, 0, 1]
    s = reme_bm25.scores(csc, lens, [0], 1.5, 0.75)
    # t0 in both live docs: idf = ln(1 + 0.5/2.5) = ln 1.2; avgdl 1.5; norm(|d|=2) = 1.5·(0.25 +
    # 0.75·2/1.5) = 1.875, norm(|d|=1) = 1.125: 0.182322·2.5/2.875 = 0.158541, ·2.5/2.125 = 0.214496
    assert s[1] == 0 and abs(float(s[0]) - 0.158541) < 1e-6 and abs(float(s[2]) - 0.214496) < 1e-6


def test_keyword_slots_order_ties_as_the_loaded_index(compose, tmp_path):
    """Two chunks with one text tie; ReMe's rebuilt index orders them by the chunk store, its
    loaded one by its slots (here the other way round, a deleted slot before them)."""
    ws = tmp_path / "ws"
    a, c = "daily/2026-01-01/x.md", "digest/y.md"
    recs = [chunk_record(a, 1, 2, "apple pie"), chunk_record(c, 1, 2, "apple pie")]
    recs.append(chunk_record(c, 3, 4, "banana bread"))
    files = [
        file_node(a, 1e9, [], [recs[0]["id"]]),
        file_node(c, 1e9, [], [recs[1]["id"], recs[2]["id"]]),
    ]
    write_store(ws, files, recs)
    ids = [recs[2]["id"], "f" * 64, recs[0]["id"], recs[1]["id"]]
    live = {recs[2]["id"]: 0, recs[0]["id"]: 2, recs[1]["id"]: 3}
    (ws / "metadata" / "keyword_index").mkdir(parents=True, exist_ok=True)
    (ws / "metadata" / "keyword_index" / reme_slots.PICKLE).write_bytes(
        pickle.dumps(_snapshot(ids, live), protocol=4)
    )
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"query_id": "q", "text": "apple"}) + "\n")
    got = {}
    for flag in ("false", "true"):
        over = ["data=reme", f"data.path={ws}", f"data.queries={q}", "preset=reme"]
        out = tmp_path / f"run-{flag}"
        runner.run(compose([*over, f"data.keyword_slots={flag}", f"out_dir={out}"]), out)
        got[flag] = pl.read_parquet(out / "recall.parquet").sort("rank")["node_id"].to_list()
    # rebuilt: store order a (x.md) then c; loaded: slots [banana, deleted, a, c], scores
    # [0, 0, s, s]; _top_k(…, 25): k = 2 positive < 4 slots, so argpartition then argsort, which
    # give slot 3 (c) before slot 2 (a) for this array
    s = np.array([0, 0, 1, 1], np.float32)
    top = np.argpartition(-s, 1)[:2]
    assert top[np.argsort(-s[top])].tolist() == [3, 2]
    assert got["false"] == [f"{a}#L1-L2", f"{c}#L1-L2"]
    assert got["true"] == [f"{c}#L1-L2", f"{a}#L1-L2"]
    assert reme.load(str(ws), keyword_slots=True).notes["keyword_slots"].endswith("unpickling")
