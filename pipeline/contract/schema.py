"""The data contract: column types per table (``TABLES``) and validation at the boundary.

``conform(df, table, where)`` checks required columns, casts known optional columns to their
contract type, and raises :class:`DataError` naming the file, row and field of the first problem;
``frame(rows, table, columns, where)`` builds an adapter's rows into a table of the contract's
types and conforms it.

Queries: a null (or absent) ``doc_scope`` means the whole corpus; an empty ``doc_scope`` list is a
DataError (it would mean "see nothing"; it must never fail open as "see everything"): omit it for the
whole corpus, or list the doc ids the query may see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from pipeline.contract.errors import DataError

TS = pl.Datetime("us", "UTC")

# BME scope / story-time node columns and scene-state query columns (docs/presets.md): part of the
# data contract below, and what the scope policy and BME's injection read
SCOPE_NODE_COLUMNS = {
    "scope_layer": pl.String,
    "scope_owner_type": pl.String,
    "scope_owner": pl.String,
    "scope_region": pl.String,
    "scope_regions": pl.List(pl.String),
    "story_time": pl.Int64,
    "story_time_end": pl.Int64,
    "story_tense": pl.String,
}
# ST-BME knowledge gate entries per node (one per knowledge owner with state; bme/knowledge.py)
KNOWLEDGE_TYPE = pl.List(
    pl.Struct(
        {
            "owner": pl.String,
            "known": pl.Boolean,
            "mistaken": pl.Boolean,
            "hidden": pl.Boolean,
            "score": pl.Float64,
        }
    )
)
BME_NODE_COLUMNS = {  # (BME's stored vectors are the shared "embedding" column below)
    "knowledge": KNOWLEDGE_TYPE,
    "lex_names": pl.List(pl.String),  # BME's name/title field values (bme/lexcover.column)
    "lex_fields": pl.List(pl.String),  # BME's summary/insight/state/traits/participants/status
    "scope_owner_key": pl.String,  # memory-scope.js getScopeOwnerKey
    "floor": pl.Int64,  # BME node.seq (chat floor; seq holds seqRange[1])
    "level": pl.Int64,  # summary hierarchy
    "parent_id": pl.String,
    "fields": pl.String,  # the node's fields object as JSON
}
SCENE_QUERY_COLUMNS = {
    "active_owners": pl.List(pl.String),
    "active_owner_keys": pl.List(pl.String),  # BME knowledge owners (bme/knowledge.py)
    "active_user_owners": pl.List(pl.String),
    "active_region": pl.String,
    "adjacent_regions": pl.List(pl.String),
    "story_segment": pl.Int64,
}

TABLES: dict[str, dict[str, dict[str, pl.DataType]]] = {
    "nodes": {
        "required": {"node_id": pl.String, "text": pl.String},
        "optional": {
            "doc_id": pl.String,
            "title": pl.String,
            "description": pl.String,
            "tags": pl.List(pl.String),
            "type": pl.String,
            "code": pl.String,
            "importance": pl.Float32,
            "created_at": TS,
            "updated_at": TS,
            "last_access_at": TS,
            "access_count": pl.Int64,
            "pinned": pl.Boolean,
            "archived": pl.Boolean,
            "status": pl.String,
            "visibility": pl.List(pl.String),
            "seq": pl.Int64,
            "start_line": pl.Int64,
            "end_line": pl.Int64,
            "speaker": pl.String,
            **SCOPE_NODE_COLUMNS,  # BME scope / story time (stages/scope_policy.py)
            "lesson": pl.String,  # OKS review.lesson (Soul Boost × 1.2 in inject.format=oks)
            **BME_NODE_COLUMNS,  # data=bme (adapters/bme_nodes.py)
            "embedding": pl.List(pl.Float32),  # a stored vector (stages/embed.py: bring your own)
            "layer": pl.String,  # ReMe: daily | digest | resource | session (adapters/reme.py)
            "chunk_id": pl.String,  # ReMe's FileChunk.id
            "store_order": pl.Int64,  # ReMe: the chunk's place in its chunk store (ties as ReMe)
            "keyword_slot": pl.Int64,  # ReMe: the chunk's slot in its persisted BM25 index
            "keyword_slots": pl.Int64,  # ReMe: that index's slots, deleted ones included
            "community_id": pl.String,  # ReMe meta/communities.json (signals use it over Leiden)
            "hits_30d": pl.Int64,  # ReMe meta/access_log.json last_hit_count_30d
            "archived_store": pl.Boolean,  # ReMe meta/archived.json (signals use it over recency)
        },
    },
    "edges": {
        "required": {"src": pl.String, "dst": pl.String},
        "optional": {
            "relation": pl.String,
            "weight": pl.Float32,
            "inhibit": pl.Boolean,
            "valid_from": TS,
            "valid_to": TS,
        },
    },
    "queries": {
        "required": {"query_id": pl.String, "text": pl.String},
        "optional": {
            "context": pl.List(pl.String),
            "viewer": pl.String,
            "now": TS,
            "doc_scope": pl.List(pl.String),
            "group": pl.String,
            "query_rewrite": pl.String,
            **SCENE_QUERY_COLUMNS,  # BME scene state: who speaks, where, which story segment
            "goals": pl.List(pl.String),
            "embedding": pl.List(pl.Float32),  # a stored query vector (stages/embed.py)
        },  # OKS goal slugs: their pages go first in inject.format=oks
    },
    "qrels": {
        "required": {"query_id": pl.String, "relevance": pl.Int32},
        "optional": {"node_id": pl.String, "doc_id": pl.String},
    },
    "recall": {
        "required": {
            "query_id": pl.String,
            "rank": pl.Int32,
            "node_id": pl.String,
            "score": pl.Float64,
        },
        "optional": {"channel": pl.String, "doc_id": pl.String},
    },
}

KEYS = {"nodes": ["node_id"], "queries": ["query_id"]}


def _first_bad_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0])


def _check_columns(df: pl.DataFrame, table: str, where: str) -> None:
    """Returns None; a missing required column or a qrels target ambiguity is a DataError."""
    for col in TABLES[table]["required"]:
        if col not in df.columns:
            raise DataError(
                where,
                f"{table} table has no '{col}' column (columns: {df.columns})",
                f"add a '{col}' column",
                field=col,
            )
    if table == "qrels" and ("node_id" in df.columns) == ("doc_id" in df.columns):
        raise DataError(
            where,
            "qrels need exactly one of 'node_id' or 'doc_id'",
            "keep one target column",
            field="node_id/doc_id",
        )


def _cast(df: pl.DataFrame, table: str, where: str) -> pl.DataFrame:
    """``df`` with every contract column cast to its contract dtype; a failed cast is a DataError."""
    spec = TABLES[table]
    casts = []
    for col, dtype in {**spec["required"], **spec["optional"]}.items():
        if col not in df.columns or df.schema[col] == dtype:
            continue
        try:
            df.select(pl.col(col).cast(dtype, strict=True))
        except Exception as exc:  # polars raises several error types on a failed cast
            raise DataError(
                where,
                f"column '{col}' has type {df.schema[col]}, cannot be read as "
                f"{dtype} ({str(exc).splitlines()[0]})",
                f"write '{col}' as {dtype}",
                field=col,
            ) from None
        casts.append(pl.col(col).cast(dtype, strict=True))
    if casts:
        df = df.with_columns(casts)
    return df


def _check_present_and_finite(df: pl.DataFrame, table: str, where: str) -> None:
    """Returns None; a null required value or a NaN/inf importance or weight is a DataError."""
    for col in TABLES[table]["required"]:
        nulls = df[col].is_null()
        if nulls.any():
            raise DataError(
                where,
                f"'{col}' is missing",
                f"give every row a '{col}'",
                row=_first_bad_row(nulls),
                field=col,
            )
    for col in ("importance", "weight"):
        if col in df.columns and df.schema[col].is_float():
            bad = df[col].is_nan() | df[col].is_infinite()
            if bad.fill_null(False).any():
                raise DataError(
                    where,
                    f"'{col}' is not a finite number",
                    f"use a finite '{col}'",
                    row=_first_bad_row(bad.fill_null(False)),
                    field=col,
                )


def _check_scope_and_keys(df: pl.DataFrame, table: str, where: str) -> None:
    """Returns None; an empty query ``doc_scope`` or a duplicate key is a DataError."""
    if table == "queries" and "doc_scope" in df.columns:
        empty = (df["doc_scope"].list.len() == 0).fill_null(False)
        if empty.any():
            raise DataError(
                where,
                "'doc_scope' is an empty list (a query that may see no document)",
                "omit doc_scope (or leave it null) to search the whole corpus, or list the doc ids "
                "the query may see",
                row=_first_bad_row(empty),
                field="doc_scope",
            )
    for key in KEYS.get(table, []):
        dup = df[key].is_duplicated()
        if dup.any():
            row = _first_bad_row(dup)
            raise DataError(
                where,
                f"duplicate {key} {df[key][row]!r}",
                f"make '{key}' unique",
                row=row,
                field=key,
            )


def conform(df: pl.DataFrame, table: str, where: str) -> pl.DataFrame:
    """Validate ``df`` against ``table``'s contract; returns it with contract dtypes.

    Rows are reported 0-based in the order the adapter read them.
    """
    _check_columns(df, table, where)
    df = _cast(df, table, where)
    _check_present_and_finite(df, table, where)
    _check_scope_and_keys(df, table, where)
    return df


def dtypes(table: str, columns: Sequence[str]) -> dict[str, pl.DataType]:
    """``{column: its contract dtype}`` for ``columns`` of ``table`` (:data:`TABLES`), in that
    order: an adapter names the columns it writes and never retypes them."""
    spec = {**TABLES[table]["required"], **TABLES[table]["optional"]}
    return {c: spec[c] for c in columns}


def frame(rows: list[dict], table: str, columns: Sequence[str], where: str) -> pl.DataFrame:
    """``rows`` (dicts) as a conformed ``table``: ``columns`` in that order, of their contract
    dtypes (:func:`dtypes`)."""
    return conform(pl.DataFrame(rows, schema=dtypes(table, columns)), table, where)


IMPORTANCE_SCALES = ("auto", "10", "1")


def importance_to_10(nodes: pl.DataFrame, scale, where: str) -> tuple[pl.DataFrame, str | None]:
    """Nodes with ``importance`` on the contract's 0–10 scale, and a note for the manifest when a
    0–1 input was converted (×10). Done once, at ingest (the adapters that read importance).

    ``scale``: ``10`` (as given), ``1`` (a 0–1 scale, ×10), ``auto``: per source document
    (``doc_id``; a node without one on its own) a 0–1 scale when every non-null value of that
    document is ≤ 1, else 0–10. Deciding per document, never over the whole corpus, keeps scopes
    sealed: an edit in one scope cannot rescale another scope's importance. Values outside the
    scale are a :class:`DataError`.
    """
    from pipeline.contract.errors import require_one_of

    scale = (
        f"{scale:g}"
        if isinstance(scale, (int, float)) and not isinstance(scale, bool)
        else str(scale)
    )
    require_one_of("data.importance_scale", scale, IMPORTANCE_SCALES)
    if "importance" not in nodes.columns or nodes["importance"].null_count() == nodes.height:
        return nodes, None
    hi = 1.0 if scale == "1" else 10.0
    bad = ((nodes["importance"] < 0) | (nodes["importance"] > hi)).fill_null(False)
    if bad.any():
        row = _first_bad_row(bad)
        raise DataError(
            where,
            f"importance {nodes['importance'][row]} is outside 0–{hi:g} "
            f"(data.importance_scale={scale})",
            "use 0–10 (or 0–1 with data.importance_scale=1)",
            row=row,
            field="importance",
        )
    if scale == "10":
        return nodes, None
    if scale == "1":
        scaled = pl.lit(True)
    else:
        doc = pl.col("doc_id") if "doc_id" in nodes.columns else pl.lit(None, pl.String)
        source = pl.coalesce(doc, pl.lit("\x00") + pl.col("node_id"))
        scaled = (pl.col("importance").max().over(source) <= 1.0).fill_null(False)
    flags = nodes.select(scaled.alias("s"))["s"] if scale == "auto" else None
    if flags is not None and not flags.any():
        return nodes, None
    nodes = nodes.with_columns(
        pl.when(scaled).then(pl.col("importance") * 10.0).otherwise(pl.col("importance"))
    )
    why = "every value of its document ≤ 1" if scale == "auto" else "data.importance_scale=1"
    return nodes, f"importance read on a 0–1 scale ({why}) and multiplied by 10 at ingest"


def check_finite(x, where: str, field: str) -> None:
    """Raise if a float array holds NaN or inf (e.g. precomputed embeddings)."""
    import numpy as np

    bad = ~np.isfinite(np.asarray(x))
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise DataError(
            where, f"'{field}' holds NaN or inf", "recompute or drop that row", row=row, field=field
        )


def parse_timestamp(value, where: str, row, field: str):
    """A timestamp from an ISO date/datetime string, a date, or None (UTC assumed when naive)."""
    import datetime as dt

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, dt.datetime):
        ts = value
    elif isinstance(value, dt.date):
        ts = dt.datetime(value.year, value.month, value.day)
    else:
        try:
            ts = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise DataError(
                where,
                f"'{field}' value {value!r} is not a date",
                "write it as YYYY-MM-DD or an ISO 8601 datetime",
                row=row,
                field=field,
            ) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.timezone.utc)
    try:
        return ts.astimezone(dt.timezone.utc)
    except OverflowError:  # 9999-12-31T23:59:59-23:59 lies past the year 9999 in UTC
        raise DataError(
            where,
            f"'{field}' value {value!r} lies outside the years 1–9999 in UTC",
            "write a date-time of years 1–9999",
            row=row,
            field=field,
        ) from None
