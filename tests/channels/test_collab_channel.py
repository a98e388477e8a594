"""The collab channel (channels=[lexical, collab]): hand-computed candidates from a team's log,
and sealed teams: another team's log rows never change a team's candidate bytes (property)."""

from __future__ import annotations

import io
import math

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.channels import collab as collab_channel
from pipeline.channels.candidates import CandidateInputs, ChannelSettings, generate
from pipeline.channels.collab import CollabParams
from pipeline.stages.channels import LexicalParams

PAGES = ["alpha", "beta", "gamma", "delta"]
SLUGS = ["a", "b", "c", "d"]
NODES = pl.DataFrame(
    {
        "node_id": [f"{t}/{s}" for t in ("t1", "t2") for s in SLUGS],
        "doc_id": [f"{t}/{s}.md" for t in ("t1", "t2") for s in SLUGS],
        "text": PAGES * 2,
    }
)
QUERIES = pl.DataFrame(
    {
        "query_id": ["q1", "q2"],
        "text": ["alpha", "alpha"],
        "team": ["t1", "t2"],
        "doc_scope": [["t1"], ["t2"]],
    }
)
LOG1 = [("t1", "s1", ["a", "b"]), ("t1", "s2", ["a", "b"]), ("t1", "s3", ["a", "c"])]


def _log(rows):
    return pl.DataFrame(
        rows,
        schema={"team": pl.String, "session_id": pl.String, "slugs": pl.List(pl.String)},
        orient="row",
    )


def _run(log_rows, sim="itemcf"):
    lex = LexicalParams.defaults(stopwords=None)
    cp = CollabParams.defaults(sim=sim, basket="session")
    return generate(
        NODES,
        QUERIES,
        ChannelSettings(("lexical", "collab"), lexical=lex, collab=cp),
        CandidateInputs(log=_log(log_rows)),
    )


def test_collab_candidates_by_hand():
    out = _run(LOG1)
    q1 = out.filter(pl.col("query_idx") == 0).sort("node_idx")
    # BM25 finds t1/a only; ItemCF over sessions: U_a = {s1,s2,s3}, U_b = {s1,s2}, U_c = {s3}
    assert q1["node_idx"].to_list() == [0, 1, 2]
    assert q1["lexical_rank"].to_list() == [1, None, None]
    assert q1["collab_rank"].to_list() == [None, 1, 2]
    assert q1["collab"].to_list() == pytest.approx([0.0, 2 / math.sqrt(6), 1 / math.sqrt(3)])
    # team t2 has no log rows: its query gets no collab candidate (t1's statistics never reach it)
    assert out.filter(pl.col("query_idx") == 1)["collab_rank"].is_null().all()
    # Swing: sessions s1, s2 share a, b (overlap 2) → swing(a, b) = 1/3; c has one session only
    sw = _run(LOG1, "swing").filter(pl.col("query_idx") == 0)
    assert sw.filter(pl.col("collab_rank") == 1)["node_idx"].to_list() == [1]
    assert sw.filter(pl.col("node_idx") == 1)["collab"].to_list() == pytest.approx([1 / 3])


ROW = st.tuples(
    st.just("t2"),
    st.sampled_from(["s1", "s2", "s7", "s9"]),
    st.lists(st.sampled_from(SLUGS), min_size=1, max_size=4),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(other=st.lists(ROW, max_size=8))
def test_other_teams_rows_never_change_a_teams_candidates(other):
    alone = _run(LOG1).filter(pl.col("query_idx") == 0)
    mixed = _run(LOG1 + other).filter(pl.col("query_idx") == 0)
    assert _parquet(alone) == _parquet(mixed)  # the bytes recall.parquet is written as


def _parquet(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.rechunk().write_parquet(buf)
    return buf.getvalue()


def test_a_log_without_the_basket_column_is_a_clear_error():
    from pipeline.contract.errors import DataError

    log = pl.DataFrame({"team": ["t1"], "slugs": [["a", "b"]]})
    with pytest.raises(DataError, match="session_id"):
        collab_channel.similarity(log, CollabParams.defaults(basket="session"))
