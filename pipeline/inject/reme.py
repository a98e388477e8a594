"""``inject.format=reme``: ReMe's ``search`` answer (agentscope-ai/ReMe @ c8e12487,
``steps/index/search.py``): per recalled chunk ``========== path:start-end [score=…] ==========``
(ReMe's ``_format_scores``: ``score=…`` alone, or with ``vector=… keyword=…`` — the rows'
``dense`` and ``lexical``, ``-`` where a row has none — when both branches found something for the
query) and its text, then, with ``expand_links: true`` (the default), ReMe's
link-expansion lines of the chunk's file (``utils/link_expansion.py``): its out- and in-links
among the file graph's files, grouped by neighbour (at most 10 per direction), each with the
neighbour's front-matter ``name``/``description`` and one ``via anchor=#…`` line per anchor.

The links come from the store the run read (``data=reme`` with ReMe's index:
``Dataset.tables["file_links"]`` and ``["file_nodes"]``); without them (a markdown walk, another
adapter) only the chunk lines are written.
"""

from __future__ import annotations

import polars as pl

MAX_LINKS_PER_DIRECTION = 10  # search.py kwargs max_links_per_direction


BRANCHES = (("vector", "dense"), ("keyword", "lexical"))  # ReMe's branch name, the row's column


def hybrid(rows: list[dict]) -> bool:
    """ReMe's ``hybrid``: both the vector and the keyword branch found something for the query."""
    return all(any(r.get(col) is not None for r in rows) for _name, col in BRANCHES)


def _header(r: dict, both: bool) -> str:
    span = f":{r['start_line']}-{r['end_line']}" if r.get("start_line") is not None else ""
    parts = [f"score={r['score']:.4f}"]
    if both:
        parts += [
            f"{name}={r[col]:.4f}" if r.get(col) is not None else f"{name}=-"
            for name, col in BRANCHES
        ]
    return f"========== {r.get('doc_id') or r['node_id']}{span} [{' '.join(parts)}] =========="


class Links:
    """ReMe's file graph as ``LocalFileGraph`` answers ``get_outlinks``/``get_inlinks`` (scope
    REAL: only links whose target is a file of the graph) and ``get_nodes``."""

    def __init__(self, links: pl.DataFrame, files: pl.DataFrame) -> None:
        self.meta = {
            p: {k: v for k, v in (("name", n), ("description", d)) if v}
            for p, n, d in files.select("path", "name", "description").iter_rows()
        }
        self.out: dict[str, list[tuple]] = {}
        self.into: dict[str, set[str]] = {}
        cols = ("node_path", "source_path", "target_path", "target_anchor")
        for node, src, tgt, anchor in links.select(*cols).rows():
            self.out.setdefault(node, []).append((src, tgt, anchor))
            if tgt:
                self.into.setdefault(tgt, set()).add(node)

    def expansion(self, path: str) -> dict:
        """``expand_links`` for one path: {outlinks, inlinks} of {path, meta, anchors}."""
        outs = [lk for lk in self.out.get(path, []) if lk[1] and lk[1] in self.meta]
        ins = [
            lk
            for src in sorted(self.into.get(path, set()))
            if src in self.meta
            for lk in self.out.get(src, [])
            if lk[1] == path
        ]
        return {
            "outlinks": self._grouped(outs, 1),
            "inlinks": self._grouped(ins, 0),
        }

    def _grouped(self, links: list[tuple], side: int) -> list[dict]:
        groups: dict[str, list[str]] = {}
        for lk in links:
            if not lk[side]:
                continue
            anchors = groups.setdefault(lk[side], [])
            if lk[2]:
                anchors.append(lk[2])
        kept = list(groups.items())[:MAX_LINKS_PER_DIRECTION]
        return [{"path": p, "meta": self.meta.get(p, {}), "anchors": a} for p, a in kept]


def _meta_inline(meta: dict) -> str:
    parts = [f'{k}="{meta[k]}"' for k in ("name", "description") if k in meta]
    return "  ".join(parts) if parts else "(no meta)"


def expansion_lines(expansion: dict, indent: str = "  ") -> list[str]:
    """``render_expansion_lines``: one path's expansion as indented lines ([] when empty)."""
    lines = []
    for direction, arrow in (("outlinks", "→"), ("inlinks", "←")):
        items = expansion.get(direction) or []
        if not items:
            continue
        lines.append(f"{indent}{direction} ({len(items)}):")
        for item in items:
            lines.append(f"{indent}  {arrow} {item['path']}  {_meta_inline(item['meta'])}")
            lines += [f"{indent}      via anchor=#{a}" for a in item["anchors"]]
    return lines


def renderer(store):
    """The text function of ``inject.format=reme`` for the run's store (links when it has them)."""
    tables = getattr(store, "tables", None) or {}
    links = (
        Links(tables["file_links"], tables["file_nodes"])
        if tables.get("file_links") is not None and tables.get("file_nodes") is not None
        else None
    )

    def text(rows: list[dict]) -> str:
        out, both = [], hybrid(rows)
        for r in rows:
            out += [_header(r, both), r["text"]]
            if links is not None and r.get("doc_id"):
                out += expansion_lines(links.expansion(r["doc_id"]))
        return "\n".join(out)

    return text
