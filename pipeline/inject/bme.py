"""BME's injection text (its ``buildResult`` and ``formatInjection``; docs/presets.md, ``bme``: injection).

Per query: the first ``max_nodes`` (12) recalled nodes plus the **core** — every node the query may
see whose type BME always injects (event, rule, thread, synopsis). Each node goes to its scope
bucket (``scope_policy.scope_bucket``; without scope columns every node is objective/global):

- ``[Memory - Character POV: <owner>]`` per owner, ``[Memory - User POV / Not Character Facts]``
  (with a caveat line), ``[Memory - Objective / Current Region]`` (uncapped), and adjacent + global
  merged in ``[Memory - Objective / Global]``, capped at 6; other owners' POV nodes are left out;
- inside a section: most recent first (``seq`` desc, then importance desc, default 5), grouped by
  type, each group ``<type>:`` + a markdown table of the columns non-empty for one of its nodes;
- with a ``knowledge`` column (``data=bme``), objective nodes the query's knowledge owners cannot see
  are left out (the gate without score evidence, as ``buildScopedInjectionBuckets``);
- a node is printed once; if every bucket is empty: ``[Memory - Core]`` + ``[Memory - Recalled]``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.contract.schema import KNOWLEDGE_TYPE
from pipeline.inject import bme_scene
from pipeline.ops.scope import scope_groups
from pipeline.stages.scope_policy import NODE_COLS, QUERY_COLS, SCOPE_BUCKETS, gather, scope_bucket

ALWAYS_INJECT = ("event", "rule", "thread", "synopsis")
GLOBAL_CAP = 6
COLUMNS = ("title", "text", "tags", "status", "importance")
CAVEAT = "(the user's side of the story: not facts about the character)"
PRIO = {b: i for i, b in enumerate(SCOPE_BUCKETS)}


def cell(v, limit: int = 200) -> str:
    """A table cell: lists joined, ``|`` escaped, newlines as spaces, cut to ``limit`` characters."""
    if v is None:
        return ""
    if isinstance(v, list):
        v = ", ".join(map(str, v))
    return str(v).replace("|", "\\|").replace("\r", " ").replace("\n", " ")[:limit]


def by_type(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows grouped by node type, types in order of first appearance (the tables' order)."""
    types = dict.fromkeys(r.get("type") or "memory" for r in rows)
    return [(t, [r for r in rows if (r.get("type") or "memory") == t]) for t in types]


def tables(rows: list[dict]) -> list[str]:
    """Per node type: ``<type>:`` and a markdown table of the columns non-empty for one of its nodes."""
    out = []
    for typ, group in by_type(rows):
        cols = [c for c in COLUMNS if any(r.get(c) not in (None, "", []) for r in group)]
        out += [f"{typ}:", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in group]
        out.append("")
    return out


def core_rows(nodes: pl.DataFrame, queries: pl.DataFrame, include_archived: bool) -> pl.DataFrame:
    """(query_id, node_idx) of each query's always-injected nodes (visible to it, not archived)."""
    empty = pl.DataFrame(schema={"query_id": pl.String, "node_idx": pl.Int64})
    if "type" not in nodes.columns:
        return empty
    core = nodes["type"].is_in(ALWAYS_INJECT).fill_null(False).to_numpy()
    qids, parts = queries["query_id"].to_numpy(), [empty]
    for _key, visible, qs in scope_groups(nodes, queries, include_archived):
        mine = visible[core[visible]]
        if len(mine):
            parts.append(
                pl.DataFrame(
                    {
                        "query_id": np.repeat(qids[qs], len(mine)),
                        "node_idx": np.tile(mine, len(qs)).astype(np.int64),
                    }
                )
            )
    return pl.concat(parts)


def _sections(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    def by(*buckets: str) -> list[dict]:
        return [r for r in rows if r["bucket"] in [PRIO[b] for b in buckets]]

    pov = by("characterPov")
    out = [
        (f"[Memory - Character POV: {o}]", [r for r in pov if (r.get("scope_owner") or "") == o])
        for o in dict.fromkeys(r.get("scope_owner") or "" for r in pov)
    ]
    out += [
        ("[Memory - User POV / Not Character Facts]", by("userPov")),
        ("[Memory - Objective / Current Region]", by("objectiveCurrentRegion")),
        (
            "[Memory - Objective / Global]",
            by("objectiveAdjacentRegion", "objectiveGlobal")[:GLOBAL_CAP],
        ),
    ]
    return [(h, rs) for h, rs in out if rs]


def text(rows: list[dict]) -> tuple[str, list[str]]:
    """One query's injection text and the node ids it shows, in the order of its table rows;
    ``rows`` carry ``bucket``, ``core``."""
    rows = sorted(
        rows,
        key=lambda r: (
            -(r.get("seq") if r.get("seq") is not None else -1),
            -(r.get("importance") if r.get("importance") is not None else 5.0),
            r["order"],
        ),
    )
    secs = _sections(rows) or [
        (h, rs)
        for h, rs in (
            ("[Memory - Core]", [r for r in rows if r["core"]]),
            ("[Memory - Recalled]", [r for r in rows if not r["core"]]),
        )
        if rs
    ]
    lines, shown = [], []
    for head, rs in secs:
        rs = [r for r in rs if r["node_id"] not in shown]
        if not rs:
            continue
        lines += [head] + ([CAVEAT] if head.startswith("[Memory - User POV") else []) + tables(rs)
        shown += [r["node_id"] for _typ, group in by_type(rs) for r in group]  # the rows' order
    return "\n".join(lines).rstrip(), shown


def gate_objective(x: pl.DataFrame) -> pl.Series:
    """False for the objective nodes the query's knowledge owners cannot see
    (``buildScopedInjectionBuckets``: the gate with no vector, graph or lexical evidence)."""
    from pipeline.bme import knowledge

    prio = x.select(scope_bucket()).to_series().cast(pl.Int64).to_numpy()
    pov = x["scope_layer"].fill_null("").str.to_lowercase() == "pov"
    zero = pl.Series([0.0] * x.height)
    g = knowledge.gate(
        pl.DataFrame(
            {
                "knowledge": x["knowledge"],
                "active_owner_keys": x["active_owner_keys"],
                "pov": pov,
                "bucket": pl.Series(SCOPE_BUCKETS)[prio],
                "vector": zero,
                "graph": zero,
                "lexical": zero,
            }
        )
    )
    return g["visible"] | pov


def _recalled(recall, nodes, queries, edges, max_nodes: int, include_archived: bool, scene: bool):
    """(query_id, node_id, rank) of the recalled nodes the injection shows: BME's scene-rebuilt
    ``selectedNodeIds`` with ``scene``, else ranks 1 … ``max_nodes``."""
    if not scene or queries is None:
        return recall.filter(pl.col("rank") <= max_nodes).select("query_id", "node_id", "rank")
    picks = bme_scene.selected(recall, nodes, queries, edges, max_nodes, include_archived)
    return pl.DataFrame(
        [(q, n, r + 1) for q, ns in picks.items() for r, n in enumerate(ns)],
        schema={"query_id": pl.String, "node_id": pl.String, "rank": pl.Int32},
        orient="row",
    )


def render(
    recall: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame | None,
    max_nodes: int,
    core: bool,
    include_archived: bool,
    edges: pl.DataFrame | None = None,
    scene: bool = False,
) -> list[tuple[str, str, list[str], list[str]]]:
    """(query_id, text, node_ids, selected) per query; with ``edges`` (``inject.scene``) the
    recalled nodes are BME's scene-reconstructed ``selectedNodeIds`` (``inject.bme_scene``), else
    ranks 1 … ``max_nodes``."""
    idx = nodes.select("node_id").with_row_index("node_idx").cast({"node_idx": pl.Int64})
    top = _recalled(recall, nodes, queries, edges, max_nodes, include_archived, scene)
    chosen = {
        q: g["node_id"].to_list() for (q,), g in top.group_by("query_id", maintain_order=True)
    }
    sel = top.join(idx, on="node_id")
    both = sel.with_columns(core=pl.lit(False))
    if core and queries is not None:
        extra = core_rows(nodes, queries, include_archived).join(idx, on="node_idx")
        both = pl.concat(
            [
                both,
                extra.with_columns(rank=pl.lit(None, pl.Int32), core=pl.lit(True)).select(
                    both.columns
                ),
            ]
        ).unique(["query_id", "node_id"], keep="first", maintain_order=True)
    q = queries if queries is not None else recall.select("query_id").unique(maintain_order=True)
    qidx = q.select("query_id").with_row_index("query_idx").cast({"query_idx": pl.Int64})
    both = both.join(qidx, on="query_id")
    x = pl.concat(
        [
            gather(nodes, both["node_idx"], {**NODE_COLS, "knowledge": KNOWLEDGE_TYPE}),
            gather(q, both["query_idx"], QUERY_COLS),
        ],
        how="horizontal",
    )
    if "knowledge" in nodes.columns:
        keep = gate_objective(x)
        both, x = both.filter(keep), x.filter(keep)
    keep = [
        c
        for c in ("text", "title", "type", "tags", "status", "importance", "seq")
        if c in nodes.columns
    ]
    info = nodes.select(keep)[both["node_idx"].to_numpy()]
    full = pl.concat(
        [both, info, x.select(bucket=scope_bucket(), scope_owner=pl.col("scope_owner"))],
        how="horizontal",
    )
    full = full.with_columns(order=pl.col("rank").fill_null(10**9) * 10**7 + pl.col("node_idx"))
    out = []
    for (qid,), g in full.group_by("query_id", maintain_order=True):
        body, shown = text(list(g.iter_rows(named=True)))
        if shown:
            out.append((qid, body, shown, chosen.get(qid, [])))
    return out
