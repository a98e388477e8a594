"""OKS team injection layer (pipeline.inject.team, inject.format=oks): MMR with area/type
similarity, ItemCF/UserCF boosts from a five-agent log (sealed per team), per-agent cooldown —
all values by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pipeline.inject import team
from pipeline.inject.formats import render

INF = -np.inf


def test_mmr_order_by_hand():
    # q0: boosts 1, .9, .8, .5; (area, type) = (A,t) (A,u) (B,t) (B,u); λ = .5
    #   pick d0; then d1 .9-.5=.4, d2 .8-.5=.3, d3 .5-0 → d3; then d1 .4 > d2 .3
    # q1: boosts 1, .95, .4 (A,t) (A,t) (C,u): d1 shares both with d0 → .95-1 < .4 → d2 first
    boost = np.array([[1.0, 0.9, 0.8, 0.5], [1.0, 0.95, 0.4, INF]])
    area = np.array([[0, 0, 1, 1], [0, 0, 2, -1]])
    type_ = np.array([[0, 1, 0, 1], [0, 0, 1, -1]])
    out = team.mmr_order(boost, area, type_, lam=0.5)
    assert out.tolist() == [[0, 3, 1, 2], [0, 2, 1, -1]]
    # λ = .3: d1 .6 > d2 .5 = d3 .5 → d1; then d2 .5 > d3 .2 → order unchanged
    assert team.mmr_order(boost[:1], area[:1], type_[:1], lam=0.3).tolist() == [[0, 1, 2, 3]]


def test_mmr_missing_area_is_never_similar():
    boost = np.array([[1.0, 0.9, 0.6]])
    area = np.array([[-1, -1, 0]])  # d0, d1 have no area: no overlap between them
    type_ = np.array([[-1, -1, -1]])
    assert team.mmr_order(boost, area, type_, lam=1.0).tolist() == [[0, 1, 2]]


LOG = {"A": "xyz", "B": "xy", "C": "xyw", "D": "zw", "E": "yz"}


def _log(team="t1", extra=()):
    rows = [(team, a, list(s)) for a, s in LOG.items()] + list(extra)
    return pl.DataFrame(rows, schema=["team", "agent_id", "slugs"], orient="row")


def test_cf_boosts_by_hand_and_sealed():
    rows = pl.DataFrame({"query_id": ["q", "q"], "slug": ["x", "y"]})
    queries = pl.DataFrame({"query_id": ["q"], "team": ["t1"], "agent_id": ["D"]})
    ib, ub = team.cf_boosts(_log(), rows, queries)
    # D injected z, w. ItemCF x: sim(z,x) + sim(w,x) = 1/3 + 1/sqrt6; y: 2/sqrt12 + 1/sqrt8
    assert ib == pytest.approx([1 / 3 + 1 / math.sqrt(6), 2 / math.sqrt(12) + 1 / math.sqrt(8)])
    # UserCF x: agents A, B, C injected x; usim(D, ·) = 1/sqrt6, 0, 1/sqrt6
    # y: A, B, C, E: 1/sqrt6 + 0 + 1/sqrt6 + 1/2
    assert ub == pytest.approx([2 / math.sqrt(6), 2 / math.sqrt(6) + 1 / 2])
    # another team's rows (same agent names, same slugs) change nothing for team t1
    other = [("t2", "D", ["x", "y"]), ("t2", "A", ["w"]), ("t2", "Z", ["x"])]
    ib2, ub2 = team.cf_boosts(_log(extra=other), rows, queries)
    assert ib2.tolist() == ib.tolist() and ub2.tolist() == ub.tolist()


def _recall(n_queries):
    # pages p1..p4 per query, scores 2.0, 1.9, 1.8, 1.7 (all above the 0.7 floor)
    out = []
    for q in range(n_queries):
        out += [(f"q{q}", r, f"p{r}", 2.1 - r / 10) for r in range(1, 5)]
    return pl.DataFrame(out, schema=["query_id", "rank", "node_id", "score"], orient="row")


NODES = pl.DataFrame(
    {
        "node_id": ["p1", "p2", "p3", "p4"],
        "text": ["a", "b", "c", "d"],
        "area": ["web", "web", "db", "ops"],
        "type": ["concept", "concept", "concept", "strategy"],
    }
)


def test_per_agent_cooldown():
    # agents a1 (sessions s1, s2) and a2 (s3); top-n 2, cooldown 10
    queries = pl.DataFrame(
        {
            "query_id": ["q0", "q1", "q2"],
            "text": ["a long enough prompt"] * 3,
            "group": ["s1", "s2", "s3"],
            "agent_id": ["a1", "a1", "a2"],
            "now": [1, 2, 3],
        }
    )
    by_agent = render(_recall(3), NODES, "oks", 2, queries=queries, cooldown_by="agent", floor=0.0)
    got = dict(zip(by_agent["query_id"], by_agent["node_ids"].to_list()))
    # a1 saw p1 p2 at q0, so its next session gets p3 p4; a2's read state is its own
    assert got == {"q0": ["p1", "p2"], "q1": ["p3", "p4"], "q2": ["p1", "p2"]}
    by_group = render(_recall(3), NODES, "oks", 2, queries=queries, floor=0.0)
    assert by_group["node_ids"].to_list() == [["p1", "p2"]] * 3  # sessions apart: no cooldown


def test_mmr_and_boost_in_render():
    queries = pl.DataFrame({"query_id": ["q0"], "text": ["a long enough prompt"]})
    # MMR λ=0.5 over score: p1 2.0; p2 1.9-1.0 (web, concept) = .9; p3 1.8-.5 (concept) = 1.3;
    # p4 1.7-0 = 1.7 → p4; then p3 1.3 vs p2 .9 → p3
    out = render(_recall(1), NODES, "oks", 3, queries=queries, mmr_lambda=0.5, floor=0.0)
    assert out["node_ids"].to_list() == [["p1", "p4", "p3"]]
    # ItemCF boost from a log of three agents (no team column: one team)
    log = pl.DataFrame(
        {"agent_id": ["a", "b", "me"], "slugs": [["p1", "p4"], ["p1", "p4"], ["p1"]]}
    )
    q = queries.with_columns(agent_id=pl.lit("me"))
    boosted = render(_recall(1), NODES, "oks", 2, queries=q, log=log, beta_item=1.0, floor=0.0)
    # ItemCF: me injected p1; sim(p1, p4) = 2/sqrt(3·2) → p4 key 1.7·(1 + .816) = 3.09 > p1 2.0
    assert boosted["node_ids"].to_list() == [["p4", "p1"]]


def test_tier_counts_boundaries():
    from pipeline.run.outputs import tier_counts
    from pipeline.stages.signals import tier

    score = np.array([0.7, 0.6999, 0.4, 0.3999, 0.15, 0.1499, 0.0, 2.0])
    sig = pl.DataFrame({"tier": list(tier(score))})
    assert tier_counts(sig) == {"hot": 2, "warm": 2, "cold": 2, "evictable": 2}
    assert list(tier_counts(sig)) == ["hot", "warm", "cold", "evictable"]
    assert tier_counts(None) == {} and tier_counts(pl.DataFrame({"x": [1]})) == {}
