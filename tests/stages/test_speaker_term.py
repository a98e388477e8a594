"""score.terms.speaker_named: a unit whose speaker the query names gets the term's weight (hand-checked)."""

import datetime as dt

import polars as pl
import pytest

from pipeline.ops.speakers import speaker_in
from pipeline.stages import score

NOW = dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)


def test_speaker_in_matches_whole_words_only():
    assert speaker_in("What is Caroline's identity?", "Caroline")
    assert speaker_in("Would Mel enjoy it?", "Mel")
    assert not speaker_in("What does Melanie paint?", "Mel")  # a prefix of another name
    assert not speaker_in("what is caroline's job?", "Caroline")  # names are matched as written
    assert not speaker_in("Who is Caroline?", None) and not speaker_in(None, "Caroline")


def test_speaker_named_term_hand_computed():
    nodes = pl.DataFrame(
        {"node_id": ["a", "b", "c", "d"], "speaker": ["Caroline", "Melanie", None, "Caroline"]}
    )
    queries = pl.DataFrame(
        {"query_id": ["q0", "q1"], "text": ["What did Caroline research?", "Where is it?"]}
    )
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 0, 1, 1],
            "node_idx": [0, 1, 2, 3, 0, 1],
            "fused": [0.1, 0.5, 0.3, 0.2, 0.4, 0.6],
        }
    )
    terms = {"fused": 1.0, "speaker_named": 2.0}
    df = score.attach(cand, nodes, queries, None, list(terms), NOW)
    out = score.compute(df, terms, [], normalize=False)
    # q0 names Caroline: nodes a and d gain 2; q1 names nobody: fused only
    assert out["speaker_named"].to_list() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert out["score"].to_list() == pytest.approx([2.1, 0.5, 0.3, 2.2, 0.4, 0.6])


def test_speaker_named_without_a_speaker_column_is_zero():
    nodes = pl.DataFrame({"node_id": ["a"]})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["Caroline?"]})
    cand = pl.DataFrame({"query_idx": [0], "node_idx": [0], "fused": [0.5]})
    df = score.attach(cand, nodes, queries, None, ["fused", "speaker_named"], NOW)
    out = score.compute(df, {"fused": 1.0, "speaker_named": 3.0}, [], normalize=False)
    assert out["score"].to_list() == [0.5]


def _reached(boost: float, question: str = "What did Caroline paint?") -> set[int]:
    """Nodes 0 (Caroline) – 2 and 1 (Melanie) – 3 linked; fused 0.5 on node 0, 0.6 on node 1; one seed."""
    from pipeline.stages import diffuse

    nodes = pl.DataFrame(
        {
            "node_id": ["n0", "n1", "n2", "n3"],
            "text": ["a", "b", "c", "d"],
            "speaker": ["Caroline", "Melanie", "Caroline", "Melanie"],
        }
    )
    queries = pl.DataFrame({"query_id": ["q"], "text": [question]})
    edges = pl.DataFrame(
        {
            "src": [0, 1],
            "dst": [2, 3],
            "weight": [1.0, 1.0],
            "inhibit": [False, False],
            "relation": ["edge", "edge"],
        },
        schema_overrides={"src": pl.Int64, "dst": pl.Int64, "weight": pl.Float32},
    )
    cand = pl.DataFrame(
        {"query_idx": [0, 0], "node_idx": [0, 1], "fused": [0.5, 0.6]},
        schema={"query_idx": pl.Int64, "node_idx": pl.Int64, "fused": pl.Float32},
    )
    p = diffuse.DiffusionParams.defaults(
        method="pedsa", seed_k=1, steps=2, min_energy=0.0, top_k=10, speaker_seed_boost=boost
    )
    return set(
        diffuse.run(cand, nodes, queries, edges, p)
        .filter(pl.col("graph") > 0)["node_idx"]
        .to_list()
    )


def test_speaker_seed_boost_moves_the_seed_to_the_named_speaker():
    assert _reached(0.0) == {1, 3}  # 0.6 > 0.5: Melanie's turn seeds
    assert _reached(0.1) == {1, 3}  # 0.5 × 1.1 = 0.55 < 0.6
    assert _reached(0.5) == {0, 2}  # 0.5 × 1.5 = 0.75 > 0.6: Caroline's turn seeds
    assert _reached(0.5, "What did Caroline's friend say?") == {0, 2}
    assert _reached(0.5, "What did they paint?") == {1, 3}  # nobody named: no boost


def test_speaker_named_x2_factor_doubles_the_named_speakers_units():
    nodes = pl.DataFrame({"node_id": ["a", "b"], "speaker": ["Caroline", "Melanie"]})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["Would Caroline enjoy it?"]})
    cand = pl.DataFrame({"query_idx": [0, 0], "node_idx": [0, 1], "fused": [0.3, 0.5]})
    df = score.attach(cand, nodes, queries, None, ["fused", "speaker_named_x2"], NOW)
    out = score.compute(df, {"fused": 1.0}, ["speaker_named_x2"], normalize=False)
    assert out["score"].to_list() == pytest.approx([0.6, 0.5])


def test_speaker_gated_x2_doubles_only_where_the_top_three_agree_with_the_name():
    # q0 names Caroline and its three best fused units (c0 0.9, c1 0.8, c3 0.7) are hers: × 2 for
    # her units. q1 names Caroline too but Melanie's m2 is among its top three (0.85): no change.
    # q2 names nobody: no change. q3 names Caroline; m2 and c3 tie at 0.5 for third place and the
    # tie goes to the lower node index, m2 (Melanie's), so the gate stays shut.
    nodes = pl.DataFrame(
        {
            "node_id": ["c0", "c1", "m2", "c3"],
            "speaker": ["Caroline", "Caroline", "Melanie", "Caroline"],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q0", "q1", "q2", "q3"],
            "text": ["What did Caroline paint?", "Did Caroline swim?", "Who swam?", "Caroline?"],
        }
    )
    cand = pl.DataFrame(
        {
            "query_idx": [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3],
            "node_idx": [0, 1, 2, 3, 0, 1, 2, 3, 0, 2, 0, 1, 2, 3],
            "fused": [0.9, 0.8, 0.1, 0.7, 0.9, 0.2, 0.85, 0.8, 0.5, 0.4, 0.6, 0.6, 0.5, 0.5],
        }
    )
    df = score.attach(cand, nodes, queries, None, ["fused", "speaker_gated_x2"], NOW)
    out = score.compute(df, {"fused": 1.0}, ["speaker_gated_x2"], normalize=False)
    assert out["speaker_gated_x2"].to_list() == [2.0, 2.0, 1.0, 2.0] + [1.0] * 10
    assert out["score"].to_list() == pytest.approx(
        [1.8, 1.6, 0.1, 1.4, 0.9, 0.2, 0.85, 0.8, 0.5, 0.4, 0.6, 0.6, 0.5, 0.5]
    )
