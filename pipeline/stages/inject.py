"""Injection text: what each system would hand its LLM for one query (optional output
``injection.parquet``: query_id, format, text, node_ids). ``inject.format``:

- ``bme``: the first 12 recalled nodes plus the always-injected core, in scope-bucket sections of
  per-type markdown tables (``pipeline/stages/inject_bme.py``).
- ``reme``: per unit, ``========== doc:start-end [score=… dense=… lexical=…] ==========`` then the
  text; every recalled unit (ReMe returns ``limit`` results) unless ``max_nodes`` is set.
- ``oks``: the auto-recall hook: recalled nodes with relevance (score) ≥ 0.7, not injected in the
  same ``group`` during the last 10 turns (queries in ``now`` order), at most 3; one line each,
  ``- [type] title (id) rel=x.xx`` plus a 160-character preview. Before the floor: the goal reorder
  (nodes whose slug — the file stem of ``doc_id``, else ``node_id`` — is in the query's ``goals``
  first) and, with ``soul_boost``, OKS's designed Soul Boost ordering (score × boost).
Each format's constants are the defaults of ``InjectParams``' null fields (``DEFAULTS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

import polars as pl

from pipeline.errors import require_one_of
from pipeline.stages import inject_bme

FORMATS = ("bme", "reme", "oks")
DEFAULTS = {
    "bme": {"max_nodes": 12},
    "reme": {"max_nodes": None},
    "oks": {"max_nodes": 3, "floor": 0.7, "cooldown": 10},
}  # hook top-n 3, floor 0.7, cooldown 10
TYPE_MULT = {
    "anti-pattern": 1.5,
    "strategy": 0.8,
    "concept": 0.6,
}  # OKS Soul Boost; other types 0.5
LESSON_MULT = 1.2
GENERIC_TITLES = {
    "index",
    "overview",
    "readme",
    "目录",
    "概述",
    "总览",
    "首页",
    "introduction",
    "conclusion",
    "background",
    "summary",
}


@dataclass
class InjectParams:
    """Injection settings: the format and its caps; None takes the format's default."""

    format: str = "none"
    max_nodes: int | None = None  # null = the format's own cap (bme 12, oks 3, reme none)
    floor: float | None = None  # oks: relevance floor (null = 0.7)
    cooldown: int | None = None  # oks: turns a node stays out after it was injected (null = 10)
    core: bool = True  # bme: always-injected core nodes (event, rule, thread, synopsis)
    soul_boost: bool = (
        False  # oks: order by score × Soul Boost before the floor (the design, not the code)
    )
    goal_reorder: bool = True  # oks: nodes of the query's goal slugs first
    scene: bool = True  # bme: POV augmentation + scene reconstruction (BME's selectedNodeIds)

    def get(self, name: str):
        """The setting ``name``, or the format's default when it is None."""
        v = getattr(self, name)
        return DEFAULTS.get(self.format, {}).get(name) if v is None else v


def soul_boost(type_: str | None, title: str | None, lesson=None) -> float:
    """OKS injection boost: type multiplier × 1.2 with a review lesson × 0.5 for a generic title (3 places)."""
    b = TYPE_MULT.get((type_ or "").lower(), 0.5)
    if lesson:
        b *= LESSON_MULT
    if (title or "").strip().lower() in GENERIC_TITLES:
        b *= 0.5
    return round(b, 3)


def _reme(rows: list[dict]) -> str:
    out = []
    for r in rows:
        span = f":{r['start_line']}-{r['end_line']}" if r.get("start_line") is not None else ""
        parts = [f"score={r['score']:.4f}"] + [
            f"{c}={r[c]:.4f}" for c in ("dense", "lexical") if r.get(c) is not None
        ]
        out += [
            f"========== {r.get('doc_id') or r['node_id']}{span} [{' '.join(parts)}] ==========",
            r["text"],
        ]
    return "\n".join(out)


def _oks(rows: list[dict]) -> str:
    return "\n".join(
        f"- [{r.get('type') or 'memory'}] {r.get('title') or r['node_id']} ({r['node_id']}) "
        f"rel={r['score']:.2f}\n  {inject_bme.cell(r['text'], 160)}"
        for r in rows
    )


def _col(rows: pl.DataFrame, name: str) -> list:
    return rows[name].to_list() if name in rows.columns else [None] * rows.height


def _oks_order(rows: pl.DataFrame, queries: pl.DataFrame | None, p: InjectParams) -> pl.DataFrame:
    """Goal reorder (stable: goal slugs first) and, with soul_boost, score × boost; then the floor."""
    keys = []
    if p.goal_reorder and queries is not None and "goals" in queries.columns:
        slug = [
            PurePosixPath(d or n).stem
            for d, n in zip(_col(rows, "doc_id"), rows["node_id"].to_list())
        ]
        rows = rows.with_columns(slug=pl.Series(slug, dtype=pl.String)).join(
            queries.select("query_id", "goals"), on="query_id", how="left"
        )
        rows = rows.with_columns(
            off_goal=~pl.col("goals").list.contains(pl.col("slug")).fill_null(False)
        )
        keys.append("off_goal")
    if p.soul_boost:
        boost = [
            soul_boost(t, ti, le)
            for t, ti, le in zip(_col(rows, "type"), _col(rows, "title"), _col(rows, "lesson"))
        ]
        rows = rows.with_columns(
            injection_boost=pl.Series(boost), soul=pl.col("score") * pl.Series(boost)
        )
        keys.append("soul")
    rows = rows.sort(
        ["query_id", *keys, "rank"], descending=[False, *[k == "soul" for k in keys], False]
    )
    floor = p.get("floor")
    return rows if floor is None else rows.filter(pl.col("score") >= floor)


def _turns(queries: pl.DataFrame | None, qids: list[str]) -> dict[str, tuple]:
    """query_id → (group, turn number in the group's ``now`` order); no group = a session of its own."""
    if queries is None or "group" not in queries.columns:
        return {q: (q, 0) for q in qids}
    q = queries.with_row_index("i").with_columns(g=pl.col("group").fill_null(pl.col("query_id")))
    q = q.sort(["g", *(["now"] if "now" in q.columns else []), "i"], nulls_last=True)
    q = q.with_columns(turn=pl.col("i").cum_count().over("g"))
    return {qid: (g, t) for qid, g, t in q.select("query_id", "g", "turn").iter_rows()}


def _oks_pick(
    rows: pl.DataFrame, queries: pl.DataFrame | None, p: InjectParams
) -> dict[str, list[dict]]:
    """The hook's top-n per query after the cooldown (a node shown in the last ``cooldown`` turns of
    the same group is skipped), queries processed turn by turn."""
    top, cool = p.get("max_nodes"), p.get("cooldown") or 0
    by_q = {
        qid: list(g.iter_rows(named=True))
        for (qid,), g in rows.group_by("query_id", maintain_order=True)
    }
    turns = _turns(queries, list(by_q))
    last: dict[tuple, int] = {}
    out = {}
    for qid in sorted(by_q, key=lambda q: turns[q]):
        g, t = turns[qid]
        pick = [
            r for r in by_q[qid] if not (cool and t - last.get((g, r["node_id"]), -(10**9)) <= cool)
        ]
        pick = pick[:top] if top else pick
        for r in pick:
            last[(g, r["node_id"])] = t
        out[qid] = pick
    return {q: out[q] for q in by_q}


def _bme(recall, nodes, queries, p: InjectParams, include_archived: bool, edges, schema: dict):
    """``inject.format=bme``: the texts, the nodes shown and BME's ``selected`` (what it reinforces)."""
    out = inject_bme.render(
        recall, nodes, queries, int(p.get("max_nodes")), p.core, include_archived, edges, p.scene
    )
    rows = [(q, p.format, t, ids, sel) for q, t, ids, sel in out]
    return pl.DataFrame(rows, schema={**schema, "selected": pl.List(pl.String)}, orient="row")


def render(
    recall: pl.DataFrame,
    nodes: pl.DataFrame,
    fmt: str,
    max_nodes: int | None = None,
    soul: bool = False,
    *,
    queries: pl.DataFrame | None = None,
    include_archived: bool = False,
    edges: pl.DataFrame | None = None,
    **opts,
) -> pl.DataFrame:
    """One injection text per query that injects anything; ``node_ids`` lists the nodes it shows.
    ``opts`` are the other ``InjectParams`` fields; the recall layer is never changed."""
    require_one_of("inject.format", fmt, FORMATS)
    p = InjectParams(format=fmt, **{"max_nodes": max_nodes, "soul_boost": soul, **opts})
    schema = {
        "query_id": pl.String,
        "format": pl.String,
        "text": pl.String,
        "node_ids": pl.List(pl.String),
    }
    if fmt == "bme":
        return _bme(recall, nodes, queries, p, include_archived, edges, schema)
    keep = [
        c
        for c in (
            "node_id",
            "text",
            "title",
            "type",
            "tags",
            "status",
            "importance",
            "start_line",
            "end_line",
            "lesson",
        )
        if c in nodes.columns
    ]
    rows = recall.join(nodes.select(keep), on="node_id", how="left").sort("query_id", "rank")
    if fmt == "oks":
        picked = _oks_pick(_oks_order(rows, queries, p), queries, p)
    else:
        cap = p.get("max_nodes")
        rows = rows.filter(pl.col("rank") <= cap) if cap else rows
        picked = {
            qid: list(g.iter_rows(named=True))
            for (qid,), g in rows.group_by("query_id", maintain_order=True)
        }
    fn = _oks if fmt == "oks" else _reme
    out = [(qid, fmt, fn(rs), [r["node_id"] for r in rs]) for qid, rs in picked.items() if rs]
    return pl.DataFrame(out, schema=schema, orient="row")
