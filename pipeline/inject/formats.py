"""Injection text: what each system would hand its LLM for one query (optional output
``injection.parquet``: query_id, format, text, node_ids). ``inject.format``:

- ``bme``: the first 12 recalled nodes plus the always-injected core, in scope-bucket sections of
  per-type markdown tables (``pipeline/inject/bme.py``).
- ``reme``: per unit, ``========== doc:start-end [score=…] ==========`` (ReMe's scores), the
  text and ReMe's link-expansion lines of its file (``pipeline/inject/reme.py``); every
  recalled unit (ReMe returns ``limit`` results: preset reme's ``k`` 5) unless ``max_nodes`` is set.
- ``oks``: the auto-recall hook's knowledge section (``pipeline/inject/oks.py``): recalled
  pages with relevance (score) ≥ 0.7, not injected in the same ``group`` during the last 10 turns
  (queries in ``now`` order), at most 3; one line each, ``- [type] title (slug) rel=x.xx`` plus a
  160-character preview. Before the floor: the goal reorder (pages whose slug — the file stem of
  ``doc_id``, else ``node_id`` — is in the query's ``goals`` first) and, with ``soul_boost``,
  OKS's designed Soul Boost ordering (score × boost).
Each format's constants are the defaults of ``InjectParams``' null fields (``DEFAULTS``).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline.contract.errors import require_one_of
from pipeline.inject import bme, oks, reme
from pipeline.inject.oks import soul_boost  # noqa: F401  (the Soul Boost, re-exported)

FORMATS = ("bme", "reme", "oks")
DEFAULTS = {
    "bme": {"max_nodes": 12},
    "reme": {"max_nodes": None},
    "oks": {"max_nodes": 3, "floor": 0.7, "cooldown": 10},
}  # hook top-n 3, floor 0.7, cooldown 10


NODE_COLUMNS = (
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
    "body",
    "area",
)  # the node fields the reme and oks texts read


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
    # OKS team design (pipeline/inject/team.py), all off by default:
    cooldown_by: str = "group"  # oks: read state per query `group` (session) or per `agent`
    beta_item: float = 0.0  # oks: ItemCF boost weight (agents that injected x also injected y)
    beta_user: float = 0.0  # oks: UserCF boost weight (agents whose injections resemble this one's)
    mmr_lambda: float | None = None  # oks: MMR over area/type similarity (null = off)

    def __post_init__(self) -> None:
        require_one_of("inject.cooldown_by", self.cooldown_by, ("group", "agent"))

    def get(self, name: str):
        """The setting ``name``, or the format's default when it is None."""
        v = getattr(self, name)
        return DEFAULTS.get(self.format, {}).get(name) if v is None else v


def _bme(recall, nodes, queries, p: InjectParams, include_archived: bool, edges, schema: dict):
    """``inject.format=bme``: the texts, the nodes shown and BME's ``selected`` (what it reinforces)."""
    out = bme.render(
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
    log: pl.DataFrame | None = None,
    store=None,
    **opts,
) -> pl.DataFrame:
    """One injection text per query that injects anything; ``node_ids`` lists the nodes it shows.
    ``store`` is the run's ``Dataset`` (its ``settings`` and ``tables``: OKS's per-page preview,
    ReMe's file links); ``opts`` are the other ``InjectParams`` fields; the recall layer is never
    changed."""
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
    keep = [c for c in NODE_COLUMNS if c in nodes.columns]
    rows = recall.join(nodes.select(keep), on="node_id", how="left").sort("query_id", "rank")
    if fmt == "oks":
        picked = oks.pick(oks.order(rows, queries, p, log), queries, p)
        per_page = int((store.settings if store else {}).get("inject_per_page_chars", 200))
        fn = lambda rs: oks.text(rs, per_page)  # noqa: E731
    else:
        cap = p.get("max_nodes")
        rows = rows.filter(pl.col("rank") <= cap) if cap else rows
        picked = {
            qid: list(g.iter_rows(named=True))
            for (qid,), g in rows.group_by("query_id", maintain_order=True)
        }
        fn = reme.renderer(store)
    out = [(qid, fmt, fn(rs), [r["node_id"] for r in rs]) for qid, rs in picked.items() if rs]
    return pl.DataFrame(out, schema=schema, orient="row")
