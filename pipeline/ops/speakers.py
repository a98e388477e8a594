"""Whether a unit's speaker is named in the query ("What is Caroline's ...?" → Caroline's
turns). Used by the ``speaker_named`` score term and by ``diffuse.speaker_seed_boost``."""

from __future__ import annotations

import re

import polars as pl


def speaker_in(query: str | None, speaker) -> bool:
    """Whether ``speaker`` occurs in ``query`` as a whole word (case-sensitive: names are capitalised)."""
    if not query or not isinstance(speaker, str) or not speaker:
        return False
    return re.search(rf"(?<!\w){re.escape(speaker)}(?!\w)", query) is not None


def named(df: pl.DataFrame) -> pl.Series:
    """df (query_idx, query_text, speaker) → Float64 1.0 where the row's speaker is named in its query,
    else 0.0; one regex per distinct (query, speaker) pair, row order kept."""
    keys = df.select("query_idx", pl.col("speaker").cast(pl.String))
    pairs = df.select("query_idx", "query_text", pl.col("speaker").cast(pl.String)).unique()
    hits = pairs.select(
        "query_idx",
        "speaker",
        speaker_named=pl.Series(
            [float(speaker_in(q, s)) for q, s in pairs.select("query_text", "speaker").iter_rows()],
            dtype=pl.Float64,
        ),
    )
    return keys.join(
        hits, on=["query_idx", "speaker"], how="left", nulls_equal=True, maintain_order="left"
    )["speaker_named"].fill_null(0.0)


def named_for(cand: pl.DataFrame, nodes: pl.DataFrame, queries: pl.DataFrame) -> pl.Series:
    """cand (query_idx, node_idx, ...) → ``named`` for each row, from the nodes' ``speaker`` column
    (all 0 without one) and the queries' ``text``."""
    if "speaker" not in nodes.columns:
        return pl.Series("speaker_named", [0.0] * cand.height, dtype=pl.Float64)
    spk = nodes["speaker"].cast(pl.String).to_numpy()[cand["node_idx"].to_numpy()]
    text = queries["text"].to_numpy()[cand["query_idx"].to_numpy()]
    return named(
        pl.DataFrame(
            {
                "query_idx": cand["query_idx"],
                "query_text": pl.Series(text, dtype=pl.String),
                "speaker": pl.Series(spk, dtype=pl.String),
            }
        )
    )


GATE_TOP = 3  # units of the first pass that must all be by a named speaker (1, 2, 3 measured)


def top_agrees(df: pl.DataFrame, named_col: pl.Series, k: int = GATE_TOP) -> pl.Series:
    """df (query_idx, node_idx, fused) and its ``named`` column → Float64 per row: 1.0 where the
    row's query has all of its top ``k`` units (highest ``fused``, ties to the lowest ``node_idx``)
    named, else 0.0. Only the query's own candidates take part."""
    tbl = df.select("query_idx", "node_idx", pl.col("fused").fill_null(float("-inf")))
    top = (
        tbl.with_columns(named=named_col)
        .sort(["query_idx", "fused", "node_idx"], descending=[False, True, False])
        .group_by("query_idx", maintain_order=True)
        .head(k)
        .group_by("query_idx")
        .agg(agrees=pl.col("named").min())
    )
    return (
        df.select("query_idx")
        .join(top, on="query_idx", how="left", maintain_order="left")["agrees"]
        .fill_null(0.0)
    )
