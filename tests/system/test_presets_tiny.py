"""Every preset end to end on a ten-node graph, checked against scores computed by hand.

Embeddings come from the hashing embedder: a text's vector is its unigram and bigram features, ±1
each, L2-normalised. The words below hash to distinct buckets (checked), so the cosine of the
query "apple" with "apple banana" (features apple, banana, "apple banana") is 1/√3, with
"cherry apple banana" 1/√5, and 0 with a text that shares no word. No node has a title.

Graph (ids sort as n0 < n1 < … < n9, so node index = the digit):
    d1: n0 "apple" ─0.2─ n1 "apple banana" ─0.2─ n2 "cherry apple banana"   (temporal chain, seq order)
    d2: n3 "grape" ─0.2─ n6 "kiwi" ─0.2─ n7 "the melon";  explicit edge n3 → n0, weight 1.0
    d3: n4 "apple" (archived), n5 "apple" (visible to bob only)
    d4: n8 "lemon" ─0.2─ n9 "mango"
A viewer-less query sees N = 8 nodes (n4 archived, n5 invisible).
"""

import datetime as dt
import hashlib
import math

import polars as pl
import pytest

from pipeline.contract.dataset import Dataset
from pipeline.run import runner

NOW = dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)
TS = pl.Datetime("us", "UTC")
S3, S5 = 1 / math.sqrt(3), 1 / math.sqrt(5)
Q = {"apple": "q0", "banana": "q1", "lemon": "q2", "the": "q3", "bob": "q4", "scoped": "q5"}


def _dataset(**extra_node_cols) -> Dataset:
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(10)],
            "text": [
                "apple",
                "apple banana",
                "cherry apple banana",
                "grape",
                "apple",
                "apple",
                "kiwi",
                "the melon",
                "lemon",
                "mango",
            ],
            "doc_id": ["d1", "d1", "d1", "d2", "d3", "d3", "d2", "d2", "d4", "d4"],
            "seq": [0, 1, 2, 0, 0, 1, 1, 2, 0, 1],
            "importance": [8.0, None, 2.0, None, None, None, None, None, None, None],
            "created_at": [NOW - dt.timedelta(days=1), NOW - dt.timedelta(days=30)] + [None] * 8,
            "archived": [False] * 4 + [True] + [False] * 5,
            "visibility": [None] * 5 + [["bob"]] + [None] * 4,
            **extra_node_cols,
        },
        schema_overrides={"importance": pl.Float32, "created_at": TS},
    )
    edges = pl.DataFrame(
        {"src": ["n3"], "dst": ["n0"], "weight": [1.0]}, schema_overrides={"weight": pl.Float32}
    )
    queries = pl.DataFrame(
        {
            "query_id": list(Q.values()),
            "text": ["apple", "banana", "lemon", "the", "apple", "apple"],
            "viewer": [None, None, None, None, "bob", None],
            "doc_scope": [None] * 5 + [["d1"]],
            "now": [NOW] * 6,
        },
        schema_overrides={"now": TS},
    )
    return Dataset("tiny", nodes, queries, edges)


def _run(
    compose, tmp_path, preset: str, *overrides: str, ds: Dataset | None = None
) -> pl.DataFrame:
    cfg = compose([f"preset={preset}", "embed=hashing", "k=10", "report=false", *overrides])
    out = tmp_path / preset
    runner.run(cfg, out, dataset=ds or _dataset())
    return pl.read_parquet(out / "recall.parquet")


def _q(rec: pl.DataFrame, key: str) -> pl.DataFrame:
    return rec.filter(pl.col("query_id") == Q[key]).sort("rank")


def _score(rec: pl.DataFrame, key: str, node: str, col: str = "score") -> float:
    return _q(rec, key).filter(pl.col("node_id") == node)[col].item()


def bm25(
    tf: float, n: int, df: int, dl: float, avgdl: float, k1: float, b: float, idf: str
) -> float:
    """BM25 of one term, written out: lucene (bm25s) or SQLite FTS5 (OKS)."""
    if idf == "lucene":
        return math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    return (
        max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
        * tf
        * (k1 + 1)
        / (tf + k1 * (1 - b + b * dl / avgdl))
    )


def test_hashing_features_of_the_tiny_words_do_not_collide():
    feats = "apple banana cherry grape kiwi the melon lemon mango".split() + [
        "apple banana",
        "cherry apple",
        "the melon",
    ]
    buckets = {
        int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little") % 384
        for f in feats
    }
    assert len(buckets) == len(feats)


def test_dense_preset_cosines_and_the_filters(compose, tmp_path):
    rec = _run(compose, tmp_path, "dense")
    q = _q(rec, "apple")
    # score = fused = raw cosine; zero-cosine nodes follow in node order; n4 (archived), n5 (bob's) never
    assert q["node_id"].to_list() == ["n0", "n1", "n2", "n3", "n6", "n7", "n8", "n9"]
    assert q["score"].to_list()[:4] == pytest.approx([1.0, S3, S5, 0.0], abs=1e-6)
    # viewer bob also sees n5 ("apple", cosine 1): tie with n0 broken by node id
    assert _q(rec, "bob")["node_id"].to_list()[:4] == ["n0", "n5", "n1", "n2"]
    # doc_scope [d1]: only d1's nodes
    assert _q(rec, "scoped")["node_id"].to_list() == ["n0", "n1", "n2"]
    # include_archived (ReMe's flag) lets the archived n4 in, right after n0
    arch = _run(compose, tmp_path / "a", "dense", "include_archived=true")
    assert _q(arch, "apple")["node_id"].to_list()[:3] == ["n0", "n4", "n1"]


def test_bm25_preset_lucene_scores(compose, tmp_path):
    rec = _run(compose, tmp_path, "bm25")
    # English stopwords drop "the" → |n7| = 1; lengths 1,2,3,1,1,1,1,1 → avgdl = 11/8; df(apple) = 3 of N = 8
    want = [bm25(1, 8, 3, dl, 11 / 8, 1.5, 0.75, "lucene") for dl in (1, 2, 3)]
    # ln(1 + 5.5/3.5) / (1 + 1.5·(0.25 + 0.75·dl/1.375)) for dl = 1, 2, 3
    assert want == pytest.approx([0.430635, 0.313633, 0.246625], abs=1e-6)
    q = _q(rec, "apple")
    assert q["node_id"].to_list() == ["n0", "n1", "n2"] and q["score"].to_list() == pytest.approx(
        want, rel=1e-5
    )
    assert _q(rec, "the").height == 0  # a stopword-only query finds nothing


def test_oks_preset_fts5_scores(compose, tmp_path):
    rec = _run(compose, tmp_path, "oks")
    # OKS's fts5 index holds archived pages too (include_archived), so N = 9 (n5 is bob's only).
    # no stopwords → |n7| = 2, avgdl = 13/9; df(banana) = 2: idf = ln(7.5/2.5) = ln 3
    # n1: 1.098612·2.2/(1 + 1.2·(0.25 + 0.75·2·9/13)) = 0.949254; n2 (|d| = 3): 0.762629
    want = [bm25(1, 9, 2, dl, 13 / 9, 1.2, 0.75, "fts5") for dl in (2, 3)]
    assert want == pytest.approx([0.949254, 0.762629], abs=1e-6)
    q = _q(rec, "banana")
    assert q["node_id"].to_list() == ["n1", "n2"] and q["score"].to_list() == pytest.approx(
        want, rel=1e-5
    )
    # df(apple) = 3 of 8: ln(5.5/3.5) > 0, no floor; "the" is a term here (n7)
    assert _q(rec, "the")["node_id"].to_list() == ["n7"]


def test_reme_preset_rrf_and_single_branch_raw(compose, tmp_path):
    rec = _run(compose, tmp_path, "reme")
    q = _q(rec, "apple")
    # dense ranks 1, 2, 3 and BM25 ranks 1, 2, 3 for n0, n1, n2: 0.7/(60 + r) + 0.3/(60 + r) = 1/(60 + r)
    assert q["node_id"].to_list()[:3] == ["n0", "n1", "n2"]
    assert q["score"].to_list()[:3] == pytest.approx([1 / 61, 1 / 62, 1 / 63], rel=1e-6)
    # "the" is an English stopword: the BM25 branch is empty → raw cosine passes through (ReMe quirk),
    # in float16 as ReMe computes it (batch_cosine_similarity): q = e1, n7 = (1, 1, 1)/√3 → float16
    # 0.577148 each; dot 0.577148; |n7|: 0.577148² → 0.333130, sum 0.999390 → 0.999512, √ →
    # 0.999512; 0.577148 / 0.999512 = 0.577430 → 0.57763671875 (1/√3 = 0.577350 in float64)
    assert _score(rec, "the", "n7") == 0.57763671875
    assert abs(_score(rec, "the", "n7") - S3) < 2**-11  # within one float16 step of the cosine
    assert _q(rec, "the")["node_id"][0] == "n7"


def test_best_preset_fused_plus_100_ppr(compose, tmp_path):
    rec = _run(compose, tmp_path, "best")
    q = _q(rec, "lemon")
    # fused(n8) = 0.6·cos 1 + 0.4·(BM25 / max BM25 = 1) = 1; the only positive seed, energy 1^10 = 1.
    # No capitalised words → no entity hubs. Component n8 ─0.8─ n9 (temporal chain). PPR, d = 0.5:
    # x8 = d·x9 + (1 − d), x9 = d·x8 → x8 = 1/(1 + d) = 2/3, x9 = 1/3; score = fused + 100·graph.
    # best solves it by forward push (push_eps 1e-4): each score at most push_eps × weighted
    # degree (0.8) below the exact one
    assert q["node_id"].to_list()[:2] == ["n8", "n9"]
    bound = 1e-4 * 0.8
    g8, g9 = _score(rec, "lemon", "n8", "graph"), _score(rec, "lemon", "n9", "graph")
    assert 2 / 3 - bound <= g8 <= 2 / 3 + 1e-6 and 1 / 3 - bound <= g9 <= 1 / 3 + 1e-6
    assert _score(rec, "lemon", "n8") == pytest.approx(1.0 + 100 * g8, abs=1e-4)
    assert _score(rec, "lemon", "n9") == pytest.approx(0.0 + 100 * g9, abs=1e-4)


def test_hipporag_preset_seed_without_edges_keeps_its_mass(compose, tmp_path):
    rec = _run(compose, tmp_path, "hipporag")
    # hipporag has no temporal chain: n8 has no edge, so all PPR mass returns to it: graph = 1;
    # score = 0.001·fused (= dense cosine 1) + graph
    q = _q(rec, "lemon")
    assert q["node_id"].to_list()[0] == "n8"
    assert _score(rec, "lemon", "n8", "graph") == pytest.approx(1.0, abs=1e-5)
    assert _score(rec, "lemon", "n8") == pytest.approx(0.001 + 1.0, abs=1e-5)
    assert (
        _score(rec, "lemon", "n9", "graph") == 0.0
    )  # a dense candidate (cosine 0) that PPR never reaches


def test_hipporag_preset_ppr_through_entity_nodes(compose, tmp_path):
    """Units a "Alice met Bob.", b "Bob likes tea.", c "Carol sings."; entities alice (a), bob (a, b),
    carol (c), unit–entity weight 1/df: a–alice 1, a–bob 0.5, b–bob 0.5, c–carol 1. Query "Bob":
    its entity bob gets 95% of the seed mass, the dense hits (cosine > 0) share 5% by cosine.
    The expected PPR solves x = (1 − d)·r + d·Pᵀx over the six nodes (P = row-normalised weights)."""
    import numpy as np

    nodes = pl.DataFrame(
        {"node_id": ["a", "b", "c"], "text": ["Alice met Bob.", "Bob likes tea.", "Carol sings."]}
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["Bob"]})
    rec = _run(compose, tmp_path, "hipporag", ds=Dataset("ents", nodes, queries, None))
    dense = dict(zip(rec["node_id"], rec["dense"]))
    order = ["a", "b", "c", "alice", "bob", "carol"]
    w = np.zeros((6, 6))
    for u, e, x in [("a", "alice", 1), ("a", "bob", 0.5), ("b", "bob", 0.5), ("c", "carol", 1)]:
        i, j = order.index(u), order.index(e)
        w[i, j] = w[j, i] = x
    r = np.array([max(dense.get(u, 0.0), 0.0) for u in "abc"] + [0, 0, 0])
    r[order.index("bob")] = r.sum() * 0.95 / 0.05
    r /= r.sum()
    P = w / w.sum(axis=1, keepdims=True)
    x = np.linalg.solve(np.eye(6) - 0.5 * P.T, 0.5 * r)
    got = dict(zip(rec["node_id"], rec["graph"]))
    for u in ("a", "b"):
        assert got[u] == pytest.approx(x[order.index(u)], abs=1e-5)
    assert set(rec["node_id"]) <= {"a", "b", "c"}  # entity hubs never come out
    assert rec["node_id"].to_list()[:2] == ["a", "b"] or rec["node_id"].to_list()[:2] == ["b", "a"]


def _bme_n0_n3():
    """Hand-computed BME hybrid scores of n0 and n3 for the query "apple".

    Seeds = positive cosines: n0 1, n1 1/√3, n2 1/√5. PEDSA step 1: n3 ← n0 over the 1.0 edge:
    1·1.0·0.6·0.85 = 0.51; step 2 gives n3 only 0.2·0.51 from n0's teleported 0.2 → graph(n3) = 0.51.
    n0 keeps its seed energy 1 (later steps are smaller).
    n0: g = clip(1/2) = 0.5, v = 1, lexical: the text equals the query → S = 0.82, T = 0.65, P = 0 →
        max(0.82·0.82, 0.7·0.65, 0.35·0.82 + 0.2·0.65) = 0.6724; importance 8 → 0.8; 1 day old.
    n3: g = 0.51/2 = 0.255, v = 0, lexical 0, importance missing → 5 → 0.5; no created_at → decay 1.
    """
    decay1 = 0.8 + 0.2 / (1 + math.log(2))
    n0 = (0.6 * 0.5 + 0.3 * 1.0 + 0.18 * 0.6724 + 0.1 * 0.8) / 1.18 * decay1
    n3 = (0.6 * 0.255 + 0.3 * 0.0 + 0.18 * 0.0 + 0.1 * 0.5) / 1.18
    return n0, n3


def test_bme_preset_hybrid_scores(compose, tmp_path):
    rec = _run(compose, tmp_path, "bme")
    n0, n3 = _bme_n0_n3()
    assert (n0, n3) == pytest.approx((0.623259, 0.172034), abs=1e-6)
    assert _score(rec, "apple", "n0") == pytest.approx(n0, abs=1e-5)
    assert _score(rec, "apple", "n3", "graph") == pytest.approx(0.51, abs=1e-6)
    assert _score(rec, "apple", "n3") == pytest.approx(n3, abs=1e-5)
    assert _q(rec, "apple")["node_id"][0] == "n0"  # DPP's first pick = the best quality
    assert not {"n4", "n5"} & set(_q(rec, "apple")["node_id"])


def test_bme_preset_with_scope_and_story_columns(compose, tmp_path):
    """n3 is Ann's POV memory, every other node objective without a region (global); n0 lies in the
    active story segment 4, n1 in segment 9 (future → dropped), the rest are undated."""
    ds = _dataset(
        scope_layer=["objective"] * 3 + ["pov"] + ["objective"] * 6,
        scope_owner_type=[None] * 3 + ["character"] + [None] * 6,
        scope_owner=[None] * 3 + ["Ann"] + [None] * 6,
        story_time=[4, 9] + [None] * 8,
    )
    ds.queries = ds.queries.with_columns(active_owners=pl.lit(["ann"]), story_segment=pl.lit(4))
    rec = _run(compose, tmp_path, "bme", "select=topk", ds=ds)
    q = _q(rec, "apple")
    n0, n3 = _bme_n0_n3()
    # n3: characterPov 1.25 × undated 0.88; n0: objectiveGlobal 0.75 × current 1.15
    assert _score(rec, "apple", "n3") == pytest.approx(n3 * 1.25 * 0.88, abs=1e-5)
    assert _score(rec, "apple", "n0") == pytest.approx(n0 * 0.75 * 1.15, abs=1e-5)
    assert (
        _score(rec, "apple", "n3", "bme_scope"),
        _score(rec, "apple", "n0", "bme_story_time"),
    ) == (1.25, 1.15)
    # lexicographic: scope priority 5 (n3) first although its score is lower; then among the global
    # nodes story priority current (n0) before undated; n1 is future without a future cue → dropped
    assert q["node_id"].to_list()[:2] == ["n3", "n0"] and "n1" not in q["node_id"].to_list()
    assert q["scope_priority"].to_list()[:2] == [5, 1] and q["story_priority"].to_list()[:2] == [
        3,
        5,
    ]


def test_bme_preset_cooccurrence_boost(compose, tmp_path):
    rec = _run(
        compose,
        tmp_path,
        "bme",
        "select=topk",
        "cooccur.enabled=true",
        "cooccur.require_title=false",
        "cooccur.exclude_types=[]",
    )
    # d1 = one batch {n0, n1, n2}: every pair counted once. Anchors (no titles → no exact anchors):
    # the positive dense hits n0 (1), n1 (1/√3), n2 (1/√5). n0 gets ln2·0.1·(1/√3 + 1/√5) on top of
    # its graph energy 1; n3 (d2) is in no batch with an anchor → no bonus.
    bonus0 = math.log(2) * 0.1 * (S3 + S5)
    assert _score(rec, "apple", "n0", "cooccur") == pytest.approx(bonus0, abs=1e-6)
    assert _score(rec, "apple", "n0", "graph") == pytest.approx(1.0 + bonus0, abs=1e-5)
    assert _score(rec, "apple", "n3", "cooccur") == 0.0


# ---- BME fidelity rows (docs/presets.md, "bme" table) ----


def test_bme_preset_constants_match_the_spec(compose):
    cfg = compose(["preset=bme"])
    # vector prefilter: top 20 per query text, cosine > 0, merged by max, max(2·20, 24) = 40 kept
    assert (cfg.dense.per_part, cfg.dense.min_score, cfg.dense.candidates) == (20, 0.0, 40)
    # DPP without LLM recall: recallTopK 20 out of 20·3 = 60 (settings-defaults.js recallTopK 20,
    # recallDppCandidateMultiplier 3); k = 20; BME's answer = the first maxRecallNodes 12
    from pipeline.inject.formats import InjectParams

    cap = InjectParams(format="bme", max_nodes=cfg.inject.max_nodes).get("max_nodes")
    assert (cfg.select.method, cfg.select.target, cfg.select.pool_mult, cap) == ("dpp", 20, 3, 12)
    assert cfg.k == 20
    # createEdge strength 0.8; temporal link 0.2; cross recall on (settings-defaults.js
    # enableCrossRecall: true)
    assert (cfg.graph.default_weight, cfg.graph.temporal_weight, cfg.cross_recall.enabled) == (
        0.8,
        0.2,
        True,
    )
    assert (cfg.anchors.energy, cfg.cross_recall.mult) == (2.0, 1.5)
    assert (cfg.diffuse.steps, cfg.diffuse.decay, cfg.diffuse.alpha, cfg.diffuse.top_k) == (
        2,
        0.6,
        0.15,
        100,
    )


def test_bme_vector_hits_only_positive_and_diffusion_only_nodes_get_vector_0(compose, tmp_path):
    rec = _run(compose, tmp_path, "bme")
    # cosine ≤ 0 is no vector hit: "apple" hits n0, n1, n2; diffusion adds n3 (0.51) and, at step 2,
    # n6 over the 0.2 chain from n3: 0.51·0.2·0.6·0.85 = 0.05202. n7, n8, n9 (cosine 0) are not scored.
    q = _q(rec, "apple")
    assert set(q["node_id"]) == {"n0", "n1", "n2", "n3", "n6"}
    assert _score(rec, "apple", "n6", "graph") == pytest.approx(0.05202, abs=1e-6)
    # pool of 5 ≤ 30: no DPP, score order
    assert q["score"].to_list() == sorted(q["score"].to_list(), reverse=True)
    # one hit per query text (dense.per_part=1): n0 only; n1 is reached by diffusion (0.2 chain:
    # 1·0.2·0.6·0.85 = 0.102) and gets vector term 0 although its cosine is 1/√3
    one = _run(compose, tmp_path / "one", "bme", "dense.per_part=1")
    assert _score(one, "apple", "n1", "dense") == pytest.approx(S3, abs=1e-6)
    assert _score(one, "apple", "n1", "bme_dense") == 0.0
    assert _score(one, "apple", "n1", "graph") == pytest.approx(0.102, abs=1e-6)
    assert _score(one, "apple", "n0", "bme_dense") == pytest.approx(1.0, abs=1e-6)


def test_bme_edge_without_weight_weighs_0_8(compose, tmp_path):
    ds = _dataset()
    ds.edges = ds.edges.with_columns(weight=pl.lit(None, dtype=pl.Float32))
    rec = _run(compose, tmp_path, "bme", ds=ds)
    assert _score(rec, "apple", "n3", "graph") == pytest.approx(
        1.0 * 0.8 * 0.6 * 0.85, abs=1e-6
    )  # 0.408
    one = _run(compose, tmp_path / "w1", "bme", "graph.default_weight=1.0", ds=ds)
    assert _score(one, "apple", "n3", "graph") == pytest.approx(0.51, abs=1e-6)


def test_bme_cross_recall_walks_stored_edges_to_events_only():
    from pipeline.stages import anchors

    # Ann (character) ─0.5 stored─ b (event); Ann ─0.2 temporal chain─ c (event); Ann ─0.9 stored─ d (character)
    nodes = pl.DataFrame(
        {
            "node_id": ["a", "b", "c", "d"],
            "text": ["x"] * 4,
            "title": ["Ann", "B", "C", "D"],
            "type": ["character", "event", "event", "character"],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["where is Ann"]})
    edges = pl.DataFrame(
        {
            "src": [0, 0, 0],
            "dst": [1, 2, 3],
            "weight": [0.5, 0.2, 0.9],
            "inhibit": [False] * 3,
            "relation": ["edge", "temporal", "edge"],
        }
    )
    found = anchors.find(nodes, queries)
    assert found.select("node_idx", "energy").rows() == [(0, 2.0)]
    # only b: c is reached over the temporal chain, d is no event; energy 1.5 · 0.5
    assert anchors.cross(found, edges, nodes, queries).select("node_idx", "energy").rows() == [
        (1, 0.75)
    ]


# ---- ReMe fidelity rows: `reme` = search_step (the code), `reme_design` = the design document ----


def test_reme_candidates_min_200_or_5_per_result(compose):
    for k, want in ((10, 50), (40, 200), (50, 200)):
        for preset in ("reme", "reme_design"):
            cfg = compose([f"preset={preset}", f"k={k}"])
            assert (cfg.dense.candidates, cfg.lexical.candidates) == (want, want)
    cfg = compose(["preset=reme"])
    assert (cfg.lexical.k1, cfg.lexical.b, cfg.lexical.idf, cfg.lexical.dedupe_query_terms) == (
        1.5,
        0.75,
        "reme",
        True,
    )
    # search.py: text_weight = 1.0 - vector_weight (0.30000000000000004, not 0.3)
    assert (cfg.fuse.k, cfg.fuse.weights.dense, cfg.fuse.weights.lexical) == (60, 0.7, 1.0 - 0.7)


def test_reme_bm25_only_keeps_raw_scores_with_the_k1_plus_1_factor(compose, tmp_path):
    # ReMe's default config has no embedding store: BM25 alone, raw scores, tf·(k1+1)/(tf + k1·norm)
    rec = _run(compose, tmp_path, "reme", "channels=[lexical]")
    want = [2.5 * bm25(1, 8, 3, dl, 11 / 8, 1.5, 0.75, "lucene") for dl in (1, 2, 3)]
    assert want == pytest.approx(
        [1.076588, 0.784081, 0.616562], abs=1e-6
    )  # 2.5 × the bm25 preset values
    q = _q(rec, "apple")
    assert q["node_id"].to_list() == ["n0", "n1", "n2"] and q["score"].to_list() == pytest.approx(
        want, rel=1e-5
    )


def _reme_design(compose, tmp_path, ds):
    return _run(compose, tmp_path, "reme_design", "k=2", ds=ds)


def test_reme_design_factors_per_path_merge_and_k_in_paths(compose, tmp_path):
    """Query "apple". Stored edge n3 → n0 only (no temporal chain in ReMe): inbound(n0) = 1, Leiden
    communities {n0, n3} and singletons. RRF: n0 1/61, n1 1/62, n2 1/63 (both lists), the cosine-0
    nodes by node order on the dense list only: n3 0.7/64, n6 0.7/65, n7 0.7/66, n8 0.7/67.
    Factors: inbound 1 + 0.15·ln 2 (n0); ×1.2 for the communities of the top-3 fused n0, n1, n2 (so
    n3 too); recency exp(−days/60): n0 1 day, n1 30 days, others undated (1)."""
    n0 = 1 / 61 * (1 + 0.15 * math.log(2)) * 1.2 * math.exp(-1 / 60)
    n1, n2 = 1 / 62 * 1.2 * math.exp(-0.5), 1 / 63 * 1.2
    n3, n6 = 0.7 / 64 * 1.2, 0.7 / 65
    assert (n0, n1, n2, n3, n6) == pytest.approx(
        (0.021358, 0.011739, 0.019048, 0.013125, 0.010769), abs=1e-6
    )
    rec = _reme_design(compose, tmp_path, _dataset())
    q = _q(rec, "apple")
    # per path ≤ 2 chunks (d1: n0, n2; n1 is its third), paths by their best chunk, k = 2 paths (d1, d2)
    assert q["node_id"].to_list() == ["n0", "n2", "n3", "n6"]
    assert q["score"].to_list() == pytest.approx([n0, n2, n3, n6], rel=1e-5)
    # n2 last updated 200 days ago: recency_score = e^(−200/60) = 0.036 < 0.15 → archived, not recalled
    ds = _dataset(updated_at=[None, None, NOW - dt.timedelta(days=200)] + [None] * 7)
    ds.nodes = ds.nodes.with_columns(pl.col("updated_at").cast(TS))
    assert _q(_reme_design(compose, tmp_path / "arch", ds), "apple")["node_id"].to_list() == [
        "n0",
        "n1",
        "n3",
        "n6",
    ]


# ---- OKS fidelity rows ----


def test_oks_preset_constants_match_the_spec(compose):
    cfg = compose(["preset=oks"])
    assert (cfg.lexical.k1, cfg.lexical.b, cfg.lexical.idf, cfg.lexical.stopwords) == (
        1.2,
        0.75,
        "fts5",
        None,
    )
    assert dict(cfg.lexical.field_weights) == {"title": 5.0, "tags": 3.0, "body": 1.0, "code": 0.5}
    assert list(cfg.channels) == ["lexical"] and dict(cfg.score.terms) == {
        "fused": 1.0,
        "graph": 0.0,
        "residual": 0.0,
    }


def test_oks_fts5_idf_floor_for_terms_in_half_the_rows(compose, tmp_path):
    # "apple" in 5 of N = 8 visible rows if n6, n7 also say apple: ln((8 − 5 + 0.5)/(5 + 0.5)) < 0 → 1e-6
    ds = _dataset()
    ds.nodes = ds.nodes.with_columns(
        text=pl.Series(
            [
                "apple",
                "apple banana",
                "cherry apple banana",
                "grape",
                "apple",
                "apple",
                "kiwi apple",
                "the apple",
                "lemon",
                "mango",
            ]
        )
    )
    rec = _run(compose, tmp_path, "oks", ds=ds)
    # visible lengths (archived n4 included, as OKS's index holds it) 1 2 3 1 1 2 2 1 1 → avgdl
    # 14/9; apple in 6 of 9 rows; n0: 1e-6 · 2.2 / (1 + 1.2·(0.25 + 0.75·1·9/14))
    assert _score(rec, "apple", "n0") == pytest.approx(
        1e-6 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 9 / 14)), rel=1e-4
    )
