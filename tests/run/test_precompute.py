"""Recall cache (``recall precompute``): hits/misses per key part, byte-stable reruns, equality with
a plain run, per-scope invalidation."""

import datetime as dt
import subprocess
import sys

import polars as pl
import pytest

from pipeline.run import precompute
from tests.helpers.isolated import fresh_run

SCOPES = ("c1", "c2", "c3")
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def make_data(root, changed: str | None = None, rows=None):
    """3 conversations × 12 turns; 2 queries per conversation + 2 without doc_scope."""
    nodes, t0 = [], dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    for c, conv in enumerate(SCOPES):
        for i in range(12):
            text = " ".join(WORDS[(i + j + c) % len(WORDS)] for j in range(5)) + f" turn {conv} {i}"
            nodes.append(
                {
                    "node_id": f"{conv}-{i:02d}",
                    "text": text,
                    "doc_id": f"{conv}/s{i // 6}",
                    "seq": i % 6,
                    "created_at": t0 + dt.timedelta(hours=c * 24 + i),
                }
            )
    if changed:
        for n in nodes:
            if n["node_id"] == changed:
                n["text"] = "zulu yankee whiskey alpha bravo changed"
    queries = [
        {
            "query_id": f"q-{conv}-{j}",
            "text": f"{WORDS[j * 3 + c]} {WORDS[j + 5]} turn",
            "doc_scope": [conv],
        }
        for c, conv in enumerate(SCOPES)
        for j in range(2)
    ]
    queries += [
        {"query_id": f"q-all-{j}", "text": f"{WORDS[j]} {WORDS[j + 7]}", "doc_scope": None}
        for j in range(2)
    ]
    edges = [{"src": "c1-00", "dst": "c1-07"}, {"src": "c2-03", "dst": "c2-10"}]
    root.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(nodes).write_parquet(root / "nodes.parquet")
    pl.DataFrame(
        queries, schema={"query_id": pl.String, "text": pl.String, "doc_scope": pl.List(pl.String)}
    ).write_parquet(root / "queries.parquet")
    pl.DataFrame(edges).write_parquet(root / "edges.parquet")
    return root


@pytest.fixture
def setup(tmp_path, compose):
    data = make_data(tmp_path / "data")

    def cfg(*extra):
        return compose(
            [
                "data=parquet",
                f"data.path={data}",
                "embed=hashing",
                "preset=best",
                "k=5",
                *extra,
                f"cache_dir={tmp_path / 'cache'}",
            ]
        )

    return data, cfg


def _live(tmp_path, namespace=None):
    return precompute.live(tmp_path / "cache", namespace)


def _parts(tmp_path, namespace=None):
    """{scope id: partition bytes} of the live generation."""
    return {
        p.parent.name.split("=", 1)[1]: p.read_bytes()
        for p in sorted(_live(tmp_path, namespace).glob("scope=*/data.parquet"))
    }


def _cached(tmp_path, namespace=None):
    df = pl.read_parquet(_live(tmp_path, namespace) / "**" / "*.parquet", hive_partitioning=True)
    df = df.filter(pl.col("rank").is_not_null())
    return df.drop("scope", *precompute.KEY_COLUMNS, *precompute.ENTRY_COLUMNS).sort(
        ["query_id", "rank"]
    )


def test_first_run_misses_then_all_hits_byte_identical(setup, tmp_path):
    _data, cfg = setup
    first = precompute.precompute(cfg())
    assert (first["hits"], first["misses"]) == (0, 8)
    assert len(first["partitions"]) == 4  # c1, c2, c3, whole corpus
    before = _parts(tmp_path)
    again = precompute.precompute(cfg())
    assert (again["hits"], again["misses"]) == (8, 0) and again["rewritten"] == []
    assert _parts(tmp_path) == before
    assert (_live(tmp_path) / "_manifest.json").is_file()
    assert again["generation"] == "g-000002" and _live(tmp_path).name == "g-000002"


def _plain(cfg, tmp_path, name: str = "plain") -> pl.DataFrame:
    """The reference: ``recall run`` with its own cache, output folder and memo
    (``isolated.fresh_run``), never the precompute's ``cache_dir`` (issue 26, item 7)."""
    return fresh_run(cfg, tmp_path, name).recall().sort(["query_id", "rank"])


def test_cache_equals_plain_run(setup, tmp_path):
    _data, cfg = setup
    precompute.precompute(cfg())
    plain = _plain(cfg("report=false"), tmp_path)
    assert _cached(tmp_path).equals(plain)


def test_changed_node_invalidates_only_its_scope(setup, tmp_path):
    data, cfg = setup
    precompute.precompute(cfg())
    before = _parts(tmp_path)
    make_data(data, changed="c2-04")
    res = precompute.precompute(cfg())
    assert (res["hits"], res["misses"]) == (4, 4)  # c2's 2 queries + the 2 whole-corpus ones
    assert len(res["rewritten"]) == 2 and "all" in res["rewritten"]
    after = _parts(tmp_path)
    assert sorted(s for s in before if before[s] != after[s]) == res["rewritten"]
    plain = _plain(cfg("report=false"), tmp_path)  # the merged cache equals a run on the new data
    assert _cached(tmp_path).equals(plain)


def test_changed_recipe_misses_everything(setup, tmp_path):
    _data, cfg = setup
    first = precompute.precompute(cfg())
    res = precompute.precompute(cfg("k=3"))
    assert (res["hits"], res["misses"]) == (0, 8)
    assert res["namespace"] != first["namespace"]  # another recipe: beside the first, not over it
    assert _cached(tmp_path, res["namespace"]).group_by("query_id").len()["len"].max() == 3
    assert _cached(tmp_path, first["namespace"]).group_by("query_id").len()["len"].max() == 5


def test_in_run_signals_and_knn_no_longer_invalidate_every_scope(setup, tmp_path):
    """Signals and kNN edges are computed per query group (issue 13): a change in c2 misses only c2's
    queries and the whole-corpus ones, and the merged cache still equals a run."""
    data, cfg = setup
    extra = ("signals=default", "score.factors=[reme_inbound,reme_community]", "graph.knn_k=3")
    precompute.precompute(cfg(*extra))
    make_data(data, changed="c2-04")
    res = precompute.precompute(cfg(*extra))
    assert (res["hits"], res["misses"]) == (4, 4)
    assert _cached(tmp_path).equals(_plain(cfg(*extra, "report=false"), tmp_path))


def test_config_now_is_part_of_the_recipe(setup, tmp_path):
    _data, cfg = setup
    precompute.precompute(cfg("namespace=ns"))
    assert precompute.precompute(cfg("namespace=ns", "now=2026-01-01"))["misses"] == 8
    assert precompute.precompute(cfg("namespace=ns", "now=2026-01-01"))["misses"] == 0


def test_removed_query_drops_its_entry(setup, tmp_path):
    data, cfg = setup
    precompute.precompute(cfg())
    q = pl.read_parquet(data / "queries.parquet")
    q.filter(~pl.col("query_id").str.starts_with("q-c3")).write_parquet(data / "queries.parquet")
    res = precompute.precompute(cfg())
    assert (res["hits"], res["misses"]) == (6, 0) and len(res["removed"]) == 1
    assert not _cached(tmp_path)["query_id"].str.starts_with("q-c3").any()


def precompute_argv(data, cache_dir, out_dir) -> list[str]:
    """``recall precompute`` on ``make_data``'s store as a subprocess command line."""
    return [
        sys.executable,
        "-m",
        "pipeline.cli.main",
        "precompute",
        "data=parquet",
        f"data.path={data}",
        "embed=hashing",
        "device=cpu",
        "k=5",
        f"cache_dir={cache_dir}",
        f"out_dir={out_dir}",
    ]


def test_cli_last_line(setup, tmp_path):
    data, _cfg = setup
    args = precompute_argv(data, tmp_path / "cache", tmp_path / "o")
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "cache: 0 hits, 8 misses"
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "cache: 8 hits, 0 misses"


def test_scope_rows_match_in_scope():
    import random

    import numpy as np

    from pipeline.ops.scope import in_scope, scope_rows

    rng = random.Random(1)
    segs = ["a", "b", "a/", "c", ""]
    path = lambda: "/".join(rng.choice(segs) for _ in range(rng.randint(1, 3)))  # noqa: E731
    nodes = pl.DataFrame({"doc_id": [path() for _ in range(300)] + [None]})
    scopes = list(dict.fromkeys(tuple(sorted({path(), path()})) for _ in range(50)))
    got, docs = scope_rows(nodes, scopes), nodes["doc_id"].fill_null("").to_numpy().astype(str)
    for s in scopes:
        assert np.array_equal(got[s], np.flatnonzero(in_scope(docs, s))), s


def _sorted_keys(df):
    cols = ["query_id", *precompute.KEY_COLUMNS, "scope"]
    return df.select(cols).unique().sort(cols)


def test_key_index_equals_partitions_and_is_only_trusted_when_it_matches_them(setup, tmp_path):
    """The next run reads its keys from ``_keys.arrow`` instead of every partition; the index
    must hold exactly what the partitions hold, after a first build and after an edit. An index
    that disagrees with the partitions it indexes (emptied, a partition's bytes changed, or no
    manifest) is not read: the partitions are."""
    from pipeline.recallcache import partitions

    data, cfg = setup
    precompute.precompute(cfg())
    root = _live(tmp_path)
    assert _sorted_keys(pl.read_ipc(root / precompute.KEY_INDEX)).equals(
        _sorted_keys(partitions.scan_keys(root))
    )
    make_data(data, changed="c2-04")
    res = precompute.precompute(cfg())
    assert (res["hits"], res["misses"]) == (4, 4)
    root = _live(tmp_path)
    index = pl.read_ipc(root / precompute.KEY_INDEX)
    assert _sorted_keys(index).equals(_sorted_keys(partitions.scan_keys(root)))
    assert index.height == 8 and partitions.index_is_valid(root)
    # an index over other rows than the partitions' must be ignored
    index.head(0).write_ipc(root / precompute.KEY_INDEX)
    assert not partitions.index_is_valid(root)
    assert _sorted_keys(precompute.read_keys(root)).equals(_sorted_keys(index))
    index.write_ipc(root / precompute.KEY_INDEX)
    assert partitions.index_is_valid(root)
    part = next(root.glob("scope=*/data.parquet"))
    frame = pl.read_parquet(part)
    frame.with_columns(scope_version=pl.lit("stale")).write_parquet(part)
    assert not partitions.index_is_valid(root)
    assert precompute.read_keys(root).filter(pl.col("scope_version") == "stale").height > 0
    frame.write_parquet(part)
    (root / "_manifest.json").unlink()
    assert not partitions.index_is_valid(root)
    again = precompute.precompute(cfg())
    assert (again["hits"], again["misses"]) == (8, 0)


def test_a_dataset_without_queries_is_one_error_line(tmp_path):
    """``recall precompute`` on notes without a queries file: the error ``recall run`` gives (it
    was a polars SchemaError traceback from the key join), nothing written to the cache."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, body in (("a", "alpha beta"), ("b", "gamma delta")):
        (notes / f"{name}.md").write_text(f"---\ntitle: {name}\n---\n# {name}\n{body}\n")
    args = precompute_argv(notes, tmp_path / "cache", tmp_path / "o")
    args[args.index("data=parquet")] = "data=workspace"
    out = subprocess.run(args, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "error: data=workspace: the dataset has no queries; give it a queries file"
    )
    assert not (tmp_path / "cache" / "recall").exists()
