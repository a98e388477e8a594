"""BME scope-bucket and story-time policy (docs/presets.md, ``bme``: Scope policy) on hand-classified rows."""

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.stages import scope_policy as sp
from pipeline.stages.select import SelectParams, select

NODES = pl.DataFrame(
    {
        "node_id": list("abcdefgh"),
        "scope_layer": [
            "pov",
            "pov",
            "pov",
            "objective",
            "objective",
            "objective",
            "objective",
            None,
        ],
        "scope_owner_type": ["character", "user", "character", None, None, None, None, None],
        "scope_owner": ["Alice", "me", "Bob", None, None, None, None, None],
        "scope_region": [None, None, None, "Castle", "Forest", "Sea", None, None],
        "scope_regions": [None, None, None, None, None, ["Castle Town"], ["forest"], None],
        "story_time": [3, None, 1, 5, 0, None, 2, 4],
        "story_time_end": [4, None, None, None, None, None, None, None],
        "story_tense": [None, None, "flashback", None, None, "future", None, None],
    }
)
QUERIES = pl.DataFrame(
    {
        "query_id": ["q0", "q1", "q2"],
        "text": ["what happened", "what did I plan for tomorrow", "我以前去过哪里"],
        "active_owners": [["alice"], [], None],
        "active_region": ["castle", None, "sea"],
        "adjacent_regions": [["forest"], None, None],
        "story_segment": [4, None, 4],
    }
)


def _apply(**kw):
    cand = pl.DataFrame(
        {
            "query_idx": [q for q in range(3) for _ in range(8)],
            "node_idx": list(range(8)) * 3,
            "score": [1.0] * 24,
        }
    )
    out = sp.apply(cand, NODES, QUERIES, sp.ScopeParams.defaults(policy="bme", **kw))
    return out, {
        (q, n): r
        for q, n, *r in out.cand.select(
            "query_idx",
            "node_idx",
            "bme_scope",
            "scope_priority",
            "bme_story_time",
            "story_priority",
        ).iter_rows()
    }


def test_scope_buckets_hand_classified():
    out, r = _apply(soft_directing=False)  # keep every row (no future suppression)
    assert out.factors == ["bme_scope", "bme_story_time"] and out.sort_by == [
        "scope_priority",
        "story_priority",
    ]
    # q0: active owner alice, region castle, adjacent forest
    assert r[0, 0][:2] == [1.25, 5]  # POV of the active character (owner match is case-insensitive)
    assert r[0, 1][:2] == [1.05, 4]  # user POV, no active user owners → userPov
    assert r[0, 2][:2] == [0.6, 0]  # POV of Bob, who is not active → otherPov
    assert r[0, 3][:2] == [1.15, 3]  # primary region Castle = active region (case-insensitive)
    assert r[0, 4][:2] == [0.9, 2]  # region Forest is in the adjacency list
    assert r[0, 6][:2] == [0.9, 2]  # no primary region, a region token matches an adjacent region
    assert r[0, 7][:2] == [0.75, 1]  # no scope_layer → objective, no region → global
    # q1: no active owners → implicit character POV fallback; no active region → every objective node global
    assert r[1, 2][:2] == [1.25, 5] and r[1, 4][:2] == [0.75, 1]
    # q2: region sea: f's primary region Sea → current region
    assert r[2, 5][:2] == [1.15, 3]


def test_story_time_buckets_hand_classified_and_future_suppressed():
    out, r = _apply()
    # q0: active segment 4, no cue words
    assert r[0, 0][2:] == [1.15, 5]  # span 3..4 contains 4 → current
    assert r[0, 1][2:] == [0.88, 3]  # undated
    assert r[0, 2][2:] == [0.72, 2]  # tense flashback, before the active segment
    assert r[0, 4][2:] == [0.64, 1]  # 4 − 0 = 4 > 2 segments back → distant past
    assert r[0, 6][2:] == [1.0, 4]  # 4 − 2 = 2 → adjacent past
    assert (0, 3) not in r and (
        0,
        5,
    ) not in r  # segment 5 > 4 and tense future: suppressed (dropped)
    # q1: no active segment → dated nodes 0.92; "plan"/"tomorrow" = future cue → the future node is kept at 0.72
    assert r[1, 0][2:] == [0.92, 3] and r[1, 5][2:] == [0.72, 0] and r[1, 1][2:] == [0.88, 3]
    # q2: 以前 = flashback cue → past nodes become flashbacks at 1.02
    assert r[2, 4][2:] == [1.02, 2] and r[2, 2][2:] == [1.02, 2]
    assert (
        out.cand.height == 24 - 2 - 2
    )  # q0 and q2 drop d and f (future; a flashback cue is no future cue)


def test_soft_directing_off_keeps_future_nodes_and_sort_off_has_no_priorities():
    cand = pl.DataFrame({"query_idx": [0] * 8, "node_idx": list(range(8)), "score": [1.0] * 8})
    out = sp.apply(
        cand,
        NODES,
        QUERIES,
        sp.ScopeParams.defaults(policy="bme", soft_directing=False, sort=False),
    )
    assert out.cand.height == 8 and out.sort_by == [] and "scope_priority" not in out.cand.columns
    assert set(out.cand["bme_story_time"]) == {1.0}


def test_missing_columns_degrade_to_no_op_with_a_warning(caplog):
    cand = pl.DataFrame({"query_idx": [0], "node_idx": [0], "score": [1.0]})
    out = sp.apply(
        cand, pl.DataFrame({"node_id": ["a"]}), QUERIES, sp.ScopeParams.defaults(policy="bme")
    )
    assert out.cand.equals(cand) and out.factors == [] and out.sort_by == []
    assert "scope_layer" in caplog.text and "story_time" in caplog.text
    only_scope = sp.apply(
        cand,
        NODES.select("node_id", "scope_layer"),
        QUERIES.select("query_id", "text"),
        sp.ScopeParams.defaults(policy="bme"),
    )
    assert only_scope.factors == ["bme_scope"] and only_scope.cand["bme_scope"].to_list() == [
        0.6
    ]  # no owners known
    with pytest.raises(ConfigError, match="scope_policy.policy"):
        sp.apply(cand, NODES, QUERIES, sp.ScopeParams.defaults(policy="bm"))


def test_lexicographic_sort_puts_the_bucket_before_the_score():
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0],
            "node_idx": [0, 1, 2],
            "score": [0.9, 0.1, 0.5],
            "scope_priority": [1, 5, 1],
            "story_priority": [3, 0, 5],
        }
    )
    out = select(cand, 3, SelectParams.defaults(sort_by=("scope_priority", "story_priority")))
    assert out["node_idx"].to_list() == [1, 2, 0]  # scope 5 first; then story 5 before story 3
    assert select(cand, 3, SelectParams.defaults())["node_idx"].to_list() == [0, 2, 1]


def test_cue_pattern_matches_english_words_only_whole():
    assert sp.cue_mode(
        pl.DataFrame({"text": ["the planet", "we plan it", "回忆一下"]}), sp.ScopeParams.defaults()
    ).to_list() == ["", "future", "flashback"]
