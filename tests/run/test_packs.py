"""Small query groups run together (``pipeline.run.packs``): for random workspace layouts — nested
scopes, overlapping scope lists, a viewer with private notes, archived notes, explicit edges across
workspaces, queries with their own ``now`` — and random pack sizes, the packed run writes the same
recall rows, byte for byte, as the run that takes one group at a time; and ``packable`` refuses
every config that reads something across the nodes of a pack."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from pipeline.contract.dataset import Dataset
from pipeline.ops import dpp
from pipeline.run import packs, runner
from pipeline.synth.workspaces import make

COMMON = ["embed=hashing", "report=false", "graph.hubs.max_df=0.5"]
# dpp/mmr: two workspaces of 300 and 150 notes next to the small ones, k=100 and 300 candidates per
# channel: the 300-note workspace's pools (300, or 270 at target 90) are past GRAM_MAX_P (lazy
# kernel rows), the 150-note one's under it (Gram matrix), the small ones not diversified
SIZES = (300, 150)
WIDE = ["k=100", "dense.candidates=300", "lexical.candidates=300"]
PACKABLE = {
    "best": ["preset=best"],
    "hipporag-no-synonyms": ["preset=hipporag", "graph.hubs.synonym_k=0"],
    "bm25+ppr": ["preset=bm25", "diffuse=ppr", "graph.hubs.groups.doc_id=0.5"],
    "best+plan": ["preset=best", "query.intent_split=true", "fuse=rrf"],
    "reme": ["preset=reme"],
    "best+dpp": ["preset=best", "select=dpp", *WIDE],
    "best+mmr": ["preset=best", "select=mmr", "select.target=90", *WIDE],
    "oks": ["preset=oks"],
}


def layout(seed: int, sizes: tuple = ()) -> Dataset:
    """A few workspaces of 4 to 11 notes — the first ones of ``sizes`` notes instead — with random
    extra queries over random scopes, viewers and times."""
    rng = np.random.default_rng(seed)
    w = int(rng.integers(3, 7))
    if not sizes:
        ds = make(w, notes=int(rng.integers(4, 12)), queries=2, per_doc=3, seed=seed)
    else:  # trimmed per workspace: make() gives every workspace the same number of notes
        ds = make(w, notes=max(sizes), queries=2, per_doc=3, seed=seed)
        n = np.array([*sizes, *rng.integers(4, 12, w - len(sizes))])
        ws = ds.nodes["node_id"].str.extract(r"^u(\d+)-").cast(pl.Int64).to_numpy()
        nodes = ds.nodes.filter(ds.nodes["seq"].to_numpy() < n[ws])
        kept = nodes["node_id"].implode()
        edges = ds.edges.filter(pl.col("src").is_in(kept) & pl.col("dst").is_in(kept))
        ds = Dataset(ds.name, nodes, ds.queries, edges)
    ids = ds.nodes["node_id"].to_list()
    private = set(rng.choice(ids, 3, replace=False).tolist())
    archived = set(rng.choice(ids, 2, replace=False).tolist())
    nodes = ds.nodes.with_columns(
        visibility=pl.Series(
            [["alice"] if i in private else None for i in ids], dtype=pl.List(pl.String)
        ),
        archived=pl.Series([i in archived for i in ids]),
    )
    spaces = [f"u{k}" for k in range(w)] + [f"u{k}/d0" for k in range(w)] + ["u0/d1"]
    n_extra = int(rng.integers(3, 9))
    scopes = [
        None if rng.random() < 0.1 else rng.choice(spaces, int(rng.integers(1, 4))).tolist()
        for _ in range(n_extra)
    ]
    when = dt.datetime(2025, 1, 3, tzinfo=dt.timezone.utc)
    extra = pl.DataFrame(
        {
            "query_id": [f"x{j}" for j in range(n_extra)],
            "text": [
                " ".join(rng.choice(ds.nodes["text"].to_list(), 1)[0].split()[:6])
                for _ in range(n_extra)
            ],
            "doc_scope": scopes,
            "viewer": ["alice" if rng.random() < 0.3 else None for _ in range(n_extra)],
            "now": [when if rng.random() < 0.3 else None for _ in range(n_extra)],
        },
        schema_overrides={"doc_scope": pl.List(pl.String), "now": pl.Datetime("us", "UTC")},
    )
    across = pl.DataFrame(
        {
            "src": rng.choice(ids, 4).tolist(),
            "dst": rng.choice(ids, 4).tolist(),
            "relation": "related",
            "weight": pl.Series(rng.random(4), dtype=pl.Float32),
        }
    )
    queries = pl.concat([ds.queries, extra], how="diagonal_relaxed")
    return Dataset("layout", nodes, queries, pl.concat([ds.edges, across]))


def _recall(compose, where, overrides, ds) -> tuple:
    """The run's recall.parquet bytes and its manifest's row counts (per-group maxima included)."""
    k = [] if any(o.startswith("k=") for o in overrides) else ["k=8"]
    cfg = compose([*overrides, *COMMON, *k, f"cache_dir={where}-cache", f"out_dir={where}"])
    runner.run(cfg, where, dataset=ds)
    rows = json.loads((where / "manifest.json").read_text())["rows"]
    return (where / "recall.parquet").read_bytes(), rows


@pytest.mark.parametrize("recipe", list(PACKABLE))
@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failing example is reported as is, not shrunk
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), target=st.sampled_from([20, 60, 4096]))
def test_packed_run_equals_one_group_at_a_time(
    compose, tmp_path, monkeypatch, recipe, seed, target
):
    wide = WIDE[0] in PACKABLE[recipe]
    ds = layout(seed, SIZES if wide else ())
    tag = f"{recipe}-{seed}-{target}"
    calls, pools = [], []
    real, width = packs.slice_pack, dpp.pool_width
    with monkeypatch.context() as m:  # undone after each example, not only after the test
        m.setattr(packs, "TARGET", target)
        m.setattr(packs, "slice_pack", lambda *a: calls.append(len(a[3])) or real(*a))
        m.setattr(dpp, "pool_width", lambda n: pools.append(n) or width(n))
        packed = _recall(compose, tmp_path / f"packed-{tag}", PACKABLE[recipe], ds)
    # an example whose groups all overlap or each fill a pack (seed 5245, target 20: groups of
    # 296, 149, 6, 451, ... nodes, neighbours sharing nodes) packs nothing: it says nothing of packs
    assume(calls)
    assert min(calls) > 1 or wide and max(calls) > 1  # groups did share a pack
    if wide:  # both kernel paths ran (in one pack when it held both big workspaces)
        assert min(pools) <= dpp.GRAM_MAX_P < max(pools), pools
    with monkeypatch.context() as m:
        m.setattr(packs, "packable", lambda *a: False)
        alone = _recall(compose, tmp_path / f"alone-{tag}", PACKABLE[recipe], ds)
    assert packed == alone


@pytest.mark.parametrize(
    "overrides",
    [
        ["preset=bme"],
        ["preset=auto"],
        ["preset=best", "graph.mentions=true"],
        ["preset=best", "graph.knn_k=3"],
        ["preset=best", "signals=default"],
        ["preset=best", "diffuse=pedsa"],
        ["preset=best", "select.spread_gap=2"],
        ["preset=best", "dense=hnsw"],
        ["preset=hipporag"],
    ],
)
def test_configs_that_read_across_nodes_are_not_packed(compose, overrides):
    cfg = compose([*overrides, "embed=hashing"])
    assert not packs.packable(cfg, None, None)
    assert packs.packable(compose(["preset=best", "embed=hashing"]), None, None)


def test_a_pack_holding_every_node_out_of_order(compose, tmp_path, monkeypatch):
    """Groups met in reverse order fill one pack with every node of the corpus, out of table order
    (a nightly rerun's subset looks like this): rows, vectors and scores still line up."""
    ds = make(4, notes=6, queries=2, per_doc=3, seed=3)
    ds = Dataset("reversed", ds.nodes, ds.queries.reverse(), ds.edges)
    calls = []
    real = packs.slice_pack
    monkeypatch.setattr(packs, "slice_pack", lambda *a: calls.append(len(a[3])) or real(*a))
    packed = _recall(compose, tmp_path / "packed", PACKABLE["best"], ds)
    assert calls == [4]  # one pack, all four workspaces, every node
    monkeypatch.setattr(packs, "packable", lambda *a: False)
    assert packed == _recall(compose, tmp_path / "alone", PACKABLE["best"], ds)
