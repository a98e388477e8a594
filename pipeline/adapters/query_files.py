"""Query and qrels files in the formats users already have (README "Queries and judgements" has examples).

Queries (``data.queries``; ``data.queries_format=auto`` detects the format from the content):

- ``jsonl``: one JSON object per line, ``query_id`` and ``text`` plus the optional contract
  fields (``context``, ``viewer``, ``doc_scope``, ``group``, ``now``, ``embedding``, ...);
- ``text``: one query per non-blank line, ids ``q1``..``qN`` in file order; when every line is
  ``<id><TAB><text>`` the ids are the file's;
- ``recall-case``: OKS's evaluation file (``schema_version: recall-case/v1``, e.g. OKS's
  ``records/experiments/eval-50.yaml``): ``case_id`` → query_id, ``query`` → text, ``goal`` →
  ``goals`` (``none``: no goal reorder, as OKS's eval; ``active``: the active goals; else slugs);
  its ``relevant`` lists are the qrels when ``data.qrels`` is not set;
- ``sillytavern``: a SillyTavern chat (``.jsonl``: a metadata line, then messages with
  ``is_user``, ``mes``, ``name``, ``send_date``): each user message is a query (``query_id``
  ``m<message index>``, ``now`` its ``send_date``, ``context`` the three messages before it as
  ``[user]: …`` / ``[assistant]: …``, ``char_name`` / ``user_name`` from the metadata line);
- ``parquet``: a queries table in the data contract (read by the workspace adapter).

Qrels (``data.qrels``, and ``recall import-trec --qrels``): a TSV with a header (``query_id``,
``node_id`` or ``doc_id``, ``relevance``), a TREC qrels file (``q_id 0 doc_id relevance``, no
header) or a ``recall-case/v1`` file (each relevant slug relevance 1, mapped to the documents
whose slug, or file stem, it is).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import yaml

from pipeline.adapters import fields
from pipeline.adapters.common import read_jsonl, read_text, require_file
from pipeline.contract.errors import DataError, require_one_of

QUERY_FORMATS = ("auto", "jsonl", "text", "recall-case", "sillytavern", "parquet")
RECALL_CASE = "recall-case/v1"
ST_CONTEXT = 3  # BME's recallLlmContextMessages = 4 lines with the current message
_ST_DATES = ("%B %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p", "%Y-%m-%d @%Hh %Mm %Ss %fms")


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _is_chat(first: dict) -> bool:
    """A SillyTavern chat's first line (metadata) or message line."""
    return (
        "chat_metadata" in first
        or {"user_name", "character_name"} <= set(first)
        or ("mes" in first and "is_user" in first)
    )


def is_recall_case(path: str | Path) -> bool:
    """Whether a file is YAML (``.yaml``/``.yml``, or a first line ``schema_version:``): an OKS
    recall-case file (its reader checks the schema)."""
    p = Path(path)
    if p.suffix in (".yaml", ".yml"):
        return True
    return p.suffix != ".parquet" and _first_line(read_text(p)).startswith("schema_version:")


def detect(path: str | Path) -> str:
    """The format of a queries file: by suffix (.parquet, .yaml/.yml), else by its first line."""
    p = require_file(path, "queries file", "data.queries")
    if p.suffix == ".parquet":
        return "parquet"
    if is_recall_case(p):
        return "recall-case"
    first = _first_line(read_text(p))
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return "text" if not first.startswith("{") else "jsonl"  # jsonl: its reader names the line
    if not isinstance(obj, dict):
        return "text"
    return "sillytavern" if _is_chat(obj) else "jsonl"


def resolve_format(path: str | Path, fmt: str | None) -> str:
    """``fmt`` checked against QUERY_FORMATS, ``auto`` (or None) replaced by the detected one."""
    fmt = fmt or "auto"
    require_one_of("data.queries_format", fmt, QUERY_FORMATS)
    return detect(path) if fmt == "auto" else fmt


def query_rows(path: str | Path, fmt: str | None = "auto") -> list[dict]:
    """The queries file as raw row dicts (query_id, text, optional fields); not for ``parquet``."""
    fmt = resolve_format(path, fmt)
    if fmt == "jsonl":
        return read_jsonl(require_file(path, "queries file", "data.queries"))
    if fmt == "text":
        return text_rows(path)
    if fmt == "recall-case":
        return [case_query(c) for c in read_recall_case(path)["cases"]]
    if fmt == "sillytavern":
        return chat_rows(path)
    raise DataError(
        str(path), f"a {fmt} file has no row form", "pass a JSON Lines, text, YAML or chat file"
    )


def text_rows(path: str | Path) -> list[dict]:
    """One query per non-blank line: ``q1``..``qN``, or the ids of ``<id>\\t<text>`` lines."""
    lines = [ln.strip() for ln in read_text(path).splitlines() if ln.strip()]
    if not lines:
        raise DataError(str(path), "the queries file has no lines", "write one query per line")
    if all("\t" in ln for ln in lines):
        pairs = [ln.split("\t", 1) for ln in lines]
        return [{"query_id": q.strip(), "text": t.strip()} for q, t in pairs]
    return [{"query_id": f"q{i}", "text": ln} for i, ln in enumerate(lines, 1)]


def _case_lines(text: str) -> list[int]:
    """The 1-based line where each item of ``cases`` starts (for error messages)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "cases" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _case_error(where: str, line, problem: str, fix: str, field: str) -> DataError:
    return DataError(where, problem, fix, row=f"line {line}" if line else None, field=field)


def _check_case(case, where: str, line, seen: set) -> None:
    """Returns None; a case that OKS's ``load_dataset`` would refuse is a DataError."""
    if not isinstance(case, dict):
        raise _case_error(
            where, line, "a case must be a mapping", "write case_id/query/relevant", "cases"
        )
    for field in ("case_id", "query"):
        if not isinstance(case.get(field), str) or not case[field].strip():
            raise _case_error(
                where, line, f"'{field}' missing or not a string", f"give the case a {field}", field
            )
    rel = case.get("relevant")
    if not isinstance(rel, list) or not rel or not all(isinstance(s, str) and s for s in rel):
        raise _case_error(
            where,
            line,
            "'relevant' must be a non-empty list of slugs",
            "list the relevant page slugs",
            "relevant",
        )
    forb = case.get("forbidden", [])
    if not isinstance(forb, list) or not all(isinstance(s, str) for s in forb):
        raise _case_error(
            where, line, "'forbidden' must be a list of slugs", "list slugs or drop it", "forbidden"
        )
    if case["case_id"] in seen:
        raise _case_error(
            where,
            line,
            f"case_id {case['case_id']!r} appears twice",
            "make case ids unique",
            "case_id",
        )
    seen.add(case["case_id"])  # fmt: skip


def read_recall_case(path: str | Path) -> dict:
    """An OKS ``recall-case/v1`` file, checked as OKS's ``evaluation.load_dataset`` checks it."""
    where = str(require_file(path, "recall-case file", "data.queries"))
    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        row = f"line {mark.line + 1}" if mark else None
        raise DataError(where, "invalid YAML", "fix the YAML syntax", row=row) from None
    if not isinstance(data, dict) or data.get("schema_version") != RECALL_CASE:
        got = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise DataError(
            where,
            f"schema_version {got!r} is not {RECALL_CASE!r}",
            f"pass an OKS {RECALL_CASE} file (or set data.queries_format)",
            field="schema_version",
        )
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise DataError(where, "'cases' must be a non-empty list", "add cases", field="cases")
    lines, seen = _case_lines(text), set()
    for i, case in enumerate(cases):
        _check_case(case, where, lines[i] if i < len(lines) else None, seen)
    return data


def case_query(case: dict) -> dict:
    """A recall case as a query row: OKS's eval recalls with ``goal`` (default ``none``)."""
    goal = str(case.get("goal") or "none").strip()
    goals = (
        []
        if goal == "none"
        else None
        if goal == "active"
        else [s.strip() for s in goal.split(",") if s.strip()]
    )
    return {"query_id": case["case_id"], "text": case["query"], "goals": goals}


def _send_date(value, where: str, line: int) -> str | None:
    """A SillyTavern ``send_date`` (ms epoch, ISO, ``December 4, 2025 4:05am``, or the old
    ``2023-5-1 @12h 30m 20s 123ms``) as an ISO string (UTC assumed); None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        t = fields.epoch_utc(value / 1000) if fields.finite_number(value) else None
        if t is None:
            raise DataError(
                where,
                f"send_date {value!r} is not a ms epoch of years 1–9999",
                "write the time in milliseconds since 1970, or as an ISO datetime",
                row=f"line {line}",
                field="send_date",
            )
        return t.isoformat()
    text = str(value).strip()
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError:
        pass
    for form in _ST_DATES:
        try:
            return dt.datetime.strptime(text, form).isoformat()
        except ValueError:
            continue
    raise DataError(
        where,
        f"send_date {text!r} is not a date SillyTavern writes",
        "write it as an ISO datetime, a ms epoch or 'December 4, 2025 4:05am'",
        row=f"line {line}",
        field="send_date",
    )


def _chat_message(obj: dict, where: str, line: int) -> tuple[bool, str]:
    """(is_user, text) of one chat line; wrong types are a DataError naming the field."""
    if not isinstance(obj.get("is_user", False), bool):
        raise DataError(
            where,
            "'is_user' must be true or false",
            "fix the message",
            row=f"line {line}",
            field="is_user",
        )
    if not isinstance(obj.get("mes", ""), str):
        raise DataError(
            where, "'mes' must be a string", "fix the message", row=f"line {line}", field="mes"
        )
    return bool(obj.get("is_user")), obj.get("mes") or ""  # fmt: skip


def chat_rows(path: str | Path) -> list[dict]:
    """The user messages of a SillyTavern chat as queries (module docstring)."""
    where = str(path)
    lines = read_jsonl(require_file(path, "chat file", "data.queries"))
    meta = lines[0] if lines and "mes" not in lines[0] else {}
    messages = lines[1:] if meta else lines
    offset = 2 if meta else 1  # file line of messages[0]
    rows, history = [], []
    for i, obj in enumerate(messages):
        is_user, text = _chat_message(obj, where, i + offset)
        if obj.get("is_system"):  # hidden from the prompt in SillyTavern
            continue
        if is_user and text.strip():
            rows.append(
                {
                    "query_id": f"m{i}",
                    "text": text,
                    "context": history[-ST_CONTEXT:] or None,
                    "now": _send_date(obj.get("send_date"), where, i + offset),
                    "char_name": meta.get("character_name"),
                    "user_name": meta.get("user_name") or obj.get("name"),
                }
            )
        history.append(f"[{'user' if is_user else 'assistant'}]: {text}")
    if not rows:
        raise DataError(where, "the chat has no user message", "pass a chat with user messages")
    return rows


def contract_rows(path: str | Path, fmt: str) -> list[dict]:
    """:func:`query_rows`, a chat's ``context`` lines as the contract's (:func:`contract_context`)."""
    rows = query_rows(path, fmt)
    if fmt != "sillytavern":
        return rows
    return [r | {"context": contract_context(r["context"], r["text"])} for r in rows]


def contract_context(lines: list[str] | None, text: str) -> list[str] | None:
    """A chat query's ``[user]: …`` / ``[assistant]: …`` lines as the contract's ``context``:
    [previous user text, last assistant text] (empty string when absent), None when both are."""
    parsed = [ln.partition("]: ") for ln in lines or []]
    said = [(role.strip("[ "), body) for role, _, body in parsed if body.strip()]
    assistant = next((b for r, b in reversed(said) if r == "assistant"), "")
    user = next((b for r, b in reversed(said) if r == "user" and b != text), "")
    return [user, assistant] if user or assistant else None


def qrels_path(queries: str | None, qrels: str | None, fmt: str | None) -> str | None:
    """The qrels file: ``data.qrels``, else the queries file when it is a recall-case file."""
    if qrels or not queries:
        return qrels
    return queries if resolve_format(queries, fmt) == "recall-case" else None


def _stem_map(nodes: pl.DataFrame | None) -> dict[str, list[str]]:
    """{slug or file stem: [doc_id, ...]} of the corpus (OKS's slug is the page's stem)."""
    if nodes is None or "doc_id" not in nodes.columns:
        return {}
    docs = nodes.select("doc_id", *(["slug"] if "slug" in nodes.columns else [])).unique(
        maintain_order=True
    )
    out: dict[str, list[str]] = {}
    for row in docs.iter_rows(named=True):
        stem = row.get("slug") or Path(str(row["doc_id"]).split("#")[0]).stem
        out.setdefault(stem, []).append(row["doc_id"])
    return out


def case_qrels(path: str | Path, nodes: pl.DataFrame | None = None) -> pl.DataFrame:
    """(query_id, doc_id, relevance=1) of a recall-case file; a slug the corpus has names its
    documents, one it lacks stays as written (judged, not in the corpus)."""
    stems = _stem_map(nodes)
    rows = [
        (c["case_id"], doc, 1)
        for c in read_recall_case(path)["cases"]
        for slug in dict.fromkeys(c["relevant"])
        for doc in stems.get(slug, [slug])
    ]
    return pl.DataFrame(
        rows,
        schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32},
        orient="row",
    )
