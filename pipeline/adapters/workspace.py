"""Workspace adapter: a folder of markdown notes (ReMe/OKS style) → nodes, wikilink edges.

One node per heading section (``node_id = "<relative path>#<heading slug>"``, ``doc_id`` = the
relative path), with front matter (name, description, tags, type, importance, created, status,
archived, pinned, visibility) copied onto every section. Symlinks are refused; wikilinks that leave
the root or point nowhere are skipped and counted.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.adapters import query_files
from pipeline.adapters.common import (
    EDGE_COLUMNS,
    finish,
    no_queries,
    read_parquet,
    read_text,
    refuse_symlink,
    require_file,
    without_empty_columns,
)
from pipeline.adapters.markdown import parse_sections, slugify, split_front_matter
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError
from pipeline.contract.schema import conform, dtypes, frame, importance_to_10, parse_timestamp

# the contract columns a queries file may give (query_files.contract_rows)
QUERY_COLUMNS = (
    "query_id",
    "text",
    "context",
    "viewer",
    "doc_scope",
    "group",
    "query_rewrite",
    "embedding",
    "now",
)


def _list(value, where: str, field: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise DataError(
        where,
        f"'{field}' is a {type(value).__name__}",
        "write a list or a comma-separated string",
        field=field,
    )


def _number(value, where: str, field: str) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DataError(
            where, f"'{field}' value {value!r} is not a number", f"write {field}: 5", field=field
        ) from None
    if x != x or x in (float("inf"), float("-inf")):
        raise DataError(where, f"'{field}' is not finite", f"write a finite {field}", field=field)
    return x


def _bool(value, where: str, field: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "yes", "1"):
        return True
    if str(value).lower() in ("false", "no", "0"):
        return False
    raise DataError(
        where, f"'{field}' value {value!r} is not true/false", f"write {field}: true", field=field
    )


def _unreadable(exc: OSError) -> None:
    raise DataError(
        str(exc.filename), f"folder cannot be read ({exc.strerror})", "make it readable"
    )


def list_notes(root: Path) -> list[Path]:
    """Every ``*.md`` under ``root`` in sorted order; a symlink anywhere (``root`` included), a
    folder that cannot be read, a ``*.md`` that is not a regular file (a FIFO would block the
    read) or whose path is not valid UTF-8 is a DataError (``common.refuse_symlink``)."""
    refuse_symlink(root)
    found = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_unreadable, followlinks=False):
        for name in sorted(dirnames + filenames):
            refuse_symlink(Path(dirpath) / name)
        found += [Path(dirpath) / f for f in filenames if f.endswith(".md")]
    for f in found:
        if not stat.S_ISREG(os.lstat(f).st_mode):
            raise DataError(str(f), "not a regular file", "replace it with a markdown file")
        shown = os.fsencode(f).decode("utf-8", "backslashreplace")
        if shown != str(f):  # its doc_id could not be written (Parquet, JSON): one line instead
            raise DataError(shown, "the file name is not valid UTF-8", "rename it in UTF-8")
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def note_rows(root: Path, path: Path, skipped: Counter) -> tuple[list[dict], list[tuple]]:
    """One row per heading section of the note at ``path`` (front matter on every row) and its raw
    wikilinks as (source node_id, source doc_id, target, anchor)."""
    rel = path.relative_to(root).as_posix()
    where = str(path)
    meta, body, used = split_front_matter(read_text(path), where)
    title = str(meta.get("name") or meta.get("title") or path.stem)
    common = {
        "doc_id": rel,
        "title": title,
        "description": None if meta.get("description") is None else str(meta["description"]),
        "tags": _list(meta.get("tags"), where, "tags"),
        "type": None if meta.get("type") is None else str(meta["type"]),
        "importance": _number(meta.get("importance"), where, "importance"),
        "created_at": parse_timestamp(meta.get("created"), where, None, "created"),
        "status": None if meta.get("status") is None else str(meta["status"]),
        "archived": _bool(meta.get("archived"), where, "archived"),
        "pinned": _bool(meta.get("pinned"), where, "pinned"),
        "visibility": _list(meta.get("visibility"), where, "visibility"),
    }
    rows, links = [], []
    sections = parse_sections(body, used, title)
    if not sections:
        skipped["empty_note"] += 1
    for seq, s in enumerate(sections):
        if not s.text and not s.code:
            skipped["empty_section"] += 1
            continue
        node_id = f"{rel}#{s.slug}"
        rows.append(
            {
                "node_id": node_id,
                "text": s.text,
                "code": s.code or None,
                "seq": seq,
                "start_line": s.start_line,
                "end_line": s.end_line,
                **common,
            }
        )
        links += [(node_id, rel, target, anchor) for target, anchor in s.links]
    return rows, links


def _resolve_links(
    links,
    node_ids: set[str],
    first_node: dict[str, str],
    stems: dict[str, list[str]],
    skipped: Counter,
) -> list[dict]:
    edges = []
    for src, rel, target, anchor in links:
        if not target:  # [[#anchor]]: a link inside the same note
            doc = rel
        else:
            t = target if target.endswith(".md") else target + ".md"
            doc = posixpath.normpath(t)
            if doc.startswith("../") or doc.startswith("/") or doc == "..":
                skipped["wikilink_outside_root"] += 1
                continue
            if doc not in first_node:
                cands = stems.get(posixpath.basename(doc)[:-3], [])
                if len(cands) != 1:
                    skipped["wikilink_broken"] += 1
                    continue
                doc = cands[0]
        dst = f"{doc}#{slugify(anchor)}" if anchor else first_node[doc]
        if dst not in node_ids:
            dst = first_node[doc]
        if dst == src:
            skipped["wikilink_self"] += 1
            continue
        edges.append({"src": src, "dst": dst, "relation": "wikilink", "weight": 1.0})
    return edges


def load_queries(path: str | Path, fmt: str | None = "auto") -> pl.DataFrame:
    """Queries from a file in a ``query_files.QUERY_FORMATS`` format: query_id, text, and the
    optional contract columns, ``embedding`` (a stored query vector) included."""
    where = str(path)
    fmt = query_files.resolve_format(path, fmt)
    if fmt == "parquet":
        return read_parquet(require_file(path, "queries file", "data.queries"), "queries")
    out = []
    for i, r in enumerate(query_files.contract_rows(path, fmt)):
        row = {k: r.get(k) for k in QUERY_COLUMNS}
        row["query_id"] = None if row["query_id"] is None else str(row["query_id"])
        row["now"] = parse_timestamp(r.get("now"), where, i, "now")
        for key in ("context", "doc_scope"):
            if row[key] is not None and not isinstance(row[key], list):
                raise DataError(
                    where,
                    f"'{key}' must be a list of strings",
                    f'write "{key}": ["..."]',
                    row=i,
                    field=key,
                )
        out.append(row)
    df = pl.DataFrame(out, schema=dtypes("queries", QUERY_COLUMNS))
    return conform(without_empty_columns(df), "queries", where)


def load_qrels(path: str | Path, nodes: pl.DataFrame | None = None) -> pl.DataFrame:
    """Qrels from a TSV with a header (query_id, node_id or doc_id, relevance) or an OKS
    recall-case file (its slugs mapped to the documents of ``nodes``)."""
    where = str(require_file(path, "qrels file", "data.qrels"))
    if query_files.is_recall_case(path):
        return conform(query_files.case_qrels(path, nodes), "qrels", where)
    try:
        df = pl.read_csv(path, separator="\t", infer_schema=False)
    except Exception as exc:
        raise DataError(
            where, f"cannot read as TSV ({str(exc).splitlines()[0]})", "write tab-separated columns"
        ) from None
    return conform(df, "qrels", where)


def queries_table(path: str | None, fmt: str | None = "auto") -> pl.DataFrame:
    """:func:`load_queries` of ``path``, or an empty queries table without one."""
    if not path:
        return no_queries()
    return load_queries(path, fmt)


def qrels_table(
    queries: str | None, qrels: str | None, fmt: str | None, nodes: pl.DataFrame
) -> pl.DataFrame | None:
    """:func:`load_qrels` of ``data.qrels``, else of a recall-case queries file; None without."""
    path = query_files.qrels_path(queries, qrels, fmt)
    return load_qrels(path, nodes) if path else None


def _root(path: str) -> Path:
    """The workspace folder as a Path; a missing folder or a symlinked root is a DataError."""
    root = Path(path)
    if not root.is_dir():
        raise DataError(
            str(root), "workspace folder not found", "point data.path at a folder of .md notes"
        )
    if root.is_symlink():
        raise DataError(str(root), "workspace root is a symbolic link", "pass the real folder")
    return root


def _read_notes(root: Path, files: list[Path], skipped: Counter) -> tuple[list[dict], list[tuple]]:
    """The section rows and raw wikilinks of every note; no section with text is a DataError."""
    rows, links = [], []
    for f in files:
        r, l = note_rows(root, f, skipped)
        rows += r
        links += l
    if not rows:
        raise DataError(
            str(root), "no markdown notes with text found", "add .md files to the workspace"
        )
    return rows, links


def _edges(
    rows: list[dict], links: list[tuple], node_ids: set[str], skipped: Counter, where: str
) -> pl.DataFrame:
    """The conformed wikilink edges table (links resolved by path, then by unique file stem)."""
    first_node = {}
    for r in rows:
        first_node.setdefault(r["doc_id"], r["node_id"])
    stems: dict[str, list[str]] = {}
    for doc in first_node:
        stems.setdefault(posixpath.basename(doc)[:-3], []).append(doc)
    edge_rows = _resolve_links(links, node_ids, first_node, stems, skipped)
    return frame(edge_rows, "edges", EDGE_COLUMNS, where)


def load(
    path: str,
    *,
    name: str = "workspace",
    queries: str | None = None,
    qrels: str | None = None,
    limit_queries: int | None = None,
    importance_scale: str = "auto",
    queries_format: str = "auto",
) -> Dataset:
    """A Dataset from a folder of markdown notes: a node per heading section, wikilink edges,
    queries/qrels (``queries_format``: see ``query_files``)."""
    root = _root(path)
    skipped: Counter = Counter()
    files = list_notes(root)
    rows, links = _read_notes(root, files, skipped)
    nodes = conform(pl.DataFrame(rows, infer_schema_length=None), "nodes", str(root))
    nodes, note = importance_to_10(nodes, importance_scale, str(root))  # OKS front matter is 0–1
    edges = _edges(rows, links, set(nodes["node_id"]), skipped, str(root))
    return finish(
        name,
        nodes,
        queries_table(queries, queries_format),
        [*files, queries, qrels],
        limit_queries,
        edges=edges,
        qrels=qrels_table(queries, qrels, queries_format, nodes),
        skipped=skipped,
        notes={"importance": note} if note else {},
    )
