"""The lexical channel's index kept between query groups over the same nodes
(``candidates.kept``, the channels stage's memo per node table): the tokens, the BM25 matrix and
its device copy are built once, and every group's candidates are those of a fresh channel."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.channels import bm25_device, lexical, token_cache
from pipeline.channels.candidates import LexicalChannel, Segments

WORDS = [f"t{i}" for i in range(30)]


def _tables(seed: int, n: int, nq: int):
    rng = np.random.default_rng(seed)
    text = lambda lo, hi: " ".join(rng.choice(WORDS, size=rng.integers(lo, hi)))  # noqa: E731
    nodes = pl.DataFrame(
        {"title": [text(0, 3) for _ in range(n)], "text": [text(2, 15) for _ in range(n)]}
    )
    queries = pl.DataFrame({"text": [text(1, 6) for _ in range(nq)]})
    return nodes, queries


def _counting(monkeypatch, module, name: str) -> list:
    calls, real = [], getattr(module, name)

    def wrapper(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("scorer, prf", [("scipy", 0), ("scipy", 2), ("torch", 0)])
def test_groups_over_the_same_nodes_share_one_index(monkeypatch, scorer, prf):
    from pipeline.stages.channels import LexicalParams

    nodes, queries = _tables(3, 200, 60)
    p = LexicalParams.defaults(scorer=scorer, candidates=10, prf_docs=prf)
    groups = [np.arange(0, 25), np.arange(25, 60), np.arange(0, 60, 7)]  # three query groups
    want = []
    for qs in groups:  # a fresh channel per group: what each group computed before
        ch = LexicalChannel.tokenise(nodes, queries[qs], p)
        segs = Segments.of([("all", np.arange(nodes.height), np.arange(len(qs)))])
        ranks, scores = ch.ranks_and_scores(segs)
        want.append((ranks, scores(ranks["query_idx"].to_numpy(), ranks["node_idx"].to_numpy())))
    tokenised = _counting(monkeypatch, token_cache, "tokenised")
    built = _counting(monkeypatch, lexical, "bm25_matrix")
    uploaded = _counting(monkeypatch, bm25_device, "upload")
    memo: dict = {}
    for qs, (ranks_w, scores_w) in zip(groups, want):
        ch = LexicalChannel.tokenise(nodes, queries[qs], p, memo=memo)
        segs = Segments.of([("all", np.arange(nodes.height), np.arange(len(qs)))])
        ranks, scores = ch.ranks_and_scores(segs)
        assert ranks.equals(ranks_w)
        got = scores(ranks["query_idx"].to_numpy(), ranks["node_idx"].to_numpy())
        assert got.tobytes() == scores_w.tobytes()
        assert ranks.height >= len(qs) * 5
    assert (len(tokenised), len(built)) == (1, 1)
    assert len(uploaded) == (1 if scorer == "torch" else 0)


def test_another_segmentation_or_setting_gets_its_own_matrix(monkeypatch):
    from pipeline.stages.channels import LexicalParams

    nodes, queries = _tables(4, 120, 20)
    built = _counting(monkeypatch, lexical, "bm25_matrix")
    memo: dict = {}
    idx = np.arange(nodes.height)
    for p, parts in [
        (LexicalParams.defaults(candidates=5), [("a", idx, np.arange(20))]),
        (
            LexicalParams.defaults(candidates=5),
            [("a", idx[:60], np.arange(10)), ("b", idx[60:], np.arange(10, 20))],
        ),
        (LexicalParams.defaults(candidates=5, k1=0.9), [("a", idx, np.arange(20))]),
        (LexicalParams.defaults(candidates=7), [("a", idx, np.arange(20))]),  # same matrix
    ]:
        ch = LexicalChannel.tokenise(nodes, queries, p, memo=memo)
        fresh = LexicalChannel.tokenise(nodes, queries, p)
        got, want = (c.ranks_and_scores(Segments.of(parts))[0] for c in (ch, fresh))
        assert got.equals(want)
    assert len(built) == 3 + 4  # three kept matrices; a fresh channel builds its own each time


def test_the_memo_keeps_at_most_kept_matrices(monkeypatch):
    """Six settings over one node table: the memo keeps the newest KEPT_MATRICES (4) matrices,
    and asking for an evicted one builds it again, with a fresh channel's answer."""
    from pipeline.channels import candidates
    from pipeline.stages.channels import LexicalParams

    nodes, queries = _tables(4, 120, 20)
    built = _counting(monkeypatch, lexical, "bm25_matrix")
    memo: dict = {}
    parts = [("a", np.arange(nodes.height), np.arange(20))]
    k1s = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.5]
    for k1 in k1s:
        p = LexicalParams.defaults(candidates=5, k1=k1)
        got = LexicalChannel.tokenise(nodes, queries, p, memo=memo).ranks_and_scores(
            Segments.of(parts)
        )[0]
        want = LexicalChannel.tokenise(nodes, queries, p).ranks_and_scores(Segments.of(parts))[0]
        assert got.equals(want)
        assert sum(k[0] == "bm25" for k in memo) <= candidates.KEPT_MATRICES == 4
    assert len(built) == 2 * len(k1s)  # k1=0.5 was evicted by the fifth and sixth: built again
