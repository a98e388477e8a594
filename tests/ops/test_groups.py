"""Query groups and their reference time (``ops.scope.run_groups``): a query's reference time is the
config's ``now``, else its own ``now``, else the latest timestamp among the nodes it may see."""

import datetime as dt

import numpy as np
import polars as pl

from pipeline.ops.scope import run_groups

UTC = dt.timezone.utc
TS = pl.Datetime("us", "UTC")


def day(d: int) -> dt.datetime:
    return dt.datetime(2025, 1, d, tzinfo=UTC)


NODES = pl.DataFrame(
    {
        "node_id": ["a1", "a2", "ap", "b1"],
        "text": ["x"] * 4,
        "doc_id": ["a/s0", "a/s1", "a/s1", "b/s0"],
        "created_at": [day(2), day(5), day(9), day(20)],
        "updated_at": [None, day(6), None, None],
        "visibility": [None, None, ["u1"], None],
    },
    schema_overrides={"created_at": TS, "updated_at": TS},
)
QUERIES = pl.DataFrame(
    {
        "query_id": ["q1", "q2", "q3", "q4", "q5"],
        "text": ["x"] * 5,
        "doc_scope": [["a"], ["a"], ["a"], ["b"], None],
        "viewer": [None, "u1", None, None, None],
        "now": [None, None, day(7), None, None],
    },
    schema_overrides={"doc_scope": pl.List(pl.String), "now": TS},
)


def test_reference_time_is_the_query_s_own_or_the_latest_visible_node():
    got = {
        tuple(QUERIES["query_id"][int(q)] for q in qs): (rows.tolist(), t)
        for _k, rows, qs, t in run_groups(NODES, QUERIES)
    }
    assert got == {
        ("q1",): ([0, 1], day(6)),  # a1, a2 (the private note is not its): a2 updated on day 6
        ("q3",): ([0, 1], day(7)),  # the same nodes, its own now
        ("q2",): ([0, 1, 2], day(9)),  # viewer u1 also sees the private note, created on day 9
        ("q4",): ([3], day(20)),
        ("q5",): ([0, 1, 3], day(20)),  # the whole corpus without the private note
    }


def test_config_now_overrides_every_query():
    groups = run_groups(NODES, QUERIES, now=day(30))
    assert {t for *_x, t in groups} == {day(30)}
    assert sorted(len(qs) for _k, _r, qs, _t in groups) == [
        1,
        1,
        1,
        2,
    ]  # q1 and q3 now share a group


def test_rows_by_key_is_isin_and_spans_by_hand():
    """``RowsByKey.of`` is ``flatnonzero(isin(key, keys))`` on unsorted keys with repeats (a query's
    parts), and ``spans`` concatenates ranges: [2, 3, 4] + [] + [7]."""
    from pipeline.ops.scope import RowsByKey
    from pipeline.ops.sparse_entries import spans

    assert spans(np, np.array([2, 5, 7]), np.array([5, 5, 8])).tolist() == [2, 3, 4, 7]
    rng = np.random.default_rng(4)
    for _ in range(50):
        key = rng.integers(0, 30, rng.integers(0, 200))
        keys = np.unique(rng.integers(0, 35, rng.integers(0, 12)))
        got = RowsByKey(key).of(keys)
        assert got.tolist() == np.flatnonzero(np.isin(key, keys)).tolist()
