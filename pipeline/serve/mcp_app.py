"""``recall mcp``'s server: one MCP tool, ``recall``, on a ``Service``, built on the official ``mcp``
SDK's low-level ``Server`` for the stdio and streamable-HTTP transports.

``recall {"query": str, "scope"?: str | [str], "k"?: int > 0 (default 10)}`` answers
``{"rows": [{"id", "doc_id", "title", "text", "score"}], "cache": "hit" | "miss"}`` as JSON text
and as structured content: the first ``k`` rows of ``Service.recall`` (a hit read from the
precomputed cache, a miss computed by the batch's query path), so those of ``POST /recall`` and of
a batch run of the text, in rank order. The arguments follow the rules of ``POST /recall``: a bad
one (an unknown argument, an empty query, ``k`` not a positive integer, a bad or unknown scope)
is a tool error (``isError``) with one line naming it; a bug is a tool error too (its traceback
goes to the server log), and the server keeps answering.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from pipeline.contract.errors import UserError
from pipeline.core import version
from pipeline.serve.access import BearerGate, is_loopback
from pipeline.serve.guard import without_paths

log = logging.getLogger(__name__)
PATH = "/mcp"
DEFAULT_K = 10
ROW_FIELDS = {
    "id": "node_id",
    "doc_id": "doc_id",
    "title": "title",
    "text": "text",
    "score": "score",
}
ARGUMENTS = ("query", "scope", "k")
ROW_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "doc_id": {"type": ["string", "null"]},
        "title": {"type": ["string", "null"]},
        "text": {"type": ["string", "null"]},
        "score": {"type": "number"},
    },
    "required": list(ROW_FIELDS),
}
TOOL = types.Tool(
    name="recall",
    description=(
        "Recall the notes of the memory store most relevant to a query, best first: JSON "
        '{"rows": [{"id", "doc_id", "title", "text", "score"}], "cache": "hit" | "miss"}.'
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "a question or a topic"},
            "scope": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ],
                "description": "a doc_scope (folder or conversation id) or a list of them; "
                "omitted: the whole store",
            },
            "k": {"type": "integer", "minimum": 1, "default": DEFAULT_K, "description": "rows"},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": ROW_SCHEMA},
            "cache": {"enum": ["hit", "miss"]},
        },
        "required": ["rows", "cache"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
)


def tool_rows(rows: list[dict]) -> list[dict]:
    """The MCP rows of service rows: ``id`` (the node id), ``doc_id``, ``title``, ``text``,
    ``score``, in rank order."""
    return [{out: r.get(col) for out, col in ROW_FIELDS.items()} for r in rows]


def recall_tool(service, arguments: dict) -> dict[str, Any]:
    """The ``recall`` tool's answer to ``arguments``; a UserError (one line) for a bad one."""
    unknown = sorted(set(arguments) - set(ARGUMENTS))
    if unknown:
        raise UserError(f"unknown argument(s) {unknown}; arguments are {list(ARGUMENTS)}")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise UserError("argument 'query': give the query text as a non-empty string")
    k = arguments.get("k", DEFAULT_K)
    try:
        out = service.recall(query, arguments.get("scope"), k)
    except UserError as exc:
        msg = str(exc).replace("field 'k'", "argument 'k'")
        raise UserError(msg.replace("field 'text'", "argument 'query'")) from None
    return {"rows": tool_rows(out["rows"]), "cache": out["cache"]}


def _error(message: str) -> types.CallToolResult:
    """A tool error of one short line without absolute paths (``guard.without_paths``)."""
    text = without_paths(message)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_server(service) -> Server:
    """A low-level MCP ``Server`` named ``recall`` listing and answering the ``recall`` tool on
    ``service`` (each call in a worker thread: a miss computes)."""

    async def list_tools(_ctx, _params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(_ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != TOOL.name:
            return _error(f"unknown tool {params.name!r}; the tool is 'recall'")
        try:
            body = await anyio.to_thread.run_sync(recall_tool, service, params.arguments or {})
        except UserError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 — a bug answers one line; the log has the rest
            log.exception("recall tool failed")
            return _error(f"internal error ({type(exc).__name__}); see the server log")
        text = json.dumps(body, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=body
        )

    name = service.state.ds.name
    return Server(
        "recall",
        version=version.package_version(),
        instructions=f"Recall notes of the {name!r} store relevant to a query (tool 'recall').",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_stdio(server: Server) -> None:
    """Serve ``server`` over this process's stdin/stdout until the client closes stdin."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(server: Server, host: str, token: str | None):
    """The streamable-HTTP ASGI app at :data:`PATH`. On a loopback bind, the SDK's DNS-rebinding
    guard (a Host or Origin other than this machine's loopback names: 421/403); off loopback a
    :class:`BearerGate` (``check_bind`` refuses to start such a bind without ``token``)."""
    guard = None
    if is_loopback(host):
        name = f"[{host.strip('[]')}]" if ":" in host else host  # as a Host header spells it
        names = sorted({name, "127.0.0.1", "localhost", "[::1]"})
        guard = TransportSecuritySettings(
            allowed_hosts=[f"{n}:*" for n in names],
            allowed_origins=[f"http://{n}:*" for n in names],
        )
    elif not token:  # check_bind refuses this first; never serve it open
        raise UserError(f"recall mcp: host={host!r} needs serve.token")
    app = server.streamable_http_app(streamable_http_path=PATH, host=host, transport_security=guard)
    return BearerGate(app, token) if token else app
