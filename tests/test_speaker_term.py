"""score.terms.speaker_named: a unit whose speaker the query names gets the term's weight (hand-checked)."""
import datetime as dt

import polars as pl
import pytest

from pipeline.stages import score

NOW = dt.datetime(2026, 1, 31, tzinfo=dt.timezone.utc)


def test_speaker_in_matches_whole_words_only():
    assert score.speaker_in("What is Caroline's identity?", "Caroline")
    assert score.speaker_in("Would Mel enjoy it?", "Mel")
    assert not score.speaker_in("What does Melanie paint?", "Mel")  # a prefix of another name
    assert not score.speaker_in("what is caroline's job?", "Caroline")  # names are matched as written
    assert not score.speaker_in("Who is Caroline?", None) and not score.speaker_in(None, "Caroline")


def test_speaker_named_term_hand_computed():
    nodes = pl.DataFrame({"node_id": ["a", "b", "c", "d"], "speaker": ["Caroline", "Melanie", None, "Caroline"]})
    queries = pl.DataFrame({"query_id": ["q0", "q1"], "text": ["What did Caroline research?", "Where is it?"]})
    cand = pl.DataFrame({"query_idx": [0, 0, 0, 0, 1, 1], "node_idx": [0, 1, 2, 3, 0, 1],
                         "fused": [0.1, 0.5, 0.3, 0.2, 0.4, 0.6]})
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
