"""Cache and memo keys hash the exact ordered rows (issue 26, items 1 and 2).

- **Memo** (item 1): two workspaces whose queries come once in u0, u1 order and once (a second
  viewer) in u1, u0 order make two packs holding the same nodes in another order. A memo kept
  across them (``runner.run(memo=...)``, a Ray worker across shards: ``tests/run/test_ray.py``) used to
  serve the second pack the first one's graph and hubs, keyed by an order-blind sum of row hashes.
- **Candidate cache** (item 2): the same dataset with its queries reversed, run through the API
  (``runner.run(cfg, out, dataset=ds)``, no input-file fingerprints) into the cache folder of the
  original run, used to reuse the original's candidates, whose ``query_idx`` are positions.
- Properties: a key changes when distinct rows are permuted and stays the same for equal inputs.

Every reference run here is a :func:`isolated.fresh_run` (its own cache, output folder, memo).
"""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contract.dataset import Dataset
from pipeline.core.memo import corpus_step, stage_key, table_digest
from pipeline.run import runner
from pipeline.run.querypath import scoped_memo
from pipeline.synth.workspaces import make
from tests.helpers.isolated import fresh_cfg, fresh_run

COMMON = ["preset=best", "embed=hashing", "report=false", "k=5", "graph.hubs.max_df=0.5"]


def two_viewers() -> Dataset:
    """Two workspaces of 6 notes, one query each, asked with no viewer in u0, u1 order and then by
    viewer ``bob`` in u1, u0 order. No note is private, so bob sees what the anonymous viewer sees:
    his rows must be the anonymous query's rows. The packs (``pipeline.run.packs``) are [u0, u1] and
    [u1, u0]: the same node rows in another order, with the same segment sizes."""
    ds = make(2, notes=6, queries=1, per_doc=3, seed=3)
    anon = ds.queries.with_columns(viewer=pl.lit(None, pl.String))
    bob = ds.queries.reverse().with_columns(
        query_id=pl.col("query_id") + "-bob", viewer=pl.lit("bob")
    )
    return Dataset("two-viewers", ds.nodes, pl.concat([anon, bob]), ds.edges)


def assert_viewers_agree(recall: pl.DataFrame) -> None:
    """Each bob query's (rank, node, score) rows equal the anonymous query's, for both workspaces."""
    cols = ["rank", "node_id", "score"]
    for k in (0, 1):
        anon = recall.filter(pl.col("query_id") == f"u{k}-q0").select(cols)
        bob = recall.filter(pl.col("query_id") == f"u{k}-q0-bob").select(cols)
        assert anon.height == 5 and anon.equals(bob), (k, anon, bob)


def test_a_memo_across_packs_with_the_same_nodes_reordered_gives_the_plain_rows(compose, tmp_path):
    ds = two_viewers()
    cfg = compose(COMMON)
    ref = fresh_run(cfg, tmp_path, "reference", dataset=ds)
    assert_viewers_agree(ref.recall())
    kept = fresh_run(cfg, tmp_path, "memo", dataset=ds, with_memo=True)
    assert_viewers_agree(kept.recall())
    assert kept.recall_bytes() == ref.recall_bytes()


def test_reversed_queries_through_the_api_do_not_reuse_the_originals_candidates(compose, tmp_path):
    ds = make(2, notes=8, queries=3, per_doc=4, seed=11)  # 3 queries in each group
    rev = Dataset(ds.name, ds.nodes, ds.queries.reverse(), ds.edges)
    assert ds.fingerprints == {} and rev.fingerprints == {}
    shared = fresh_cfg(compose(COMMON), tmp_path, "shared")  # one cache for the two runs below
    first = runner.run(shared, tmp_path / "first", dataset=ds)
    assert first["manifest"]["reused_stages"] == []
    again = runner.run(shared, tmp_path / "again", dataset=ds)  # identical input: a hit
    assert again["manifest"]["reused_stages"] == ["channels"]
    got = runner.run(shared, tmp_path / "reversed", dataset=rev)
    ref = fresh_run(compose(COMMON), tmp_path, "reference", dataset=rev)
    assert (tmp_path / "reversed" / "recall.parquet").read_bytes() == ref.recall_bytes()
    assert got["manifest"]["reused_stages"] == []
    # and, read by query id, the reversed run's rows are the original's
    plain = pl.read_parquet(tmp_path / "first" / "recall.parquet")
    assert ref.recall().sort(["query_id", "rank"]).equals(plain.sort(["query_id", "rank"]))


def distinct_rows(n: int) -> pl.DataFrame:
    """``n`` distinct rows of several dtypes (ints, text, a list column, nulls)."""
    return pl.DataFrame(
        {
            "i": list(range(n)),
            "text": [f"note {j % 3}" for j in range(n)],
            "tags": [[f"t{j % 2}"] if j % 4 else None for j in range(n)],
        },
        schema={"i": pl.Int64, "text": pl.String, "tags": pl.List(pl.String)},
    )


PERMUTED = st.integers(2, 12).flatmap(
    lambda n: st.tuples(st.just(n), st.permutations(list(range(n)))).filter(
        lambda t: t[1] != sorted(t[1])
    )
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=PERMUTED)
def test_keys_change_when_rows_are_permuted(case):
    n, order = case
    nodes = distinct_rows(n)
    moved = nodes[order]
    queries = distinct_rows(3)
    assert table_digest(moved) != table_digest(nodes)
    key = lambda nd, q: stage_key(b"p", nd, q)  # noqa: E731
    assert key(moved, queries) != key(nodes, queries)
    assert key(nodes, queries[[2, 0, 1]]) != key(nodes, queries)
    calls = []
    memo: dict = {}
    for frame in (nodes, moved):
        corpus_step(memo, "graph", frame, lambda f=frame: calls.append(f.height) or f)
    assert len(calls) == 2  # the permuted table is computed, not served the first one's value


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(0, 12), segments=st.lists(st.integers(1, 4), max_size=3))
def test_keys_are_equal_for_equal_inputs(n, segments):
    nodes = distinct_rows(n)
    copy = pl.DataFrame(nodes.to_dicts(), schema=nodes.schema)  # rebuilt row by row
    queries = distinct_rows(2)
    seg = tuple((s, 1) for s in segments)
    key = lambda nd, s: stage_key(b"p", nd, queries, s)  # noqa: E731
    assert table_digest(copy) == table_digest(nodes)
    assert key(copy, seg) == key(nodes, seg)
    if seg:
        assert key(nodes, seg) != key(nodes, ())  # a pack's segmentation is part of the key
    memo, calls = {}, []
    for frame in (nodes, copy):
        corpus_step(memo, "graph", frame, lambda: calls.append(1) or len(calls))
    assert calls == [1]  # the equal table is served from the memo


def test_memo_scope_separates_configs_and_edges(compose):
    memo: dict = {}
    cfg, other = compose(COMMON), compose([*COMMON, "graph.knn_k=3"])
    edges = pl.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]})
    one = scoped_memo(memo, cfg, edges)
    assert scoped_memo(memo, cfg, edges.clone()) is one
    assert scoped_memo(memo, other, edges) is not one
    assert scoped_memo(memo, cfg, edges.reverse()) is not one
    assert scoped_memo(memo, cfg, None) is not one
    assert scoped_memo(None, cfg, edges) is None
