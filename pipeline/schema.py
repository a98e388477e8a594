"""The data contract (``DESIGN.md`` §2): column types per table and validation at the boundary.

``conform(df, table, where)`` checks required columns, casts known optional columns to their
contract type, and raises :class:`DataError` naming the file, row and field of the first problem.
"""
from __future__ import annotations

import math

import polars as pl

from pipeline.errors import DataError

TS = pl.Datetime("us", "UTC")

TABLES: dict[str, dict[str, dict[str, pl.DataType]]] = {
    "nodes": {
        "required": {"node_id": pl.String, "text": pl.String},
        "optional": {
            "doc_id": pl.String, "title": pl.String, "description": pl.String,
            "tags": pl.List(pl.String), "type": pl.String, "code": pl.String,
            "importance": pl.Float32, "created_at": TS, "updated_at": TS, "last_access_at": TS,
            "access_count": pl.Int64, "pinned": pl.Boolean, "archived": pl.Boolean,
            "status": pl.String, "visibility": pl.List(pl.String), "seq": pl.Int64,
            "start_line": pl.Int64, "end_line": pl.Int64, "speaker": pl.String,
            # BME scope / story time (pipeline/stages/scope_policy.py, docs/presets.md)
            "scope_layer": pl.String, "scope_owner_type": pl.String, "scope_owner": pl.String,
            "scope_region": pl.String, "scope_regions": pl.List(pl.String), "story_time": pl.Int64,
            "story_time_end": pl.Int64, "story_tense": pl.String,
            "lesson": pl.String,  # OKS review.lesson (Soul Boost × 1.2 in inject.format=oks)
        },
    },
    "edges": {
        "required": {"src": pl.String, "dst": pl.String},
        "optional": {"relation": pl.String, "weight": pl.Float32, "inhibit": pl.Boolean,
                     "valid_from": TS, "valid_to": TS},
    },
    "queries": {
        "required": {"query_id": pl.String, "text": pl.String},
        "optional": {"context": pl.List(pl.String), "viewer": pl.String, "now": TS,
                     "doc_scope": pl.List(pl.String), "group": pl.String,
                     "query_rewrite": pl.String,
                     # BME scene state (scope policy): who speaks, where, which story segment
                     "active_owners": pl.List(pl.String), "active_user_owners": pl.List(pl.String),
                     "active_region": pl.String, "adjacent_regions": pl.List(pl.String),
                     "story_segment": pl.Int64,
                     "goals": pl.List(pl.String)},  # OKS goal slugs: their pages go first in inject.format=oks
    },
    "qrels": {
        "required": {"query_id": pl.String, "relevance": pl.Int32},
        "optional": {"node_id": pl.String, "doc_id": pl.String},
    },
    "recall": {
        "required": {"query_id": pl.String, "rank": pl.Int32, "node_id": pl.String,
                     "score": pl.Float64},
        "optional": {"channel": pl.String, "doc_id": pl.String},
    },
}

KEYS = {"nodes": ["node_id"], "queries": ["query_id"]}


def _first_bad_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0])


def conform(df: pl.DataFrame, table: str, where: str) -> pl.DataFrame:
    """Validate ``df`` against ``table``'s contract; returns it with contract dtypes.

    Rows are reported 0-based in the order the adapter read them.
    """
    spec = TABLES[table]
    for col in spec["required"]:
        if col not in df.columns:
            raise DataError(where, f"{table} table has no '{col}' column (columns: {df.columns})",
                            f"add a '{col}' column", field=col)
    if table == "qrels" and ("node_id" in df.columns) == ("doc_id" in df.columns):
        raise DataError(where, "qrels need exactly one of 'node_id' or 'doc_id'",
                        "keep one target column", field="node_id/doc_id")
    casts = []
    for col, dtype in {**spec["required"], **spec["optional"]}.items():
        if col not in df.columns or df.schema[col] == dtype:
            continue
        try:
            df.select(pl.col(col).cast(dtype, strict=True))
        except Exception as exc:  # polars raises several error types on a failed cast
            raise DataError(where, f"column '{col}' has type {df.schema[col]}, cannot be read as "
                            f"{dtype} ({str(exc).splitlines()[0]})",
                            f"write '{col}' as {dtype}", field=col) from None
        casts.append(pl.col(col).cast(dtype, strict=True))
    if casts:
        df = df.with_columns(casts)
    for col in spec["required"]:
        nulls = df[col].is_null()
        if nulls.any():
            raise DataError(where, f"'{col}' is missing", f"give every row a '{col}'",
                            row=_first_bad_row(nulls), field=col)
    for col in ("importance", "weight"):
        if col in df.columns and df.schema[col].is_float():
            bad = df[col].is_nan() | df[col].is_infinite()
            if bad.fill_null(False).any():
                raise DataError(where, f"'{col}' is not a finite number", f"use a finite '{col}'",
                                row=_first_bad_row(bad.fill_null(False)), field=col)
    for key in KEYS.get(table, []):
        dup = df[key].is_duplicated()
        if dup.any():
            row = _first_bad_row(dup)
            raise DataError(where, f"duplicate {key} {df[key][row]!r}",
                            f"make '{key}' unique", row=row, field=key)
    return df


def check_finite(x, where: str, field: str) -> None:
    """Raise if a float array holds NaN or inf (e.g. precomputed embeddings)."""
    import numpy as np

    bad = ~np.isfinite(np.asarray(x))
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise DataError(where, f"'{field}' holds NaN or inf", "recompute or drop that row",
                        row=row, field=field)


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
            raise DataError(where, f"'{field}' value {value!r} is not a date",
                            "write it as YYYY-MM-DD or an ISO 8601 datetime",
                            row=row, field=field) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.timezone.utc)
    return ts.astimezone(dt.timezone.utc)
