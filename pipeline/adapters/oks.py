"""OKS adapter (``data=oks``): an Open Knowledge Studio instance, as OKS v0.6.5 keeps it on disk.

``data.path`` is the instance root (the folder holding ``wiki/`` and ``.oks/``). Read from
open-agent-power/open-knowledge-studio @ 6a281b47 (``store.py``, ``search/fts5.py``,
``assets/_meta/frontmatter-schema.md``, ``assets/hooks/user-prompt-recall.py``):

- ``wiki/**/*.md`` except ``INDEX.md``: one node per OKS FTS5 row (``oks_pages``), ``node_id`` =
  ``<path under wiki/>#<node_idx>``, ``doc_id`` = the path under ``wiki/`` (OKS's slug is its
  stem). Every front-matter field of the schema goes onto each row: ``title``, ``type`` (else the
  legacy ``category``, else ``concept``: OKS's default), ``area``, ``status`` (missing = active),
  ``importance`` (0–1, ×10 at ingest), ``confidence``, ``created``, ``pinned``, ``archived``,
  ``tags``, ``source_type``, ``fingerprint``, ``review.{lesson, decision_correct, outcome}``,
  ``relates_to``, ``relationship``, ``superseded_by``, ``human_reviewed_at``, ``traces``
  (their count); ``code`` = the page's fenced code. Files OKS skips (no leading ``---``) are
  counted in ``skipped``; an unparseable ``created`` counts 0 days (OKS) and is counted too.
- ``.oks/access.json`` {slug: uses} → ``access_count`` (the memory curve's ``ln(1 + uses)``).
- ``profiles/goals/**/*.md`` (``type: goal``) → ``Dataset.tables["goals"]``; the queries'
  ``goals`` (the goal reorder) are their own ``goals`` field, else ``data.goals``: ``active``
  (OKS's default: every active goal's slug), ``none``, or comma-separated slugs.
- ``.oks/recall-state-<session>.json`` {n, seen} → ``tables["recall_state"]`` (session, n, slug,
  turn); a query whose ``group`` names a session continues that session's hook cooldown.
- ``records/inject.jsonl`` → ``tables["inject_log"]`` (session_id, turn, agent_id, cwd,
  prompt_hash, slugs, rels, injected_at): OKS's injection history, kept for a later collab
  backend; no stage reads it yet.

- ``settings/recall.yaml`` (``pipeline.adapters.oks_settings``) → ``Dataset.settings``: the
  ``search_backend`` (OKS's code default ``native``) and ``inject.per_page_chars``.
- Two pages with one file stem (OKS's slug): only the one OKS's index keeps is read
  (``oks_settings.one_per_slug``); the other is counted in ``skipped["duplicate_slug"]``.

Nothing under ``data.path`` is ever written (``recall feedback --format oks`` is the only writer).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.adapters import fields, oks_pages, oks_settings, query_files
from pipeline.adapters.common import finish, inside, no_queries, read_json, read_jsonl, read_text
from pipeline.adapters.workspace import _bool, _list, _number, list_notes, load_queries, qrels_table
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError
from pipeline.contract.schema import conform, importance_to_10, parse_timestamp

STATE = re.compile(r"^recall-state-([A-Za-z0-9_-]{1,80})\.json$")  # the names _state_path writes
log = logging.getLogger(__name__)
FIX_STATE = "fix or delete it (OKS's hook writes {n: <turns>, seen: {<slug>: <turn>}})"
FIX_LOG = "fix or delete that line (OKS's hook appends one injection a line)"


def _root(path: str) -> Path:
    root = Path(path)
    if not (root / "wiki").is_dir():
        raise DataError(
            str(root / "wiki"),
            "no wiki/ folder: not an OKS instance root",
            "point data.path at the folder that holds wiki/ and .oks/",
        )
    return root


def access_counts(root: Path) -> dict[str, int]:
    """``.oks/access.json`` as {slug: uses}; {} without the file. Not a mapping of slugs to
    non-negative integers is a DataError (OKS would silently count nothing)."""
    path = inside(root, root / ".oks" / "access.json")
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(
            str(path),
            f"is a JSON {type(data).__name__}, not a mapping",
            'write {"<slug>": <uses>, ...} (what `oks wiki use` writes)',
        )
    for slug, n in data.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2**63:
            raise DataError(
                str(path),
                f"uses of {slug!r} is {n!r}, not a non-negative 64-bit integer",
                "write a whole number of uses",
                field=slug,
            )
    return dict(data)


def _created(meta: dict, where: str, skipped: Counter):
    try:
        return parse_timestamp(meta.get("created"), where, None, "created")
    except DataError:
        skipped["created_unparseable_counts_0_days"] += 1  # OKS: unparseable = today
        return None


def _page_fields(meta: dict, where: str, skipped: Counter) -> dict:
    review = meta.get("review") or {}
    if not isinstance(review, dict):
        raise DataError(where, "'review' is not a mapping", "write review: {lesson: ...}")

    def s(v):
        return None if v is None else str(v)

    return {
        "type": s(meta["type"] if "type" in meta else meta.get("category", "concept")),
        "area": s(meta.get("area")),
        "status": s(meta.get("status", "active")),
        "importance": _number(meta.get("importance"), where, "importance"),
        "confidence": _number(meta.get("confidence"), where, "confidence"),
        "created_at": _created(meta, where, skipped),
        "pinned": _bool(meta.get("pinned"), where, "pinned"),
        "archived": _bool(meta.get("archived"), where, "archived"),
        "tags": _list(meta.get("tags"), where, "tags"),
        "source_type": s(meta.get("source_type")),
        "fingerprint": s(meta.get("fingerprint")),
        "lesson": s(review.get("lesson")) or None,
        "decision_correct": _bool(review.get("decision_correct"), where, "review.decision_correct"),
        "outcome": s(review.get("outcome")),
        "relates_to": s(meta.get("relates_to")),
        "relationship": s(meta.get("relationship")),
        "superseded_by": s(meta.get("superseded_by")),
        "human_reviewed_at": s(meta.get("human_reviewed_at")),
        "traces": len(t) if isinstance(t := meta.get("traces") or [], list) else 1,
    }


def page_rows(wiki: Path, path: Path, uses: dict[str, int], skipped: Counter) -> list[dict]:
    """The FTS5 rows of one page, each with every front-matter field; [] for a file OKS skips."""
    where = str(path)
    page = oks_pages.parse(read_text(path), where)
    if page is None:
        skipped["no_front_matter"] += 1
        return []
    rel = path.relative_to(wiki).as_posix()
    common = {
        "doc_id": rel,
        "slug": path.stem,
        "title": page.title,
        "code": page.code or None,
        "body": page.body,
        "access_count": uses.get(path.stem, 0),
        **_page_fields(page.meta, where, skipped),
    }
    return [
        {"node_id": f"{rel}#{i}", "text": t, "seq": i, **common} for i, t in enumerate(page.nodes)
    ]


def load_goals(root: Path) -> pl.DataFrame:
    """``profiles/goals/**/*.md`` with ``type: goal`` (``store.load_goals``): slug, title, status
    (lower-cased, missing = active), domains, keywords (lower-cased)."""
    rows = []
    gd = root / "profiles" / "goals"
    for f in list_notes(inside(root, gd)) if gd.is_dir() else []:
        split = oks_pages.split_page(read_text(f), str(f))
        if split is None or split[0].get("type") != "goal":
            continue
        meta = split[0]
        sets = {
            k: sorted({v.lower() for v in _list(meta.get(k), str(f), k) or [] if v.strip()})
            for k in ("domains", "keywords")
        }
        status = str(meta.get("status", "active")).lower().strip()
        rows.append({"slug": f.stem, "title": str(meta.get("title", f.stem)), "status": status})
        rows[-1].update(sets)
    schema = {
        "slug": pl.String,
        "title": pl.String,
        "status": pl.String,
        "domains": pl.List(pl.String),
        "keywords": pl.List(pl.String),
    }
    return pl.DataFrame(rows, schema=schema)


def goal_slugs(goals: pl.DataFrame, choice: str) -> list[str] | None:
    """The slugs the goal reorder puts first for ``data.goals`` (``recall --goal``): ``active``,
    ``none`` (None) or comma-separated slugs (each must exist; inactive ones allowed)."""
    c = str(choice).strip()
    if c.lower() == "none":
        return None
    if c.lower() == "active":
        return goals.filter(pl.col("status") == "active")["slug"].to_list()
    want = [s.strip() for s in c.split(",") if s.strip()]
    missing = [s for s in want if s.lower() not in set(goals["slug"].str.to_lowercase())]
    if missing:
        raise DataError(
            "data.goals",
            f"goals {missing} not found in profiles/goals/",
            "use active, none or slugs",
        )
    return want


def load_recall_state(root: Path, skipped: Counter) -> pl.DataFrame:
    """``.oks/recall-state-<session>.json`` files: one row per (session, seen slug). A file whose
    name no session maps to (the hook writes ``[A-Za-z0-9_-]{1,80}``, an empty id as ``default``:
    ``recall-state-.json``) is one OKS never reads: skipped with a warning, counted in
    ``skipped["recall_state_no_session"]``."""
    rows = []
    d = inside(root, root / ".oks")
    for f in sorted(d.glob("recall-state-*.json")) if d.is_dir() else []:
        named = STATE.match(f.name)
        if named is None:
            log.warning(
                "%s: no OKS session has this file name (the hook writes recall-state-<session>"
                ".json, session [A-Za-z0-9_-], 1-80 characters); skipped, as OKS never reads it",
                f,
            )
            skipped["recall_state_no_session"] += 1
            continue
        st = read_json(inside(root, f))
        fields.check(st, fields.OKS_RECALL_STATE, str(f), "document", FIX_STATE)
        n = int(st.get("n") or 0)
        session = named.group(1)
        seen = st.get("seen", {}) or {}
        rows += [(session, n, str(s), int(t)) for s, t in seen.items()] or [
            (session, n, None, None)
        ]
    return pl.DataFrame(
        rows,
        schema={"session": pl.String, "n": pl.Int64, "slug": pl.String, "turn": pl.Int64},
        orient="row",
    )


def load_inject_log(root: Path) -> pl.DataFrame:
    """``records/inject.jsonl``: what OKS's hook injected, one row per injection."""
    path = inside(root, root / "records" / "inject.jsonl")
    cols = tuple(fields.OKS_INJECT)
    rows = [
        {c: r.get(c) for c in cols}
        for r in (read_jsonl(path, fields.OKS_INJECT, FIX_LOG) if path.is_file() else [])
    ]
    schema = {c: pl.String for c in cols} | {
        "turn": pl.Int64,
        "slugs": pl.List(pl.String),
        "rels": pl.List(pl.Float64),
    }
    return pl.DataFrame(rows, schema=schema)


def _queries(path: str | None, slugs: list[str] | None, fmt: str = "auto") -> pl.DataFrame:
    """The queries file (``query_files`` formats, plus an optional ``goals`` list per line)."""
    if not path:
        return no_queries()
    q = load_queries(path, fmt)
    if query_files.resolve_format(path, fmt) == "parquet":
        return q
    own = [r.get("goals") for r in query_files.query_rows(path, fmt)]
    goals = [g if g is not None else slugs for g in own]
    if any(g is not None for g in goals):
        q = q.with_columns(goals=pl.Series(goals, dtype=pl.List(pl.String)))
    return conform(q, "queries", str(path))


def session_file_name(session: str) -> str:
    """The hook's file-name form of a session id (``_state_path``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", session)[:80] or "default"


def with_hook_state(queries: pl.DataFrame, state: pl.DataFrame) -> pl.DataFrame:
    """Queries whose ``group`` names a session with a recall-state file get ``hook_n`` (turns
    taken) and ``hook_seen`` ([{slug, turn}]): ``inject.format=oks`` continues that cooldown."""
    if "group" not in queries.columns or state.height == 0:
        return queries
    seen = state.group_by("session", maintain_order=True).agg(
        hook_n=pl.col("n").first(),
        hook_seen=pl.struct("slug", "turn").filter(pl.col("slug").is_not_null()),
    )
    key = queries["group"].map_elements(session_file_name, return_dtype=pl.String)
    return (
        queries.with_columns(_session=key)
        .join(seen, left_on="_session", right_on="session", how="left", maintain_order="left")
        .drop("_session")
    )


def _reference_time(rows: list[dict]):
    """The newest ``created`` of the pages (OKS's memory curve reads the wall clock; a run reads
    its inputs only), else the epoch."""
    import datetime as dt

    times = [r["created_at"] for r in rows if r.get("created_at") is not None]
    return max(times) if times else dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def load(
    path: str,
    *,
    name: str = "oks",
    queries: str | None = None,
    qrels: str | None = None,
    limit_queries: int | None = None,
    goals: str = "active",
    queries_format: str = "auto",
) -> Dataset:
    """A Dataset from an OKS instance root (module docstring: what is read from where)."""
    root = _root(path)
    wiki, skipped = inside(root, root / "wiki"), Counter()
    uses = access_counts(root)
    every = list_notes(wiki)
    files = [f for f in every if f.name != "INDEX.md"]
    skipped["index_md"] = len(every) - len(files)
    rows = [r for f in files for r in page_rows(wiki, f, uses, skipped)]
    if not rows:
        raise DataError(str(wiki), "no wiki pages with front matter", "add wiki/<slug>.md pages")
    rows = oks_settings.one_per_slug(rows, _reference_time(rows), skipped)
    settings, source = oks_settings.recall_params(root)
    nodes = conform(pl.DataFrame(rows, infer_schema_length=None), "nodes", str(wiki))
    nodes, note = importance_to_10(nodes, "1", str(wiki))  # the schema: importance in [0, 1]
    goal_table, state = load_goals(root), load_recall_state(root, skipped)
    goal_files = (
        list_notes(root / "profiles" / "goals") if (root / "profiles" / "goals").is_dir() else []
    )
    extras = (queries, qrels, root / ".oks" / "access.json", root / "settings" / "recall.yaml")
    return finish(
        name,
        nodes,
        with_hook_state(_queries(queries, goal_slugs(goal_table, goals), queries_format), state),
        [*files, *(f for f in (*extras, *goal_files) if f and Path(f).is_file())],
        limit_queries,
        qrels=qrels_table(queries, qrels, queries_format, nodes),
        skipped=+skipped,
        notes={
            **({"importance": note} if note else {}),
            "oks_settings": f"search_backend={settings['search_backend']} ({source})",
        },
        settings=settings,
        tables={
            "goals": goal_table,
            "recall_state": state,
            "inject_log": load_inject_log(root),
        },
    )
