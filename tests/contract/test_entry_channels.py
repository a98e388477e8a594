"""Installed channels (registry.installed_channels): a package's entry point in group
``recall_pipeline.channels`` adds a channel that a config names by its entry-point name."""

from __future__ import annotations

import importlib.metadata

import polars as pl
import pytest

from pipeline.channels.candidates import ChannelSettings, generate
from pipeline.contract.errors import ConfigError
from pipeline.contract.registry import CHANNEL_GROUP, installed_channels
from pipeline.stages.channels import LexicalParams

NODES = pl.DataFrame({"node_id": ["a", "b", "c"], "text": ["alpha", "beta", "gamma"]})
QUERIES = pl.DataFrame({"query_id": ["q"], "text": ["alpha"]})


def toy(first, nodes, queries, parts):
    """A third-party channel: node 2 for every query that has a first-layer hit, score 0.5."""
    q = first["query_idx"].unique().sort()
    return pl.DataFrame(
        {"query_idx": q, "node_idx": [2] * len(q), "toy_rank": [1] * len(q), "toy": [0.5] * len(q)}
    )


@pytest.fixture
def installed(monkeypatch):
    ep = importlib.metadata.EntryPoint("toy", f"{__name__}:toy", CHANNEL_GROUP)
    real = importlib.metadata.entry_points

    def fake(**kw):
        return [ep] if kw.get("group") == CHANNEL_GROUP else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)


def test_installed_channel_joins_the_candidates(installed):
    assert list(installed_channels()) == ["toy"]
    lex = LexicalParams.defaults(stopwords=None)
    out = generate(NODES, QUERIES, ChannelSettings(("lexical", "toy"), lexical=lex))
    out = out.sort("node_idx")
    assert out["node_idx"].to_list() == [0, 2]
    assert out["lexical_rank"].to_list() == [1, None]
    assert out["toy_rank"].to_list() == [None, 1]
    assert out["toy"].to_list() == [0.0, 0.5]


def test_an_unregistered_channel_name_is_refused():
    lex = LexicalParams.defaults(stopwords=None)
    with pytest.raises(ConfigError, match="installed channel"):
        generate(NODES, QUERIES, ChannelSettings(("lexical", "pkg.module:fn"), lexical=lex))
