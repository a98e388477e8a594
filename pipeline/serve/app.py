"""The HTTP routes of ``recall serve`` (Starlette): ``GET /health`` and ``POST /recall``, and
ReMe's ``POST /reme/search`` and ``POST /reme/health_check`` (``pipeline.hooks.reme``).

``POST /recall`` takes ``{"text": str, "scope"?: str | [str], "k"?: int > 0, "format"?: "rows" |
"reme" | "oks" | "bme", "fields"?: {context, now, viewer, BME's scene columns, …}}`` (``fields``:
the query's other columns, part of its cache key and of a miss's query) and answers ``{"rows": [...], "injection": str | null, "cache": "hit" |
"miss", "scope_version": str}`` (``Service.recall``). Every request first passes
``pipeline.serve.guard`` (Host, token, Content-Type, body size while it streams, JSON checks). A
bad request gets a 4xx and one line of JSON, ``{"error": "..."}``: invalid JSON or fields 400, a
wrong or missing token 401, a Host not served 403, an unknown scope 404, a body over
:data:`MAX_BODY` bytes 413, not ``application/json`` 415, a store that cannot be read 503 (on
``/health`` too); never a 500 (that is kept for bugs, as one line of JSON too, and the connection
stays open). No error body holds an absolute path. ``build_app(service)`` returns the app; more
routes can be added to ``app.router`` (``read_json`` and ``error`` are for them too).
"""

from __future__ import annotations

import json
from collections import OrderedDict

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pipeline.contract.errors import UserError
from pipeline.hooks import reme
from pipeline.serve.guard import BODY_SECONDS, MAX_BODY, Guard, without_paths
from pipeline.serve.service import BadRequest

__all__ = ["MAX_BODY", "build_app", "error", "read_json"]
FIELDS = ("text", "scope", "k", "format", "fields")


def dumps(obj) -> bytes:
    """Compact JSON bytes (non-ASCII kept as is)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class JSON(Response):
    """Compact JSON (non-ASCII kept as is)."""

    media_type = "application/json"

    def render(self, content) -> bytes:
        """The body bytes."""
        return dumps(content)


class Encoded:
    """The JSON bytes of the rows lists and injection texts last answered, by object identity (a
    cached entry's lists are shared by every hit): a hit is encoded once, then copied. Each value
    keeps a reference to its object, so an id is never reused while it is cached."""

    def __init__(self, size: int = 4096) -> None:
        self.size, self._by_id = size, OrderedDict()

    def __call__(self, obj) -> bytes:
        """``dumps(obj)``, from the cache when ``obj`` was encoded before."""
        got = self._by_id.get(id(obj))
        if got is not None and got[0] is obj:
            return got[1]
        data = dumps(obj)
        self._by_id[id(obj)] = (obj, data)
        if len(self._by_id) > self.size:
            self._by_id.popitem(last=False)
        return data

    def body(self, out: dict) -> Response:
        """The response of a ``Service.recall`` body."""
        parts = [b'{"rows":', self(out["rows"]), b',"injection":', self(out["injection"])]
        parts += [b',"cache":', dumps(out["cache"]), b',"scope_version":']
        parts += [dumps(out["scope_version"]), b"}"]
        return Response(b"".join(parts), media_type="application/json")


def error(status: int, message: str) -> JSON:
    """A one-line JSON error response (absolute paths left out)."""
    return JSON({"error": without_paths(message)}, status_code=status)


async def read_json(request: Request) -> dict:
    """The request's JSON object, as ``pipeline.serve.guard`` parsed and checked it; a
    BadRequest (400) when the body is empty or not an object."""
    got = getattr(request.state, "json", None)
    if not isinstance(got, dict):
        raise BadRequest("the body must be a JSON object with a 'text' field")
    return got


async def recall(request: Request) -> Response:
    """``POST /recall``: a hit is answered on the event loop, a miss in a worker thread."""
    service = request.app.state.service
    try:
        req = await read_json(request)
        unknown = sorted(set(req) - set(FIELDS))
        if unknown:
            raise BadRequest(f"unknown field(s) {unknown}; fields are {list(FIELDS)}")
        args = {"text": req.get("text"), "scope": req.get("scope"), "k": req.get("k")}
        args["format"] = req.get("format", "rows")
        args["fields"] = req.get("fields")  # a query's context, time, scene (keys.RESULT_FIELDS)
        out = service.recall(**args, compute=False)
        if out is None:
            out = await run_in_threadpool(service.recall, **args)
    except BadRequest as exc:
        return error(exc.status, str(exc))
    except UserError as exc:
        return error(400, str(exc))
    return request.app.state.encoded.body(out)


async def health(request: Request) -> Response:
    """``GET /health``: the service's status (503 while the store cannot be read)."""
    try:
        return JSON(await run_in_threadpool(request.app.state.service.health))
    except BadRequest as exc:
        return error(exc.status, str(exc))


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return error(exc.status_code, exc.detail)


def build_app(
    service, token: str | None = None, hosts=None, body_seconds: float = BODY_SECONDS
) -> Starlette:
    """The Starlette app serving ``service`` (a ``pipeline.serve.Service``), ReMe's routes
    included, behind ``guard.Guard`` (``token``: the bearer token required, None for none;
    ``hosts``: the ``Host`` names served, None for any: ``recall serve`` passes
    ``guard.allowed_hosts``; ``body_seconds``: the longest a request body may take)."""
    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/recall", recall, methods=["POST"]),
        ],
        middleware=[
            Middleware(
                Guard, token=token, hosts=hosts, max_body=MAX_BODY, body_seconds=body_seconds
            )
        ],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.service = service
    app.state.encoded = Encoded()
    reme.add_routes(app, service)
    return app
