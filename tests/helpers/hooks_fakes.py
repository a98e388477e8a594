"""A stand-in for ``pipeline.serve`` (``Service``, ``RecallCache``, ``build_app``) with the same
interface, for the hook tests. The hook tests take the service from the ``service`` fixture and
the app from ``build_app(service)`` below: to run them against the real service, change those two
to ``pipeline.serve.Service(cfg)`` and ``pipeline.serve.app.build_app``. Every assertion compares a
hook's output with what ``service.recall`` answers (or with hand-written values of these entries).
"""

from __future__ import annotations

import contextlib
import threading
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pipeline.contract.errors import UserError
from pipeline.hooks.source import normalize

SCOPES = ("default",)
HIT = "How do I rotate the API keys?"
MISS = "Which rule covers on-call handover?"  # not cached; the service computes it
UNKNOWN = "a text neither cached nor computable"
REME = "what did we decide about the deploy window"

# OKS-like rows (data=oks: node_id = <path under wiki/>#<node_idx>, doc_id = the path)
ROWS_HIT = [
    {"node_id": "concepts/alpha.md#1", "doc_id": "concepts/alpha.md", "rank": 1, "score": 3.5,
     "lexical": 3.5},
    {"node_id": "concepts/alpha.md#0", "doc_id": "concepts/alpha.md", "rank": 2, "score": 2.0,
     "lexical": 2.0},
    {"node_id": "rules/beta.md#0", "doc_id": "rules/beta.md", "rank": 3, "score": 1.25,
     "lexical": 1.25},
    {"node_id": "concepts/gamma.md#0", "doc_id": "concepts/gamma.md", "rank": 4, "score": 0.5,
     "lexical": 0.5},
]  # fmt: skip
ROWS_MISS = [
    {"node_id": "rules/beta.md#2", "doc_id": "rules/beta.md", "rank": 1, "score": 2.75,
     "lexical": 2.75},
]  # fmt: skip
# ReMe-like rows (data=reme: node_id = <path>#L<start>-L<end>)
ROWS_REME = [
    {"node_id": "daily/2026-11-30.md#L3-L7", "doc_id": "daily/2026-11-30.md", "rank": 1,
     "score": 0.0113, "dense": 0.82, "lexical": 4.1},
    {"node_id": "digest/deploys.md#L1-L4", "doc_id": "digest/deploys.md", "rank": 2,
     "score": 0.0098, "dense": 0.64, "lexical": 0.0},
]  # fmt: skip


def _inject(name: str, rows: list[dict]) -> dict:
    return {
        "oks": f"## Recalled ({name})\n" + "\n".join(f"- {r['node_id']}" for r in rows),
        "reme": "\n".join(
            f"========== {r['node_id']} ==========\ntext of {r['node_id']}" for r in rows
        ),
        "bme": f"[Memory - Recalled]\n{name}: {len(rows)} node(s)",
    }


def entries() -> dict[str, dict]:
    """Normalised text → {"rows", "injection": {format: text}}: what the cache holds."""
    return {
        normalize(HIT): {"rows": ROWS_HIT, "injection": _inject("hit", ROWS_HIT)},
        normalize(REME): {"rows": ROWS_REME, "injection": _inject("reme", ROWS_REME)},
    }


class FakeService:
    """``Service.recall`` / ``health``: cached texts are hits; ``MISS`` is computed (a miss, then
    written back: a hit); other texts give no rows. Records each call in ``calls``; with a
    ``gate``, a computation waits for it to be set."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.entries = entries()
        self.computable = {
            normalize(MISS): {"rows": ROWS_MISS, "injection": _inject("miss", ROWS_MISS)}
        }
        self.calls: list[tuple] = []
        self.gate = gate  # a computation waits until the gate is set (tests of background work)

    def recall(self, text, scope=None, k=None, format="rows"):
        if scope is not None and scope not in SCOPES:
            raise UserError(f"scope={scope!r}: unknown scope; choose from {list(SCOPES)}")
        key = normalize(text)
        self.calls.append((key, scope, k, format))
        cache = "hit" if key in self.entries else "miss"
        if key not in self.entries and key in self.computable:
            if self.gate is not None:
                self.gate.wait(30)
            self.entries[key] = self.computable[key]
        entry = self.entries.get(key, {"rows": [], "injection": {}})
        rows = entry["rows"][:k] if k else entry["rows"]
        injection = None if format == "rows" else entry["injection"].get(format)
        return {"rows": rows, "injection": injection, "cache": cache, "scope_version": "v1"}

    def render(self, text, rows, format):
        return _inject("render", rows)[format] if rows and format != "rows" else None

    def health(self):
        return {"entries": len(self.entries)}


class FakeCache:
    """``RecallCache.get``: the entries cached before serving, with one injection format."""

    def __init__(self, format: str = "oks") -> None:
        self.entries, self.format = entries(), format

    def get(self, text, scope=None):
        entry = self.entries.get(normalize(text))
        if entry is None:
            return None
        return {"rows": entry["rows"], "injection": entry["injection"][self.format],
                "scope_version": "v1"}  # fmt: skip


def build_app(service) -> Starlette:
    """``pipeline.serve.app.build_app``'s routes: ``GET /health``, ``POST /recall``."""

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(service.health())

    async def recall(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            out = service.recall(
                body["text"], scope=body.get("scope"), k=body.get("k"),
                format=body.get("format", "rows"),
            )  # fmt: skip
        except UserError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(out)

    routes = [Route("/health", health), Route("/recall", recall, methods=["POST"])]
    return Starlette(routes=routes)


@contextlib.contextmanager
def serving(app):
    """Run ``app`` with uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
