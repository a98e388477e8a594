"""Injection text: how the recalled nodes of one query would be handed to the LLM (optional output
``injection.parquet``: query_id, format, text). Three house styles:

- ``bme``: per node type, ``<type>:`` and a markdown table of the columns non-empty for at least one
  node (cells with ``|`` escaped, newlines as spaces, cut to 200 characters).
- ``reme``: per unit, ``========== doc:start-end [score=… dense=… lexical=…] ==========`` then the text.
- ``oks``: one line per node, ``- [type] title (id) rel=x.xx`` plus a 160-character preview.
"""
from __future__ import annotations

import polars as pl

from pipeline.errors import choose

FORMATS = ("bme", "reme", "oks")
TYPE_MULT = {"anti-pattern": 1.5, "strategy": 0.8, "concept": 0.6}  # OKS Soul Boost; other types 0.5
GENERIC_TITLES = {"index", "overview", "readme", "目录", "概述", "总览", "首页", "introduction", "conclusion",
                  "background", "summary"}


def soul_boost(type_: str | None, title: str | None) -> float:
    """OKS injection boost: type multiplier × 0.5 for a generic title (rounded to 3 places)."""
    b = TYPE_MULT.get((type_ or "").lower(), 0.5)
    if (title or "").strip().lower() in GENERIC_TITLES:
        b *= 0.5
    return round(b, 3)
BME_COLUMNS = ("title", "text", "tags", "status", "importance")


def _cell(v, limit: int = 200) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        v = ", ".join(map(str, v))
    return str(v).replace("|", "\\|").replace("\r", " ").replace("\n", " ")[:limit]


def _bme(rows: list[dict]) -> str:
    out = []
    for typ in dict.fromkeys(r.get("type") or "memory" for r in rows):
        group = [r for r in rows if (r.get("type") or "memory") == typ]
        cols = [c for c in BME_COLUMNS if any(r.get(c) not in (None, "", []) for r in group)]
        out += [f"{typ}:", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in group]
        out.append("")
    return "\n".join(out).rstrip()


def _reme(rows: list[dict]) -> str:
    out = []
    for r in rows:
        span = f":{r['start_line']}-{r['end_line']}" if r.get("start_line") is not None else ""
        parts = [f"score={r['score']:.4f}"] + [f"{c}={r[c]:.4f}" for c in ("dense", "lexical") if r.get(c) is not None]
        out += [f"========== {r.get('doc_id') or r['node_id']}{span} [{' '.join(parts)}] ==========", r["text"]]
    return "\n".join(out)


def _oks(rows: list[dict]) -> str:
    return "\n".join(f"- [{r.get('type') or 'memory'}] {r.get('title') or r['node_id']} ({r['node_id']}) "
                     f"rel={r['score']:.2f}\n  {_cell(r['text'], 160)}" for r in rows)


def render(recall: pl.DataFrame, nodes: pl.DataFrame, fmt: str, max_nodes: int = 12,
           soul: bool = False) -> pl.DataFrame:
    """One injection text per query from its first ``max_nodes`` recalled rows (in rank order).

    ``soul``: the injection layer orders the query's recalled rows by score × Soul Boost before
    cutting to ``max_nodes`` (OKS's design; the recall layer and recall.parquet are unchanged).
    """
    choose("inject.format", fmt, FORMATS)
    keep = [c for c in ("node_id", "text", "title", "type", "tags", "status", "importance", "start_line", "end_line")
            if c in nodes.columns]
    rows = recall.join(nodes.select(keep), on="node_id", how="left")
    if soul:
        boost = [soul_boost(t, ti) for t, ti in zip(rows["type"] if "type" in rows.columns else [None] * rows.height,
                                                    rows["title"] if "title" in rows.columns else [None] * rows.height)]
        rows = (rows.with_columns(injection_boost=pl.Series(boost))
                .sort(["query_id", pl.col("score") * pl.col("injection_boost"), "rank"], descending=[False, True, False])
                .with_columns(rank=pl.col("rank").cum_count().over("query_id").cast(pl.Int32)))
    rows = rows.filter(pl.col("rank") <= max_nodes).sort("query_id", "rank")
    fn = {"bme": _bme, "reme": _reme, "oks": _oks}[fmt]
    out = [(qid, fmt, fn(list(g.iter_rows(named=True))))
           for (qid,), g in rows.group_by("query_id", maintain_order=True)]
    return pl.DataFrame(out, schema={"query_id": pl.String, "format": pl.String, "text": pl.String}, orient="row")
