"""Ingest: the dataset's nodes sorted by ``node_id`` and its queries, empty texts skipped and
counted, optionally one fixed half of the queries."""

from __future__ import annotations

import hashlib

import polars as pl

from pipeline.contract.errors import ConfigError, require_one_of


def drop_empty(ds) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes sorted by node_id; nodes and queries whose text is empty or whitespace are skipped and
    counted (``skipped.empty_node_text`` / ``skipped.empty_query_text``)."""
    blank = pl.col("text").str.strip_chars().str.len_chars() == 0
    nodes, queries = ds.nodes.filter(~blank), ds.queries.filter(~blank)
    ds.skipped["empty_node_text"] += ds.nodes.height - nodes.height
    ds.skipped["empty_query_text"] += ds.queries.height - queries.height
    if nodes.height == 0:
        raise ConfigError(f"data={ds.name}: no node has any text; nothing can be recalled")
    return nodes.sort("node_id"), queries


def query_half(queries: pl.DataFrame, part: str) -> pl.DataFrame:
    """A fixed half of the queries by a hash of ``query_id``: ``a`` or ``b`` (tune on one, check on the other)."""
    require_one_of("query_part", part, ("a", "b"))
    bit = [
        hashlib.sha1(q.encode()).digest()[0] & 1
        for q in queries["query_id"].cast(pl.String).to_list()
    ]
    return queries.filter(pl.Series(bit) == (0 if part == "a" else 1))


def nodes_and_queries(ds, query_part: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`drop_empty`, then the ``query_part`` half of the queries when one is asked for."""
    nodes, queries = drop_empty(ds)
    return nodes, (query_half(queries, query_part) if query_part else queries)
