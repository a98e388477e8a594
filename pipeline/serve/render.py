"""The response of one lookup: the entry's rows (cut to ``k``) and an injection block in the
asked format, and the entries of freshly computed queries."""

from __future__ import annotations

import polars as pl
from omegaconf import DictConfig

FORMATS = ("rows", "reme", "oks", "bme")


def blocks(
    cfg: DictConfig, ds, nodes: pl.DataFrame, rows: pl.DataFrame, queries: pl.DataFrame, fmt: str
) -> dict[str, str]:
    """{query_id: injection text} of ``rows`` in ``fmt`` (``inject.formats.render``, as a run
    writes injection.parquet; the recipe's ``inject`` settings when ``fmt`` is its format, the
    format's defaults otherwise); {} for ``none``."""
    from pipeline.inject import formats

    if fmt == "none" or not rows.height:
        return {}
    opts = (
        {k: v for k, v in cfg.inject.items() if k != "format"} if fmt == cfg.inject.format else {}
    )
    out = formats.render(
        rows,
        nodes,
        fmt,
        queries=queries,
        include_archived=bool(cfg.include_archived),
        edges=ds.edges,
        log=ds.use_log(),
        **opts,
    )
    return dict(zip(out["query_id"].to_list(), out["text"].to_list(), strict=True))


def injection(cfg: DictConfig, ds, nodes: pl.DataFrame, entry: dict, fmt: str) -> str | None:
    """The entry's block in ``fmt``: the stored one for ``rows`` or the recipe's own format, else
    rendered from the entry's rows."""
    if fmt == "rows" or fmt == cfg.inject.format:
        return entry["injection"]
    return rendered(cfg, ds, nodes, entry["rows"], entry["query_text"], fmt)


def rendered(cfg: DictConfig, ds, nodes: pl.DataFrame, rows: list[dict], text: str, fmt: str):
    """The block in ``fmt`` of ``rows`` (an entry's rows, or its first k) of the query ``text``,
    rendered by :func:`blocks`; None when nothing is injected."""
    if not rows or fmt in ("rows", "none"):
        return None
    frame = pl.DataFrame(rows).with_columns(query_id=pl.lit("q"))
    queries = pl.DataFrame({"query_id": ["q"], "text": [text]})
    return blocks(cfg, ds, nodes, frame, queries, fmt).get("q")


def body(entry: dict, k: int | None, inj: str | None, cache: str) -> dict:
    """The response body: rows (the first ``k``), injection, cache (hit|miss), scope_version."""
    rows = entry["rows"] if k is None else entry["rows"][:k]
    return {"rows": rows, "injection": inj, "cache": cache, "scope_version": entry["scope_version"]}
