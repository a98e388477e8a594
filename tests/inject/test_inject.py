"""Injection layers per system (docs/presets.md fidelity tables), hand-checked on tiny tables."""

import polars as pl

from pipeline.inject.formats import InjectParams, render, soul_boost


def _recall(qids, scores):
    rows = [(q, r + 1, n, s) for q in qids for r, (n, s) in enumerate(scores)]
    return pl.DataFrame(
        rows,
        schema=["query_id", "rank", "node_id", "score"],
        orient="row",
        schema_overrides={"rank": pl.Int32},
    )


def _shown(out, qid):
    return out.filter(pl.col("query_id") == qid)["node_ids"].item().to_list()


def test_oks_hook_constants():
    p = InjectParams(format="oks")
    assert (p.get("floor"), p.get("cooldown"), p.get("max_nodes")) == (0.7, 10, 3)
    assert (
        InjectParams(format="bme").get("max_nodes") == 12
        and InjectParams(format="reme").get("max_nodes") is None
    )
    # Soul Boost: concept 0.6 × lesson 1.2 = 0.72; anti-pattern 1.5 × 1.2 × generic title 0.5 = 0.9
    assert (
        soul_boost("concept", "T", "check the cache"),
        soul_boost("anti-pattern", "Overview", "x"),
    ) == (0.72, 0.9)


def test_oks_hook_floor_top3_and_cooldown_per_group():
    nodes = pl.DataFrame({"node_id": list("abcde"), "text": ["t"] * 5})
    recall = _recall(
        ["q1", "q2", "q3", "solo"], [("a", 0.95), ("b", 0.9), ("c", 0.8), ("d", 0.75), ("e", 0.5)]
    )
    ts = (
        pl.Series(["2026-01-03", "2026-01-01", "2026-01-02", "2026-01-01"])
        .str.to_datetime()
        .dt.replace_time_zone("UTC")
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "solo"],
            "text": ["a prompt"] * 4,
            "group": ["s", "s", "s", None],
            "now": ts,
        }
    )
    out = render(recall, nodes, "oks", queries=queries)
    # turn order in group s by now: q2, q3, q1. q2: floor 0.7 drops e, top 3 → a b c; q3: a b c cool → d;
    # q1: a b c d all shown within 10 turns → nothing (no row). "solo" is a session of its own.
    assert (_shown(out, "q2"), _shown(out, "q3"), _shown(out, "solo")) == (
        ["a", "b", "c"],
        ["d"],
        ["a", "b", "c"],
    )
    assert "q1" not in out["query_id"].to_list()
    # cooldown 1: q1 (turn 2) may show a b c again (last shown at turn 0)
    assert _shown(render(recall, nodes, "oks", queries=queries, cooldown=1), "q1") == [
        "a",
        "b",
        "c",
    ]


def test_oks_goal_reorder_puts_goal_slugs_first():
    nodes = pl.DataFrame(
        {"node_id": ["a", "g"], "text": ["t", "t"], "doc_id": ["wiki/a.md", "wiki/ship-it.md"]}
    )
    recall = _recall(["q"], [("a", 0.9), ("g", 0.72)]).with_columns(
        doc_id=pl.Series(["wiki/a.md", "wiki/ship-it.md"])
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["a prompt"], "goals": [["ship-it"]]})
    assert _shown(render(recall, nodes, "oks", queries=queries), "q") == ["g", "a"]
    assert _shown(render(recall, nodes, "oks", queries=queries, goal_reorder=False), "q") == [
        "a",
        "g",
    ]


def test_bme_cap_core_and_scope_sections():
    """Ann's POV p, the user's POV u, r in the active region, g0..g7 global (seq = index), e an event
    nobody recalled (core), o another owner's POV. Recall ranks p u r g0..g7 o x (14 rows)."""
    ids = ["p", "u", "r"] + [f"g{i}" for i in range(8)] + ["o", "x", "e"]
    n = len(ids)
    nodes = pl.DataFrame(
        {
            "node_id": ids,
            "text": [f"text {i}" for i in ids],
            "type": ["pov_memory"] * 2 + ["fact"] * 9 + ["pov_memory", "fact", "event"],
            "scope_layer": ["pov", "pov"] + ["objective"] * 9 + ["pov", "objective", "objective"],
            "scope_owner_type": ["character", "user"] + [None] * 9 + ["character", None, None],
            "scope_owner": ["Ann", "Me"] + [None] * 9 + ["Bob", None, None],
            "scope_region": [None, None, "castle"] + [None] * (n - 3),
            "seq": [0, 0, 0] + list(range(8)) + [0, 0, 1],
        }
    )
    queries = pl.DataFrame(
        {"query_id": ["q"], "text": ["x"], "active_owners": [["ann"]], "active_region": ["castle"]}
    )
    recall = _recall(["q"], [(i, 1.0 - 0.01 * k) for k, i in enumerate(ids[:-1])])
    out = render(recall, nodes, "bme", queries=queries)
    text = out["text"].item()
    heads = [ln for ln in text.splitlines() if ln.startswith("[")]
    assert heads == [
        "[Memory - Character POV: Ann]",
        "[Memory - User POV / Not Character Facts]",
        "[Memory - Objective / Current Region]",
        "[Memory - Objective / Global]",
    ]
    # the cap: ranks 1..12 = p u r g0..g7 o; x (rank 13) is cut. Global = g0..g7 + core e (seq 1),
    # most recent first, 6 kept: g7 g6 g5 g4 g3 g2. Bob's POV (otherPov) is left out.
    assert _shown(out, "q") == ["p", "u", "r", "g7", "g6", "g5", "g4", "g3", "g2"]
    no_core = render(recall, nodes, "bme", queries=queries, max_nodes=3)
    assert _shown(no_core, "q") == ["p", "u", "r", "e"]  # the event is injected though not recalled
    assert _shown(render(recall, nodes, "bme", queries=queries, max_nodes=3, core=False), "q") == [
        "p",
        "u",
        "r",
    ]


def test_bme_node_ids_follow_the_table_rows():
    """formatInjection writes a section's nodes grouped by type (one table per type, types in order
    of first appearance), each group most recent first: ``node_ids`` lists them in that order,
    not by seq across types (ST-BME's ``selected``, the oracle's injection order)."""
    nodes = pl.DataFrame(
        {
            "node_id": ["ev5", "lo4", "ev3", "ch2"],
            "text": ["fire", "harbor", "rescue", "aria"],
            "type": ["event", "location", "event", "character"],
            "seq": [5, 4, 3, 2],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": ["x"]})
    recall = _recall(["q"], [("lo4", 0.9), ("ch2", 0.8), ("ev3", 0.7), ("ev5", 0.6)])
    out = render(recall, nodes, "bme", queries=queries)
    text = out["text"].item()
    assert [ln for ln in text.splitlines() if ln.endswith(":")] == [
        "event:",
        "location:",
        "character:",
    ]
    rows = [ln.split(" | ")[0].strip("| ") for ln in text.splitlines() if ln.startswith("| ")]
    assert [r for r in rows if r != "text"] == ["fire", "rescue", "harbor", "aria"]
    assert _shown(out, "q") == ["ev5", "ev3", "lo4", "ch2"]  # was ev5 lo4 ev3 ch2 (by seq)


def test_oks_hook_pages_cooldown_boundary_state_and_skipped_prompts():
    """OKS's hook (assets/hooks/user-prompt-recall.py @ 6a281b47): pages, not rows; a page shown at
    turn t is skipped while turn − t < cooldown; a short or trivial prompt takes no turn; a
    session's recall-state (n, seen) continues."""
    nodes = pl.DataFrame(
        {
            "node_id": ["a#0", "a#1", "b#0", "c#0"],
            "text": ["t"] * 4,
            "doc_id": ["w/a.md", "w/a.md", "w/b.md", "w/c.md"],
            "body": ["Body  of\n a", "Body  of\n a", "", "c"],
            "title": ["A", "A", "缓存失效策略", ""],
            "type": ["strategy", "strategy", None, "concept"],
        }
    )
    rows = [("a#1", 0.9), ("a#0", 0.85), ("b#0", 0.8), ("c#0", 0.6996)]
    qids = [f"q{i}" for i in range(5)]
    recall = _recall(qids, rows).with_columns(
        doc_id=pl.col("node_id").str.replace(r"#\d$", ".md").str.replace("^", "w/")
    )
    queries = pl.DataFrame(
        {
            "query_id": qids,
            "text": ["first prompt", "ok", "second prompt", "third prompt", "fourth prompt"],
            "group": ["s"] * 5,
        }
    )
    out = render(recall, nodes, "oks", queries=queries, cooldown=2)
    # q0 (turn 1): pages a (best row a#1), b; c's relevance rounds to 0.700 ≥ 0.7 → a b c.
    # q1 "ok" is trivial: no turn, no injection. q2 (turn 2): a b c shown at 1, 2 − 1 < 2 → none.
    # q3 (turn 3): 3 − 1 = 2, not < 2 → a b c again.
    assert _shown(out, "q0") == ["a#1", "b#0", "c#0"] and _shown(out, "q3") == ["a#1", "b#0", "c#0"]
    assert {"q1", "q2"}.isdisjoint(out["query_id"].to_list())
    assert out.filter(pl.col("query_id") == "q0")["text"].item() == (
        "## 相关记忆\n相关已沉淀记忆（引用时用 slug；与当前事实冲突以最新为准）：\n"
        "- [strategy] A (a) rel=0.90\n    Body of a\n"
        "- [concept] 失效 策略 缓存 (b) rel=0.80\n"  # OKS shows its FTS5 title: the jieba set
        "- [concept] c (c) rel=0.70\n    c"
    )
    # the session had taken 4 turns and showed b at turn 4: q0 is turn 5, 5 − 4 < 10 → a c only
    state = queries.with_columns(
        hook_n=pl.lit(4, pl.Int64),
        hook_seen=pl.lit([{"slug": "b", "turn": 4}]),
    )
    assert _shown(render(recall, nodes, "oks", queries=state), "q0") == ["a#1", "c#0"]
