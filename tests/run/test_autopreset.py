"""preset=auto (pipeline/run/autopreset.py): hand-made corpora with each feature present or absent →
the expected overrides; per query group, a group with a temporal chain runs exactly as ``best``
and a group of independent titled abstracts exactly as ``best`` with ``diffuse=none``."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.contract import schema
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import ConfigError
from pipeline.run import runner
from pipeline.run.autopreset import corpus_features, merged, overrides

CONV = pl.DataFrame(
    {  # one session, four turns: a temporal chain, speakers, no titles
        "node_id": ["t0", "t1", "t2", "t3"],
        "doc_id": ["s1"] * 4,
        "seq": [0, 1, 2, 3],
        "speaker": ["Ann", "Bo", "Ann", "Bo"],
        "text": ["Ann: I went hiking", "Bo: where did you go", "Ann: up the hill", "Bo: nice"],
    }
)
ABSTRACTS = pl.DataFrame(
    {  # independent titled documents whose texts name no other title
        "node_id": ["a0", "a1", "a2", "a3"],
        "doc_id": ["a0", "a1", "a2", "a3"],
        "title": [
            "Protein folding kinetics",
            "Soil carbon storage",
            "Sleep and memory",
            "Coral reef bleaching",
        ],
        "text": [
            "we measure folding rates",
            "carbon in soils rises",
            "sleep helps recall",
            "reefs bleach in warm water",
        ],
    }
)
WIKI = pl.DataFrame(
    {  # titled paragraphs; a0 names "Lisbon", a1 only its own title
        "node_id": ["w0", "w1", "w2", "w3"],
        "doc_id": ["w0", "w1", "w2", "w3"],
        "title": ["Porto", "Lisbon", "Douro", "Minho"],
        "text": ["Porto lies north of Lisbon", "Lisbon is a capital", "a river", "a province"],
    }
)


def test_conversation_keeps_best():
    f = corpus_features(CONV, None)
    # 4 turns, 1 document: 3 have a predecessor; no titles; every turn has a speaker
    assert (f["temporal"], f["titled"], f["title_links"], f["speakers"], f["nodes_per_doc"]) == (
        0.75,
        0.0,
        0.0,
        1.0,
        4.0,
    )
    assert overrides(f) == {}


def test_independent_abstracts_turn_diffusion_off():
    f = corpus_features(ABSTRACTS, None)
    assert (f["temporal"], f["edges_per_node"], f["titled"], f["title_links"]) == (
        0.0,
        0.0,
        1.0,
        0.0,
    )
    assert overrides(f) == {"diffuse.method": "none"}
    assert overrides(f, skip=["no_structure"]) == {}


def test_title_links_add_mention_edges():
    f = corpus_features(WIKI, None)
    assert f["title_links"] == 0.25  # w0 names Lisbon; w1 names only its own title
    assert overrides(f) == {"graph.mentions": True}
    assert overrides(f, skip=["title_links"]) == {}


def test_explicit_edges_count_as_structure():
    edges = pl.DataFrame({"src": ["a0"], "dst": ["a1"]})
    f = corpus_features(ABSTRACTS, edges)
    assert f["edges_per_node"] == 0.25
    assert overrides(f) == {}


def test_threshold_is_inclusive():
    # 20 one-node documents but one document of two turns: 1 of 20 nodes has a predecessor (0.05)
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(20)],
            "seq": [0] * 19 + [1],
            "doc_id": [f"d{i}" for i in range(19)] + ["d0"],
            "text": ["x"] * 20,
        }
    )
    f = corpus_features(nodes, None)
    assert f["temporal"] == 0.05 and overrides(f) == {}
    assert overrides({**f, "temporal": 0.0499}) == {"diffuse.method": "none"}


def test_bad_rule_and_bad_key_are_config_errors(compose):
    with pytest.raises(ConfigError, match="unknown rule"):
        overrides(corpus_features(CONV, None), skip=["titles"])
    with pytest.raises(ConfigError, match="graph.no_such_key"):
        merged(compose(["preset=auto"]), {"graph.no_such_key": 1})
    with pytest.raises(ConfigError, match="empty node table"):
        corpus_features(CONV.head(0), None)


def two_scopes() -> Dataset:
    """Scope ``s1`` is the conversation, scope ``lib`` the abstracts; two queries each."""
    nodes = pl.concat(
        [
            CONV.with_columns(doc_id=pl.lit("s1")),
            ABSTRACTS.with_columns(doc_id=pl.lit("lib/") + pl.col("doc_id")),
        ],
        how="diagonal_relaxed",
    )
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4"],
            "text": [
                "where did Ann go hiking",
                "what did Bo say",
                "sleep and memory recall",
                "warm water reefs",
            ],
            "doc_scope": [["s1"], ["s1"], ["lib"], ["lib"]],
        }
    )
    return Dataset(
        "two-scopes",
        schema.conform(nodes, "nodes", "t"),
        schema.conform(queries, "queries", "t"),
        None,
    )


def rows(cfg, out) -> pl.DataFrame:
    runner.run(cfg, out, dataset=two_scopes())
    return pl.read_parquet(out / "recall.parquet")


def test_auto_applies_per_group(compose, tmp_path):
    common = ["embed=hashing", "report=false", "k=3", "graph.hubs.max_df=0.5"]
    auto = rows(compose(["preset=auto", *common]), tmp_path / "auto")
    best = rows(compose(["preset=best", *common]), tmp_path / "best")
    flat = rows(compose(["preset=best", "diffuse=none", *common]), tmp_path / "flat")
    conv, lib = pl.col("query_id").is_in(["q1", "q2"]), pl.col("query_id").is_in(["q3", "q4"])
    assert auto.filter(conv).equals(best.filter(conv))  # the chained group runs as best
    # the featureless group as without diffusion; the run's table has the chained group's graph
    # column too (groups are concatenated), null on these rows
    got = auto.filter(lib)
    assert got["graph"].null_count() == got.height
    assert got.select(flat.columns).equals(flat.filter(lib))
    assert sorted(set(auto.columns) - set(flat.columns)) == ["graph"]
    assert not best.filter(lib).equals(flat.filter(lib))  # (so the override did change something)
    man = json.loads((tmp_path / "auto" / "manifest.json").read_text())
    assert [(e["overrides"], e["groups"], e["features"]["nodes"]) for e in man["auto"]] == [
        ({"diffuse.method": "none"}, 1, 4),
        ({}, 1, 4),
    ]  # in the order of their JSON text


def test_auto_without_its_rules_is_best_byte_for_byte(compose, tmp_path):
    """A corpus with none of the features is exactly the case auto changes (no structure →
    diffusion off), so auto cannot equal best there; with its rules skipped it does, byte for byte:
    the rest of the run is best's code path."""
    common = ["embed=hashing", "report=false", "k=3", "graph.hubs.max_df=0.5"]
    runner.run(
        compose(["preset=auto", "auto.skip=[no_structure,title_links]", *common]),
        tmp_path / "auto",
        dataset=two_scopes(),
    )
    runner.run(compose(["preset=best", *common]), tmp_path / "best", dataset=two_scopes())
    assert (tmp_path / "auto" / "recall.parquet").read_bytes() == (
        tmp_path / "best" / "recall.parquet"
    ).read_bytes()
