"""doc_scope grouping (the top-k tie rules are in test_topk.py)."""

import numpy as np
import polars as pl

from pipeline.ops.scope import in_scope, scope_groups


def test_scope_prefix_rule():
    docs = np.array(["conv-1/session_1", "conv-1/session_2", "conv-10/session_1", "conv-1", ""])
    assert in_scope(docs, ("conv-1",)).tolist() == [True, True, False, True, False]


def test_groups_apply_scope_visibility_and_archived():
    nodes = pl.DataFrame(
        {
            "node_id": list("abcde"),
            "doc_id": ["c1/s1", "c1/s2", "c2/s1", "c1", None],
            "visibility": [None, ["ann"], ["*"], None, ["bob", "ann"]],
            "archived": [False, False, False, True, None],
        }
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q0", "q1", "q2", "q3"],
            "doc_scope": [["c1"], None, ["c2"], ["c1"]],
            "viewer": ["ann", None, "bob", "ann"],
        }
    )
    groups = scope_groups(nodes, queries)
    assert [(g[0], g[1].tolist(), g[2].tolist()) for g in groups] == [
        ((("c1",), "ann"), [0, 1], [0, 3]),
        ((None, None), [0, 2], [1]),
        ((("c2",), "bob"), [2], [2]),
    ]
    with_archived = scope_groups(nodes, queries, include_archived=True)
    assert with_archived[0][1].tolist() == [0, 1, 3]
