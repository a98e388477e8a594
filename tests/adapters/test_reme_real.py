"""data=reme on a workspace ReMe itself wrote (tests/data/reme_lme_57f827a0, see its README): ReMe's
chunks, links and vectors load; preset=reme with stored query vectors ranks as ReMe's search_step
(reme/steps/index/search.py @ c8e12487), checked against a plain reimplementation written here."""

import base64
import json
import math
import re

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.adapters import reme
from pipeline.run import runner
from tests.helpers.paths import REPO, TESTS_DATA

WS = TESTS_DATA / "reme_lme_57f827a0"
META = WS / "metadata"


def _zst_rows(path):
    with pa.CompressedInputStream(pa.OSFile(str(path)), "zstd") as fh:
        return [json.loads(line) for line in fh.read().decode().splitlines() if line.strip()]


CHUNKS = _zst_rows(META / "file_store" / "file_chunks_default_v1.jsonl.zst")
GRAPH = _zst_rows(META / "file_graph" / "default.jsonl.zst")


def _vec(rec):
    return np.frombuffer(base64.b64decode(rec["_embedding_f16_b64"]), np.float16)


def test_loads_remes_chunks_links_and_vectors():
    ds = reme.load(str(WS))
    n = ds.nodes
    by_id = {c["id"]: c for c in CHUNKS}
    assert n.height == len(CHUNKS) == 59 and set(n["chunk_id"]) == set(by_id)
    for row in n.iter_rows(named=True):
        c = by_id[row["chunk_id"]]
        assert (row["text"], row["doc_id"], row["start_line"], row["end_line"]) == (
            c["text"],
            c["path"],
            c["start_line"],
            c["end_line"],
        )
        assert row["node_id"] == f"{c['path']}#L{c['start_line']}-L{c['end_line']}"
        np.testing.assert_array_equal(np.asarray(row["embedding"], np.float32), _vec(c))
    assert ds.notes["vector_model"] == "reme:cc5774137cbd-1024d"
    mtime = {g["path"]: g["st_mtime"] for g in GRAPH}
    assert [t.timestamp() for t in n["updated_at"]] == pytest.approx(
        [mtime[d] for d in n["doc_id"]], abs=1e-6
    )
    # every line-anchored link goes to each chunk of its target holding one of its lines
    spans = {}
    for c in CHUNKS:
        spans.setdefault(c["path"], []).append(c)
    want = set()
    for g in GRAPH:
        for lk in g["links"]:
            anchor = lk["target_anchor"]
            target = sorted(spans.get(lk["target_path"], []), key=lambda c: c["start_line"])
            ranges = [tuple(map(int, re.findall(r"\d+", p))) for p in (anchor or "").split(",")]
            for c in target[:1] if not anchor else target:  # no anchor: the first chunk
                if not anchor or any(
                    c["start_line"] <= r[-1] and r[0] <= c["end_line"] for r in ranges
                ):
                    want.add((g["path"], f"{c['path']}#L{c['start_line']}-L{c['end_line']}"))
    got = {(s.split("#")[0], d) for s, d in ds.edges.select("src", "dst").iter_rows()}
    assert got == want and len(want) == 47


# -- a plain reimplementation of search_step (keyword + vector, RRF) -------------------------------

STOP = {
    w.strip().lower()
    for w in (REPO / "pipeline/resources/stopwords/reme.txt").read_text().splitlines()
    if w.strip()
}


def tokens(text):  # reme/components/tokenizer/regex_tokenizer.py + base_tokenizer._postprocess
    han = re.compile(r"[一-鿿]")
    toks = han.findall(text) + re.findall(r"(?u)\b\w\w+\b", han.sub(" ", text))
    return [t.lower() for t in toks if t.lower() not in STOP]


def bm25(query, docs, limit, k1=1.5, b=0.75):
    """(doc index, score) of ReMe's keyword hits: keyword_index/bm25_index.py's add_docs (a slot
    per document with a term, in order), _score_query (float32, the query's terms in order) and
    _top_k (verbatim: its np.argpartition/argsort order of equal scores is ReMe's)."""
    slot_doc, lens, post = [], [], {}
    for i, d in enumerate(docs):
        toks = tokens(d)
        if toks:
            for w in dict.fromkeys(toks):
                post.setdefault(w, []).append((len(lens), toks.count(w)))
            slot_doc.append(i)
            lens.append(len(toks))
    lens = np.asarray(lens, np.int32)
    n = len(lens)
    scores = np.zeros(n, np.float32)
    avg_len = int(lens.sum()) / n
    for w in dict.fromkeys(tokens(query)):
        if w not in post:
            continue
        idxs = np.asarray([j for j, _tf in post[w]])
        tfs = np.asarray([tf for _j, tf in post[w]], np.int32).astype(np.float32)
        df = len(idxs)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        d_lens = lens[idxs].astype(np.float32)
        scores[idxs] += idf * tfs * (k1 + 1.0) / (tfs + k1 * (1.0 - b) + k1 * b / avg_len * d_lens)
    k = min(limit, int((scores > 0).sum()))
    if k == 0:
        return []
    if k >= scores.size:
        top = np.argsort(-scores)[:k]
    else:
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
    return [(slot_doc[j], float(scores[j])) for j in top]


def batch_cosine_similarity(nd_array1, nd_array2):  # reme/utils/similarity_utils.py, verbatim
    dot_products = np.dot(nd_array1, nd_array2.T)
    norms1 = np.linalg.norm(nd_array1, axis=1)
    norms2 = np.linalg.norm(nd_array2, axis=1)
    norm_products = np.outer(norms1, norms2)
    norm_products = np.where(norm_products == 0, 1e-10, norm_products)
    return dot_products / norm_products


def search_step(qvec, qtext, vecs, docs, ids, limit=5, vector_weight=0.7, multiplier=5.0):
    """(doc index, score) of the top ``limit``; cosines as ReMe's local_file_store.vector_search
    computes them (float16 vectors as stored), equal ones by the earlier chunk (``docs`` are in
    chunk store order, as ReMe's file_chunks)."""
    cand = min(200, max(1, int(limit * multiplier)))
    m = np.asarray(vecs, np.float16)
    cos = batch_cosine_similarity(np.asarray(qvec, np.float16).reshape(1, -1), m)[0]
    cos = [float(c) for c in cos]
    vec = sorted(range(len(docs)), key=lambda i: (-cos[i], i))[:cand]
    kw = bm25(qtext, docs, cand)
    if not kw:  # one branch empty: the other list unchanged, with its raw scores
        return [(i, cos[i]) for i in vec[:limit]]
    if vector_weight == 0.0:
        return kw[:limit]
    score = {}
    for r, i in enumerate(vec, 1):
        score[i] = vector_weight / (60 + r)
    for r, (i, _s) in enumerate(kw, 1):
        score[i] = score.get(i, 0.0) + (1 - vector_weight) / (60 + r)
    return sorted(score.items(), key=lambda x: -x[1])[:limit]  # stable: vector order first


QUERIES = [
    ("lme", "What furniture should I buy for my bedroom?", 10),
    ("run", "marathon training plan and injury prevention", 20),
    ("ig", "how to grow Instagram followers and limit screen time", 30),
    ("none", "zzqx", 40),  # no keyword hit: the vector list alone, raw cosines
]


def test_preset_reme_ranks_as_search_step(compose, tmp_path):
    ds = reme.load(str(WS))
    n = ds.nodes
    vecs = [np.asarray(v, np.float64) for v in n["embedding"].to_list()]
    q = tmp_path / "q.parquet"
    pl.DataFrame(
        {
            "query_id": [a for a, _t, _i in QUERIES],
            "text": [t for _a, t, _i in QUERIES],
            "embedding": [n["embedding"][i].to_list() for _a, _t, i in QUERIES],
        },
        schema_overrides={"embedding": pl.List(pl.Float32)},
    ).write_parquet(q)
    over = ["data=reme", f"data.path={WS}", f"data.queries={q}", "preset=reme", "k=5"]
    runner.run(compose([*over, f"out_dir={tmp_path / 'run'}"]), tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    docs = [c["text"] for c in CHUNKS]  # ReMe's order: the chunk store's
    ids = [f"{c['path']}#L{c['start_line']}-L{c['end_line']}" for c in CHUNKS]
    store_vecs = [_vec(c) for c in CHUNKS]
    for qid, text, i in QUERIES:
        got = rec.filter(pl.col("query_id") == qid)
        want = search_step(vecs[i], text, store_vecs, docs, ids)
        if qid == "none":
            assert want[0][1] == pytest.approx(1.0)  # raw cosine: the query is a chunk's own vector
        assert got["node_id"].to_list() == [ids[j] for j, _s in want], qid
        assert got["score"].to_list() == pytest.approx([s for _j, s in want], rel=1e-12), qid


KEYWORD_QUERIES = [
    # the Han characters come first in ReMe's token order (毁灭性 occurs in this workspace's
    # chunks), so its float32 sums add their terms before the English ones
    ("cjk", "Instagram growth strategies 毁灭性 screen time management"),
    ("ig", "Comprehensive extraction of actionable Instagram growth strategies"),
    ("run", "marathon training plan and injury prevention"),
]


def test_preset_reme_without_query_vectors_gives_remes_bm25_bits(compose, tmp_path):
    """The plain command (queries without vectors: ReMe's keyword-only search) returns ReMe's
    keyword hits with its float32 scores bit for bit and its order of equal scores (three
    near-copies of one note in this workspace)."""
    q = tmp_path / "q.jsonl"
    q.write_text("".join(json.dumps({"query_id": a, "text": t}) + "\n" for a, t in KEYWORD_QUERIES))
    over = ["data=reme", f"data.path={WS}", f"data.queries={q}", "preset=reme"]
    runner.run(compose([*over, f"out_dir={tmp_path / 'run'}"]), tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    docs = [c["text"] for c in CHUNKS]
    ids = [f"{c['path']}#L{c['start_line']}-L{c['end_line']}" for c in CHUNKS]
    for qid, text in KEYWORD_QUERIES:
        got = rec.filter(pl.col("query_id") == qid).sort("rank")
        want = bm25(text, docs, 25)[:5]
        assert got["node_id"].to_list() == [ids[j] for j, _s in want], qid
        assert got["score"].to_list() == [s for _j, s in want], qid
