"""ReMe's ``search``, ``health_check`` and ``auto_memory`` HTTP actions over the recall cache, as
routes of the ``recall serve`` app (``add_routes(app, service)``): ``POST /reme/search``,
``POST /reme/health_check``, ``POST /reme/auto_memory``.

ReMe (agentscope-ai/ReMe) serves each job as ``POST /{job}`` with a JSON body whose fields are the
job's parameters (``reme/components/service/http_service.py``) and answers the envelope
``{"answer", "success", "metadata"}`` (``reme/schema/response.py``). ``search``
(``reme/config/default.yaml``; ``reme/steps/index/search.py``) takes ``query``, ``limit``
(default 5) and ``min_score`` and answers one block per chunk, ``========== path:start-end
[score=…] ==========`` and its text, with ``metadata.results`` (chunk dicts: ``id``, ``path``,
``start_line``, ``end_line``, ``scores``) and ``metadata.counts``. ReMe's Hermes plugin
(``integrations/hermes_agent``) posts ``{"query", "limit"}`` to ``{endpoint}/search`` before a
turn, needs ``success`` true and injects ``answer``; it checks ``{endpoint}/health_check`` for
``metadata.health.healthy`` true, and after each turn posts ``{"session_id", "messages"}`` to
``{endpoint}/auto_memory`` (any answer but ``success`` true is logged as a warning). So its
``endpoint`` here is ``http://HOST:PORT/reme``.

The answer is the ``reme`` block (``inject.format=reme``, ReMe's layout) of the rows kept, rendered
over those rows by ``service.render`` (``Service.recall``'s injection covers the whole entry):
the entry's rows with ``score >= min_score`` (ReMe filters before the limit; ``min_score`` ≤ 0
keeps all), then the first ``limit``. ``start_line``/``end_line`` are the chunk's lines in its
file, as the block's header shows them (the store's node table), else the ``#L<a>-L<b>`` of a
ReMe chunk id, else 0. ReMe's filters that the cache cannot honour (dates, ``search_filter``,
``vector_weight``, ``tool_context_id``) are refused with a 400, never ignored. ``scope`` (not a
ReMe field; ReMe's requests allow extra fields) picks the recall scope. ``auto_memory`` (ReMe
summarises a turn into its memory files) records nothing: the recall store is read-only here; it
answers ``success`` with ``metadata.recorded`` false, so the plugin neither warns nor retries.
"""

from __future__ import annotations

import json
import math
import re

import polars as pl
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pipeline.contract.errors import UserError
from pipeline.core.version import __version__

PREFIX = "/reme"
DEFAULT_LIMIT = 5  # reme/steps/index/search.py _DEFAULT_LIMIT
MAX_BODY = 1 << 20  # bytes; a query is a turn, not a document
UNSUPPORTED = ("start_date", "end_date", "search_filter", "vector_weight", "tool_context_id",
               "strict_date_filter")  # fmt: skip
NOT_RECORDED = "not recorded: recall-pipeline serves a read-only recall cache"
LINES = re.compile(r"#L(\d+)-L(\d+)$")
ROW_KEYS = ("node_id", "doc_id", "rank", "score", "text", "start_line", "end_line")


class BadRequest(ValueError):
    """A request ReMe's ``search`` would not answer as asked; its message is the 400's answer
    (the service's own refusals keep their status: an unknown scope is a 404)."""


def envelope(answer: str, success: bool = True, status: int = 200, **metadata) -> JSONResponse:
    """ReMe's ``Response``: ``answer``, ``success``, ``metadata``."""
    body = {"answer": answer, "success": success, "metadata": metadata}
    return JSONResponse(body, status_code=status)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}…"
        raise BadRequest(f"Error: {name} must be a positive integer, got {shown}")
    return value


def _score_floor(value) -> float:
    """ReMe's ``float(min_score or 0.0)``, for numbers only: a floor ≤ 0 keeps every chunk."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequest(f"Error: min_score must be a finite number, got {value!r}")
    return float(value)


def parse_search(raw: bytes) -> tuple[str, int, str | None, float]:
    """(query, limit, scope, min_score) of a ``search`` body, or BadRequest naming the field and
    the fix. ``limit``: absent or null → 5, else a positive integer (0, false, "", [] are
    refused, not defaulted)."""
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a > 4300-digit integer, depth
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise BadRequest(f'Error: the body is not JSON ({reason}); send {{"query": ...}}') from None
    if not isinstance(body, dict):
        raise BadRequest('Error: the body is not a JSON object; send {"query": ..., "limit": 5}')
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("Error: query cannot be empty")
    limit = body.get("limit")
    limit = DEFAULT_LIMIT if limit is None else _positive_int("limit", limit)
    used = [k for k in UNSUPPORTED if body.get(k)]
    if used:
        raise BadRequest(
            f"Error: {used} not supported by the recall cache (its scores and filters are the "
            "recipe's, not ReMe's); leave them out"
        )
    scope = body.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise BadRequest(f"Error: scope must be a string, got {scope!r}")
    return query, limit, scope, _score_floor(body.get("min_score"))


def chunk(row: dict, lines: tuple[int, int] | None = None) -> dict:
    """A row as ReMe's ``FileChunk`` dump: ``id``, ``path``, lines, ``text``, ``scores``. The lines
    are the row's ``start_line``/``end_line``, else ``lines`` (the node's, from the store: what
    the ``reme`` block's header shows), else the ``#L<a>-L<b>`` of a ReMe chunk id, else 0."""
    found = LINES.search(str(row["node_id"]))
    if row.get("start_line") is not None and row.get("end_line") is not None:
        lines = (row["start_line"], row["end_line"])
    elif lines is None and found:
        lines = (found[1], found[2])
    scores = {"score": float(row["score"])}
    for key, v in row.items():
        if key not in ROW_KEYS and isinstance(v, int | float) and not isinstance(v, bool):
            scores[key] = float(v)
    return {
        "id": row["node_id"],
        "path": row.get("doc_id") or str(row["node_id"]).split("#", 1)[0],
        "start_line": int(lines[0]) if lines else 0,
        "end_line": int(lines[1]) if lines else 0,
        "text": row.get("text") or "",
        "scores": scores,
    }


def node_lines(service, node_ids: list[str]) -> dict[str, tuple[int, int]]:
    """{node_id: (start_line, end_line)} of the store's nodes (``Service.current().nodes``, the
    table the ``reme`` block's header reads); {} for a store without lines."""
    current = getattr(service, "current", None)
    state = current() if current is not None else None
    if state is None:
        return {}
    memo = getattr(state, "memo", None)  # the load's memo (Service.current): built once a load
    lines = None if memo is None else memo.get("reme_lines")
    if lines is None:
        nodes = state.nodes
        lines = {}
        if {"start_line", "end_line"} <= set(nodes.columns):
            got = nodes.filter(pl.col("start_line").is_not_null())
            rows = got.select("node_id", "start_line", "end_line").iter_rows()
            lines = {n: (a, b) for n, a, b in rows}
        if memo is not None:
            memo["reme_lines"] = lines
    return {n: lines[n] for n in node_ids if n in lines}


def answer_of(
    service, query: str, limit: int, scope: str | None, min_score: float = 0.0
) -> tuple[dict, list[dict], str]:
    """(``service.recall``'s answer, its rows with ``score >= min_score`` cut to ``limit``, the
    ``reme`` block of those rows): ``recall``'s injection is the whole entry's, so the block is
    rendered over the kept rows."""
    entry = service.recall(query, scope=scope, k=None if min_score > 0 else limit, format="rows")
    rows = entry["rows"]
    if min_score > 0:  # ReMe: fused = [c for c in fused if c.score >= min_score], then [:limit]
        rows = [r for r in rows if r["score"] >= min_score][:limit]
    answer = (service.render(query, rows, "reme") or "").strip() if rows else ""
    lines = node_lines(service, [r["node_id"] for r in rows]) if rows else {}
    return entry, [chunk(r, lines.get(r["node_id"])) for r in rows], answer


def add_routes(app, service) -> None:
    """Add ``POST /reme/search``, ``/reme/health_check`` and ``/reme/auto_memory`` to the serve
    app (nothing when they are there already: ``build_app`` adds them)."""
    if any(getattr(r, "path", None) == f"{PREFIX}/search" for r in app.routes):
        return

    async def search(request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            if len(raw) > MAX_BODY:
                return envelope(f"Error: the body is over {MAX_BODY} bytes", False, 413)
            query, limit, scope, floor = parse_search(raw)
            entry, results, answer = await run_in_threadpool(
                answer_of, service, query, limit, scope, floor
            )
        except (BadRequest, UserError) as exc:
            return envelope(str(exc).splitlines()[0], False, getattr(exc, "status", 400))
        counts = {"returned": len(results), "cache": entry.get("cache")}
        version = entry.get("scope_version")
        return envelope(answer, results=results, counts=counts, scope_version=version)

    async def auto_memory(request: Request) -> JSONResponse:
        return envelope(NOT_RECORDED, recorded=False)

    async def health_check(request: Request) -> JSONResponse:
        try:
            components, healthy = service.health(), True
        except Exception as exc:  # reported in the snapshot, as ReMe's health step does
            components, healthy = {"error": str(exc).splitlines()[0]}, False
        label = "healthy" if healthy else "unhealthy"
        health = {"version": __version__, "healthy": healthy, "components": components}
        mark = "\u2705" if healthy else "\u274c"
        return envelope(f"{mark} recall-pipeline v{__version__} - {label}", health=health)

    app.add_route(f"{PREFIX}/search", search, methods=["POST"])
    app.add_route(f"{PREFIX}/health_check", health_check, methods=["POST"])
    app.add_route(f"{PREFIX}/auto_memory", auto_memory, methods=["POST"])
