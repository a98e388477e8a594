"""ReMe's ``search`` and ``health_check`` HTTP actions over the recall cache, as routes of the
``recall serve`` app (``add_routes(app, service)``): ``POST /reme/search``, ``POST /reme/health_check``.

ReMe (agentscope-ai/ReMe) serves each job as ``POST /{job}`` with a JSON body whose fields are the
job's parameters (``reme/components/service/http_service.py``) and answers the envelope
``{"answer", "success", "metadata"}`` (``reme/schema/response.py``). ``search``
(``reme/config/default.yaml``; ``reme/steps/index/search.py``) takes ``query`` and ``limit``
(default 5) and answers one block per chunk, ``========== path:start-end [score=…] ==========`` and
its text, with ``metadata.results`` (chunk dicts: ``id``, ``path``, ``start_line``, ``end_line``,
``scores``) and ``metadata.counts``. ReMe's Hermes plugin (``integrations/hermes_agent``) posts
``{"query", "limit"}`` to ``{endpoint}/search``, needs ``success`` true and injects ``answer``; it
checks ``{endpoint}/health_check`` for ``metadata.health.healthy`` true. So its ``endpoint`` here is
``http://HOST:PORT/reme``.

The answer is the ``reme`` block (``inject.format=reme``, the same layout) of the first ``limit``
rows, rendered over those rows by ``service.render`` (``Service.recall``'s injection covers the
whole entry). The routes are part of every ``recall serve`` app (``pipeline.serve.app.build_app``). ReMe's filters that the cache cannot honour (``min_score`` > 0, dates,
``search_filter``, ``vector_weight``, ``tool_context_id``) are refused with a 400, never ignored.
``scope`` (not a ReMe field; ReMe's requests allow extra fields) picks the recall scope.
"""

from __future__ import annotations

import json
import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pipeline import __version__
from pipeline.contract.errors import UserError

PREFIX = "/reme"
DEFAULT_LIMIT = 5  # reme/steps/index/search.py _DEFAULT_LIMIT
MAX_BODY = 1 << 20  # bytes; a query is a turn, not a document
UNSUPPORTED = ("start_date", "end_date", "search_filter", "vector_weight", "tool_context_id",
               "strict_date_filter")  # fmt: skip
LINES = re.compile(r"#L(\d+)-L(\d+)$")
ROW_KEYS = ("node_id", "doc_id", "rank", "score", "text", "start_line", "end_line")


class BadRequest(ValueError):
    """A request ReMe's ``search`` would not answer as asked; its message is the 400's answer
    (the service's own refusals keep their status: an unknown scope is a 404)."""


def envelope(answer: str, success: bool = True, status: int = 200, **metadata) -> JSONResponse:
    """ReMe's ``Response``: ``answer``, ``success``, ``metadata``."""
    body = {"answer": answer, "success": success, "metadata": metadata}
    return JSONResponse(body, status_code=status)


def parse_search(raw: bytes) -> tuple[str, int, str | None]:
    """(query, limit, scope) of a ``search`` body, or BadRequest naming the field and the fix."""
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f'Error: the body is not JSON ({exc}); send {{"query": ...}}') from exc
    if not isinstance(body, dict):
        raise BadRequest('Error: the body is not a JSON object; send {"query": ..., "limit": 5}')
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("Error: query cannot be empty")
    limit = body.get("limit") or DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise BadRequest(f"Error: limit must be a positive integer, got {limit!r}")
    used = [k for k in UNSUPPORTED if body.get(k)] + (
        ["min_score"] if body.get("min_score") else []
    )
    if used:
        raise BadRequest(
            f"Error: {used} not supported by the recall cache (its scores and filters are the "
            "recipe's, not ReMe's); leave them out"
        )
    scope = body.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise BadRequest(f"Error: scope must be a string, got {scope!r}")
    return query, limit, scope


def chunk(row: dict) -> dict:
    """A row as ReMe's ``FileChunk`` dump: ``id``, ``path``, lines, ``text``, ``scores``. The lines
    are the row's ``start_line``/``end_line`` (what the ``reme`` block's header shows), else the
    ``#L<a>-L<b>`` of a ReMe chunk id, else 0."""
    found = LINES.search(str(row["node_id"]))
    lines = (
        (None, row["start_line"], row["end_line"])
        if row.get("start_line") is not None and row.get("end_line") is not None
        else found
    )
    scores = {"score": float(row["score"])}
    for key, v in row.items():
        if key not in ROW_KEYS and isinstance(v, int | float) and not isinstance(v, bool):
            scores[key] = float(v)
    return {
        "id": row["node_id"],
        "path": row.get("doc_id") or str(row["node_id"]).split("#", 1)[0],
        "start_line": int(lines[1]) if lines else 0,
        "end_line": int(lines[2]) if lines else 0,
        "text": row.get("text") or "",
        "scores": scores,
    }


def answer_of(service, query: str, limit: int, scope: str | None) -> tuple[dict, str]:
    """(``service.recall``'s answer cut to ``limit`` rows, the ``reme`` block of those rows):
    ``recall``'s injection is the whole entry's, so the block is rendered over the cut rows."""
    entry = service.recall(query, scope=scope, k=limit, format="rows")
    return entry, (service.render(query, entry["rows"], "reme") or "").strip()


def add_routes(app, service) -> None:
    """Add ``POST /reme/search`` and ``POST /reme/health_check`` to the serve app (nothing when
    they are there already: ``build_app`` adds them)."""
    if any(getattr(r, "path", None) == f"{PREFIX}/search" for r in app.routes):
        return

    async def search(request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            if len(raw) > MAX_BODY:
                return envelope(f"Error: the body is over {MAX_BODY} bytes", False, 413)
            query, limit, scope = parse_search(raw)
            entry, answer = await run_in_threadpool(answer_of, service, query, limit, scope)
        except (BadRequest, UserError) as exc:
            return envelope(str(exc).splitlines()[0], False, getattr(exc, "status", 400))
        rows = entry["rows"]
        counts = {"returned": len(rows), "cache": entry.get("cache")}
        results = [chunk(r) for r in rows]
        version = entry.get("scope_version")
        return envelope(answer, results=results, counts=counts, scope_version=version)

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
