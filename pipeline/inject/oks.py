"""``inject.format=oks``: what OKS's auto-recall hook injects (``assets/hooks/user-prompt-recall.py``
and ``recall.py::_recall_knowledge_via_backend`` @ 6a281b47), per query.

A query's hits are pages, as OKS's backend returns them: of the first ``4·L`` recalled rows the
best row of each page (its ``doc_id``, else ``node_id``; shown by its slug, the file stem), at most ``L =
max(3·top-n, 10)`` pages (the hook asks ``recall`` for that many). Then the goal reorder (pages of
the query's ``goals`` first, stable) and, with ``soul_boost``, OKS's designed Soul Boost order
(score × boost); relevance = the score rounded to 3 places, kept when ≥ the floor; a page shown in
the same ``group`` fewer than ``cooldown`` turns ago is skipped (OKS: ``turn − last < cooldown``);
at most top-n. A group continues OKS's own state when its queries carry ``hook_n`` (turns already
taken) and ``hook_seen`` ([{slug, turn}]): ``data=oks`` fills them from
``.oks/recall-state-<session>.json``. The text is the hook's knowledge section: a header, then per
page ``- [type] title (slug) rel=x.xx`` and four spaces + the first 160 characters of the page
body (whitespace collapsed, from its first ``inject.per_page_chars`` of ``settings/recall.yaml``,
default 200). The hook's floor, top-n, cooldown and minimum length are its own (0.7, 3, 10, 6:
``OKS_RECALL_*`` environment variables, never ``settings/recall.yaml``, in OKS @ 6a281b47). The title is OKS's FTS5 title column (for a CJK
title, its sorted jieba words: an OKS quirk); the type defaults to ``concept`` as in OKS.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import polars as pl

from pipeline.stages.oks_backend import FUSION_NATIVE, NATIVE

TYPE_MULT = {"anti-pattern": 1.5, "strategy": 0.8, "concept": 0.6}  # other types 0.5
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
HEADER = "## 相关记忆\n相关已沉淀记忆（引用时用 slug；与当前事实冲突以最新为准）："
MINLEN = 6  # the hook skips shorter prompts, and trivial ones, without taking a turn
TRIVIAL = set(
    "你好 谢谢 多谢 ok okay 好 好的 嗯 行 继续 hi hello thanks thx yes no 是 对 收到".split()
)
PER_PAGE_CHARS = 200  # settings inject.per_page_chars: body_preview
PREVIEW_CHARS = 160


def soul_boost(type_: str | None, title: str | None, lesson=None) -> float:
    """OKS injection boost: type multiplier × 1.2 with a review lesson × 0.5 for a generic title (3 places)."""
    b = TYPE_MULT.get((type_ or "").lower(), 0.5)
    if lesson:
        b *= LESSON_MULT
    if (title or "").strip().lower() in GENERIC_TITLES:
        b *= 0.5
    return round(b, 3)


def _col(rows: pl.DataFrame, name: str) -> list:
    return rows[name].to_list() if name in rows.columns else [None] * rows.height


def _shown_title(title: str | None, slug: str, native: bool = False) -> str:
    """The title OKS's hook shows: fts5's title column (a CJK title as its jieba words), or for a
    native hit (``native``) the page's own title; the slug without one."""
    from pipeline.ops.tokenize import oks_words

    if native:
        return title or slug
    return " ".join(oks_words(title or "")) or slug


def line(r: dict, per_page: int = PER_PAGE_CHARS) -> str:
    """One injected page, as the hook prints it (``body_preview`` = the body's first
    ``per_page`` characters: the instance's ``inject.per_page_chars``)."""
    body = r.get("body") if r.get("body") is not None else r.get("text") or ""
    preview = re.sub(r"\s+", " ", body[:per_page]).strip()[:PREVIEW_CHARS]
    head = (
        f"- [{r.get('type') or 'concept'}] "
        f"{_shown_title(r.get('title'), r['slug'], r.get('channel') in (NATIVE, FUSION_NATIVE))} "
        f"({r['slug']}) rel={round(r['score'], 3):.2f}"
    )
    return head + (f"\n    {preview}" if preview else "")


def text(rows: list[dict], per_page: int = PER_PAGE_CHARS) -> str:
    """The hook's knowledge section for the pages ``rows``."""
    return "\n".join([HEADER, *(line(r, per_page) for r in rows)])


def order(
    rows: pl.DataFrame, queries: pl.DataFrame | None, p, log: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Each query's hit pages (module docstring), reordered, then the floor; with the team
    design's settings (``pipeline.inject.team``) the order key is × the collaborative
    boost (from ``log``) and the floored pages are put in MMR order."""
    top = p.get("max_nodes") or 3
    limit = max(3 * top, 10)
    page = [d or n for d, n in zip(_col(rows, "doc_id"), rows["node_id"].to_list())]
    rows = (
        rows.with_columns(
            page=pl.Series(page, dtype=pl.String),
            slug=pl.Series([PurePosixPath(x).stem for x in page], dtype=pl.String),
        )
        .sort("query_id", "rank")
        .filter(pl.int_range(pl.len()).over("query_id") < 4 * limit)
        .unique(["query_id", "page"], keep="first", maintain_order=True)
        .filter(pl.int_range(pl.len()).over("query_id") < limit)
    )
    keys = []
    if p.goal_reorder and queries is not None and "goals" in queries.columns:
        rows = rows.join(queries.select("query_id", "goals"), on="query_id", how="left")
        native = pl.col("channel") == NATIVE if "channel" in rows.columns else pl.lit(False)
        rows = rows.with_columns(  # OKS's native path returns before its goal reorder
            off_goal=~(pl.col("goals").list.contains(pl.col("slug")) & ~native).fill_null(False)
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
    base = "soul" if p.soul_boost else "score"
    if (p.beta_item or p.beta_user) and log is not None and queries is not None:
        from pipeline.inject.team import cf_boosts

        ib, ub = cf_boosts(log, rows, queries)
        rows = rows.with_columns(itemcf=pl.Series(ib), usercf=pl.Series(ub)).with_columns(
            team_boost=pl.col(base)
            * (1 + p.beta_item * pl.col("itemcf") + p.beta_user * pl.col("usercf"))
        )
        keys = [k for k in keys if k != "soul"] + ["team_boost"]
        base = "team_boost"
    desc = [k in ("soul", "team_boost") for k in keys]
    rows = rows.sort(["query_id", *keys, "rank"], descending=[False, *desc, False])
    floor = p.get("floor")
    rows = rows if floor is None else rows.filter(pl.col("score").round(3) >= floor)
    if p.mmr_lambda is not None:
        from pipeline.inject.team import mmr_rows

        rows = mmr_rows(rows, base, float(p.mmr_lambda))
    return rows


def skipped(text: str | None) -> bool:
    """The hook ignores a prompt shorter than 6 characters (stripped) or a trivial one."""
    t = (text or "").strip()
    return len(t) < MINLEN or t.lower() in TRIVIAL


def _turns(queries: pl.DataFrame | None, qids: list[str], by: str = "group") -> dict[str, tuple]:
    """query_id → (group, turn number in the group's ``now`` order); no group = a session of its
    own. ``by="agent"``: the read state is the query's ``agent_id`` (OKS team design: cooldown and
    seen-set per agent, across its sessions). A prompt the hook ignores has no turn."""
    if queries is None:
        return {q: (q, 0) for q in qids}
    queries = queries.filter(~pl.col("text").map_elements(skipped, return_dtype=pl.Boolean))
    col = "agent_id" if by == "agent" and "agent_id" in queries.columns else "group"
    if col not in queries.columns:
        return {q: (q, 0) for q in queries["query_id"].to_list()}
    q = queries.with_row_index("i").with_columns(g=pl.col(col).fill_null(pl.col("query_id")))
    q = q.sort(["g", *(["now"] if "now" in q.columns else []), "i"], nulls_last=True)
    q = q.with_columns(turn=pl.col("i").cum_count().over("g"))
    return {qid: (g, t) for qid, g, t in q.select("query_id", "g", "turn").iter_rows()}


def _state(queries: pl.DataFrame | None, turns: dict) -> tuple[dict, dict]:
    """(group → turns already taken, (group, slug) → last turn shown) from ``hook_n``/``hook_seen``."""
    base: dict = {}
    last: dict = {}
    if queries is None or "hook_n" not in queries.columns:
        return base, last
    seen = _col(queries, "hook_seen")
    for qid, n, s in zip(queries["query_id"].to_list(), queries["hook_n"].to_list(), seen):
        g = turns.get(qid, (qid,))[0]
        if n is not None and g not in base:
            base[g] = int(n)
            last.update({(g, ("slug", e["slug"])): int(e["turn"]) for e in s or []})
    return base, last


def _last(last: dict, g, r: dict) -> int:
    """The turn the page of row ``r`` was last shown in group ``g`` (a recall-state names it by
    slug)."""
    return max(last.get((g, r["page"]), -(10**9)), last.get((g, ("slug", r["slug"])), -(10**9)))


def pick(rows: pl.DataFrame, queries: pl.DataFrame | None, p) -> dict[str, list[dict]]:
    """The hook's top-n per query after the cooldown, queries processed turn by turn (turn =
    the group's ``hook_n`` + 1 + its position)."""
    top, cool = p.get("max_nodes"), p.get("cooldown") or 0
    by_q = {
        qid: list(g.iter_rows(named=True))
        for (qid,), g in rows.group_by("query_id", maintain_order=True)
    }
    turns = _turns(queries, list(by_q), p.get("cooldown_by") or "group")
    base, last = _state(queries, turns)
    by_q = {q: r for q, r in by_q.items() if q in turns}
    out = {}
    for qid in sorted(by_q, key=lambda q: turns[q]):
        g, t = turns[qid]
        t += base.get(g, 0) + 1
        chosen = [r for r in by_q[qid] if not (cool and t - _last(last, g, r) < cool)]
        chosen = chosen[:top] if top else chosen
        for r in chosen:
            last[(g, r["page"])] = t
        out[qid] = chosen
    return {q: out[q] for q in by_q}
