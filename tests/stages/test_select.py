"""Selection stage: top-k ties, DPP/MMR over the score-ordered pool equal the kernels per query."""

import numpy as np
import polars as pl
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contract.errors import ConfigError
from pipeline.ops.dpp import dpp_greedy, mmr_greedy
from pipeline.stages.select import SelectParams, select


def _cand(seed=0, nq=5, n=40):
    rng = np.random.default_rng(seed)
    rows = [
        (q, i, float(rng.random()))
        for q in range(nq)
        for i in rng.choice(n, size=rng.integers(3, 20), replace=False)
    ]
    df = pl.DataFrame(rows, schema=["query_idx", "node_idx", "score"], orient="row")
    xb = rng.normal(size=(n, 8)).astype(np.float32)
    return df, xb


def test_topk_orders_by_score_then_node():
    cand = pl.DataFrame(
        {"query_idx": [0, 0, 0, 1], "node_idx": [5, 2, 9, 1], "score": [0.5, 0.5, 0.9, 0.1]}
    )
    out = select(cand, 2, SelectParams.defaults())
    assert out.select("query_idx", "node_idx", "rank").rows() == [(0, 9, 1), (0, 2, 2), (1, 1, 1)]


@pytest.mark.parametrize("method", ["dpp", "mmr"])
def test_diversified_selection_equals_kernel_on_each_pool(method):
    cand, xb = _cand()
    k = 4
    out = select(cand, k, SelectParams.defaults(method=method), xb)
    for q in range(5):
        pool = (
            cand.filter(pl.col("query_idx") == q)
            .sort(["score", "node_idx"], descending=[True, False])
            .head(3 * k)
        )
        qual = torch.tensor(pool["score"].to_numpy())[None]
        emb = torch.tensor(xb[pool["node_idx"].to_numpy()])[None]
        idx = (dpp_greedy(qual, emb, k)[0] if method == "dpp" else mmr_greedy(qual, emb, k))[
            0
        ].numpy()
        expect = [int(pool["node_idx"][int(i)]) for i in idx if i >= 0]
        if pool.height <= k:  # BME: a pool no larger than the target keeps its score order
            expect = pool["node_idx"].to_list()
        got = out.filter(pl.col("query_idx") == q).sort("rank")
        assert got["node_idx"].to_list() == expect and got["rank"].to_list() == list(
            range(1, len(expect) + 1)
        )


def test_dpp_drops_a_duplicate_in_favour_of_a_distinct_item():
    xb = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    cand = pl.DataFrame({"query_idx": [0, 0, 0], "node_idx": [0, 1, 2], "score": [0.9, 0.85, 0.5]})
    assert select(cand, 2, SelectParams.defaults(method="dpp", pool_mult=3), xb)[
        "node_idx"
    ].to_list() == [0, 2]
    assert select(cand, 2, SelectParams.defaults())["node_idx"].to_list() == [0, 1]


def test_dpp_target_small_pool_and_score_order_fill():
    # nodes 0, 1 point one way, 2, 3 the other; scores 0.9 > 0.85 > 0.5 > 0.4
    xb = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    cand = pl.DataFrame(
        {"query_idx": [0] * 4, "node_idx": [0, 1, 2, 3], "score": [0.9, 0.85, 0.5, 0.4]}
    )
    # pool of 4 ≤ target 4 → no DPP (BME's rule): score order
    assert select(cand, 4, SelectParams.defaults(method="dpp"), xb)["node_idx"].to_list() == [
        0,
        1,
        2,
        3,
    ]
    # target 2, pool 2·2 = 4 > 2: DPP picks 0, then 2 (1 duplicates 0: gain 0); then the rest by score: 1, 3
    out = select(cand, 4, SelectParams.defaults(method="dpp", target=2, pool_mult=2), xb)
    assert out["node_idx"].to_list() == [0, 2, 1, 3] and out["rank"].to_list() == [1, 2, 3, 4]
    assert out["dpp_gain"].to_list()[:2] == pytest.approx([0.81 + 1e-8, 0.25 + 1e-8])
    # k below the target: the first k greedy picks (BME's LLM fallback: the first 12 of its 30)
    assert select(cand, 1, SelectParams.defaults(method="dpp", target=2, pool_mult=2), xb)[
        "node_idx"
    ].to_list() == [0]


def test_k_counted_in_documents():
    # docs 0 1 0 2 for nodes 0..3 by score; two units per doc: doc 0 (nodes 0, 2), doc 1 (1), doc 2 (3)
    cand = pl.DataFrame(
        {"query_idx": [0] * 4, "node_idx": [0, 1, 2, 3], "score": [0.9, 0.8, 0.7, 0.6]}
    )
    doc_idx = np.array([0, 1, 0, 2])
    assert select(cand, 2, SelectParams.defaults(top_chunks_per_doc=2), doc_idx=doc_idx)[
        "node_idx"
    ].to_list() == [0, 2]
    got = select(
        cand, 2, SelectParams.defaults(top_chunks_per_doc=2, k_in_docs=True), doc_idx=doc_idx
    )
    assert got["node_idx"].to_list() == [0, 2, 1] and got["rank"].to_list() == [1, 2, 3]
    with pytest.raises(ConfigError, match="k_in_docs counts documents for select=topk only"):
        select(
            cand,
            2,
            SelectParams.defaults(method="dpp", top_chunks_per_doc=2, k_in_docs=True),
            np.eye(4),
            doc_idx=doc_idx,
        )


def test_dpp_without_embeddings_is_a_config_error():
    cand, _ = _cand()
    with pytest.raises(ConfigError, match="needs embeddings"):
        select(cand, 3, SelectParams.defaults(method="dpp"))


def test_group_by_doc_keeps_best_units_per_document_in_document_order():
    # ranks 1..6 with docs A A A B C B: A keeps ranks 1, 2; B keeps 4, 6; C keeps 5 → order A A B B C
    cand = pl.DataFrame(
        {
            "query_idx": [0] * 6,
            "node_idx": [0, 1, 2, 3, 4, 5],
            "score": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],
        }
    )
    doc_idx = np.array([0, 0, 0, 1, 2, 1])
    out = select(cand, 10, SelectParams.defaults(top_chunks_per_doc=2), doc_idx=doc_idx)
    assert out["node_idx"].to_list() == [0, 1, 3, 5, 4] and out["rank"].to_list() == [1, 2, 3, 4, 5]
    with pytest.raises(ConfigError, match="needs a doc_id"):
        select(cand, 3, SelectParams.defaults(top_chunks_per_doc=2))


def test_injection_formats_hand_checked():
    from pipeline.inject.formats import render

    nodes = pl.DataFrame(
        {
            "node_id": ["a.md#x", "b.md#y"],
            "text": ["line one\nline | two", "short"],
            "title": ["Alpha", "Beta"],
            "type": ["fact", "lesson"],
            "start_line": [3, 7],
            "end_line": [5, 9],
            "tags": [["t1", "t2"], None],
        }
    )
    recall = pl.DataFrame(
        {
            "query_id": ["q", "q"],
            "rank": [1, 2],
            "node_id": ["a.md#x", "b.md#y"],
            "doc_id": ["a.md", "b.md"],
            "score": [0.9, 0.5],
            "dense": [0.7, 0.4],
            "lexical": [2.0, 0.0],
        }
    )
    bme = render(recall, nodes, "bme")["text"][0]
    # no scope columns: every node is objective/global → BME's "[Memory - Objective / Global]" section
    assert bme.splitlines()[:5] == [
        "[Memory - Objective / Global]",
        "fact:",
        "| title | text | tags |",
        "|---|---|---|",
        "| Alpha | line one line \\| two | t1, t2 |",
    ]
    assert "lesson:" in bme and "| Beta | short |" in bme
    reme = render(recall, nodes, "reme")["text"][0]
    assert (
        reme.splitlines()[0]
        == "========== a.md:3-5 [score=0.9000 vector=0.7000 keyword=2.0000] =========="
    )
    oks = render(recall, nodes, "oks", max_nodes=1)["text"][0]
    # the hook's knowledge section: header, "- [type] title (slug) rel=", 4 spaces + preview
    assert oks == (
        "## 相关记忆\n相关已沉淀记忆（引用时用 slug；与当前事实冲突以最新为准）：\n"
        "- [fact] Alpha (a) rel=0.90\n    line one line | two"
    )


def test_probabilistic_recall_is_seeded_and_respects_visibility():
    from pipeline.stages.probrecall import append

    nodes = pl.DataFrame(
        {
            "node_id": list("abcdef"),
            "text": ["t"] * 6,
            "importance": [9.0, 8.0, 7.0, 6.5, 2.0, 9.5],
            "type": ["fact", "rule", "fact", "fact", "fact", "fact"],
            "visibility": [None, None, None, None, None, ["zed"]],
        }
    )
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(40)], "text": ["x"] * 40})
    sel = pl.DataFrame(
        {"query_idx": list(range(40)), "node_idx": [4] * 40, "rank": [1] * 40, "score": [1.0] * 40},
        schema_overrides={"rank": pl.Int32},
    )
    a = append(sel, nodes, queries, k=5, p=0.5, seed=1)
    b = append(sel, nodes, queries, k=5, p=0.5, seed=1)
    assert a.equals(b)  # same seed, same output
    extra = a.filter(pl.col("probabilistic"))
    # pool = importance ≥ 6, not a rule, visible (f is private): a (9), c (7), d (6.5) → node idx 0, 2, 3
    assert set(extra["node_idx"]) <= {0, 2, 3} and 10 < extra.height < 110  # ≈ 40 × 3 × 0.5 draws
    assert (
        append(sel, nodes, queries, k=1, p=0.5, seed=1).filter(pl.col("probabilistic")).height == 0
    )  # full
    assert not append(sel, nodes, queries, k=5, p=0.5, seed=2).equals(a)


def test_soul_boost_orders_only_the_injection_layer():
    from pipeline.inject.formats import render, soul_boost

    assert (
        soul_boost("anti-pattern", "x"),
        soul_boost("concept", "Overview"),
        soul_boost(None, "t"),
    ) == (1.5, 0.3, 0.5)
    nodes = pl.DataFrame(
        {
            "node_id": ["a", "b"],
            "text": ["ta", "tb"],
            "title": ["A", "B"],
            "type": ["concept", "anti-pattern"],
        }
    )
    recall = pl.DataFrame(
        {"query_id": ["q", "q"], "rank": [1, 2], "node_id": ["a", "b"], "score": [1.0, 0.5]}
    )
    # floor=0: the hook's 0.7 floor (a default of the oks format since issue 18) would drop b (0.5)
    plain = render(recall, nodes, "oks", floor=0.0)["text"][0]
    boosted = render(recall, nodes, "oks", soul=True, floor=0.0)["text"][
        0
    ]  # 1.0·0.6 < 0.5·1.5 → b first
    assert plain.index("(a)") < plain.index("(b)") and boosted.index("(b)") < boosted.index("(a)")
    assert recall["rank"].to_list() == [1, 2]  # the recall layer is untouched


def _pools(sizes, d=48, seed=0):
    """One query per pool size: its candidates (random scores) over a shared random embedding table."""
    rng = np.random.default_rng(seed)
    n = 2 * max(sizes)
    rows = [
        (q, int(i), float(rng.random()))
        for q, s in enumerate(sizes)
        for i in rng.choice(n, size=s, replace=False)
    ]
    cand = pl.DataFrame(rows, schema=["query_idx", "node_idx", "score"], orient="row")
    return cand, rng.normal(size=(n, d)).astype(np.float32)


def _bits(out: pl.DataFrame, q: int) -> tuple:
    """A query's rows as exact bytes: picks, ranks, and the dpp_gain column's dtype and bits."""
    got = out.filter(pl.col("query_idx") == q)
    gain = got["dpp_gain"]
    return (
        got["node_idx"].to_list(),
        got["rank"].to_list(),
        str(gain.dtype),
        gain.is_null().to_list(),
        gain.fill_null(0.0).to_numpy().tobytes(),
    )


def _alone_equals_together(cand, xb, k, p, order) -> None:
    """Every query's bits, selected with the others (queries met in ``order``) and on its own."""
    together = select(cand.filter(pl.col("query_idx").is_in(order)), k, p, xb)
    for q in order:
        alone = select(cand.filter(pl.col("query_idx") == q), k, p, xb)
        assert _bits(together, q) == _bits(alone, q), (q, order)


@pytest.mark.parametrize("method", ["dpp", "mmr"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_400_and_a_150_item_pool_give_the_same_bits_together_and_alone(method, dtype):
    """Issue 26 item 3: a 400- and a 150-candidate query (pools 300 and 150 at k=100: the lazy and
    the Gram path) — together the 150 one was padded to 300 and switched path, and the 300 one
    alone was a batch of one; either changed dpp_gain bits. A 60-item query is not diversified:
    its rows still carry the (null) dpp_gain column, alone too."""
    cand, xb = _pools([400, 150, 60])
    p = SelectParams.defaults(method=method, dtype=dtype)
    _alone_equals_together(cand, xb, 100, p, [0, 1, 2])


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    sizes=st.lists(
        st.sampled_from([7, 33, 96, 97, 150, 256, 257, 300, 520]), min_size=2, max_size=5
    ),
    batch=st.sampled_from([1, 2, 3, 4096]),
    method=st.sampled_from(["dpp", "mmr"]),
    dtype=st.sampled_from(["float32", "float64"]),
    data=st.data(),
)
def test_no_batch_composition_changes_a_querys_bits(sizes, batch, method, dtype, data):
    """Pools on both sides of every width step and of GRAM_MAX_P, any order, any batch size: each
    query's picks and gain bits are those of the query selected alone."""
    cand, xb = _pools(sizes, seed=len(sizes))
    order = data.draw(st.permutations(range(len(sizes))))
    p = SelectParams.defaults(method=method, dtype=dtype, pool_mult=20, batch=batch)
    _alone_equals_together(cand, xb, 32, p, list(order))


@pytest.mark.parametrize("method,target", [("topk", None), ("dpp", None), ("dpp", 3), ("mmr", 6)])
def test_the_head_cut_changes_no_selection(method, target, monkeypatch):
    """``select._head`` (each query's rows down to its depth-th score, ties kept) gives the rows of
    the whole-frame sort: coarse scores (many ties at every cut), queries shorter and longer than
    the depth, k from 1 past the longest query."""
    from pipeline.stages import select as sel

    rng = np.random.default_rng(7)
    n = 120
    rows = [
        (q, int(i), float(rng.integers(0, 6)) / 4)
        for q in range(12)
        for i in rng.choice(n, size=int(rng.integers(1, 60)), replace=False)
    ]
    cand = pl.DataFrame(rows, schema=["query_idx", "node_idx", "score"], orient="row")
    xb = rng.normal(size=(n, 8)).astype(np.float32)
    p = SelectParams.defaults(method=method, target=target)
    for k in (1, 4, 10, 70):
        got = select(cand, k, p, xb)
        cut = sel._head(cand, k, p)
        if k < 10:  # the cut dropped rows: the two sides differ in work
            assert cut.height < cand.height
        monkeypatch.setattr(sel, "_head", lambda c, _k, _p: c)
        want = select(cand, k, p, xb)
        monkeypatch.undo()
        assert got.equals(want)


def test_the_head_cut_by_hand():
    """Depth 2: query 0 keeps 0.9 and both 0.5s (a tie at the cut); query 1 keeps its one row."""
    from pipeline.stages.select import _head

    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 0, 1],
            "node_idx": [1, 2, 3, 4, 1],
            "score": [0.5, 0.9, 0.1, 0.5, 0.2],
        }
    )
    assert _head(cand, 2, SelectParams.defaults())["node_idx"].to_list() == [1, 2, 4, 1]
    nan = cand.with_columns(pl.Series("score", [0.5, float("nan"), 0.1, 0.5, 0.2]))
    assert _head(nan, 2, SelectParams.defaults()).height == 5  # NaN: the whole frame
    ints = cand.with_columns(pl.Series("score", [5, 9, 1, 5, 2]))  # integer scores: no NaN test
    assert _head(ints, 2, SelectParams.defaults())["node_idx"].to_list() == [1, 2, 4, 1]


def test_k_in_docs_with_a_row_window_is_okss_page_cut():
    """OKS's fts5 backend: the pages of the first 4·limit node rows, at most limit pages, so a
    query whose best 4·limit rows are one page's returns one page (OKS: fewer than limit)."""
    from pipeline.stages.select import _cut

    r = pl.DataFrame({"query_idx": [0] * 5, "node_idx": [0, 1, 2, 3, 4], "rank": [1, 2, 3, 4, 5]})
    doc = np.array([0, 0, 0, 0, 1])  # rows 1-4 are page 0, row 5 page 1
    assert _cut(r, 2, doc, True, 2)["node_idx"].to_list() == [0, 1, 2, 3]
    assert _cut(r, 2, doc, True, None)["node_idx"].to_list() == [0, 1, 2, 3, 4]
    assert _cut(r, 2, doc, False, 2)["node_idx"].to_list() == [0, 1]
