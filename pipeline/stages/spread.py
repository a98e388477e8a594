"""Coverage-aware reordering (``select.spread_gap``): push repeated documents (LoCoMo: sessions) down
the ranking so that the top k spans more of the places the evidence lives.

The j-th unit of a document in a query's ranking (j = 0 for its best) moves to the sort key
``rank + gap·j``; ties keep the original order. gap 0 leaves the ranking as it is; a gap at least
the pool size interleaves documents round-robin (every document's best unit first, then every
second-best, ...). Equivalent to a greedy pick that penalises each document by ``gap`` positions
per unit already taken from it, since a document's units are taken in their own order.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.contract.errors import ConfigError


def spread(ranked: pl.DataFrame, doc_idx: np.ndarray | None, gap: float) -> pl.DataFrame:
    """ranked (query_idx, node_idx, rank 1-based, ...) → the same rows reordered per query by
    ``rank + gap·(units of the same document ranked above)``, ranks renumbered 1..n."""
    if gap < 0:
        raise ConfigError(
            f"select.spread_gap={gap} is negative; use 0 (off) or a positive number of positions"
        )
    if gap == 0 or ranked.height == 0:
        return ranked
    if doc_idx is None:
        raise ConfigError(
            "select.spread_gap needs a doc_id column in the nodes; set select.spread_gap=0"
        )
    keyed = ranked.with_columns(
        _doc=pl.Series(doc_idx[ranked["node_idx"].to_numpy()])
    ).with_columns(
        _key=pl.col("rank") + gap * (pl.col("rank").rank("ordinal").over("query_idx", "_doc") - 1)
    )
    return (
        keyed.sort(["query_idx", "_key", "rank"])
        .drop("_doc", "_key")
        .with_columns(rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32))
    )
