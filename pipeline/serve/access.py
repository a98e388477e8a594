"""Who may reach a served port: a loopback bind is open to the local user's clients; any other bind
needs a bearer token (``serve.token``), sent as ``Authorization: Bearer <token>`` on every request.

:func:`check_bind` is the rule (a ConfigError without a token, a warning line with one),
:class:`BearerGate` the ASGI wrapper that enforces the token. Written for ``recall mcp`` and
meant to be shared with ``recall serve`` (the same rule, the same setting).
"""

from __future__ import annotations

import hmac
import ipaddress

from pipeline.contract.errors import ConfigError


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and the loopback addresses (127.0.0.0/8, ::1); False for anything
    else, a wildcard (``0.0.0.0``, ``::``) or a name included."""
    name = str(host).strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, command: str, hosts=None) -> str | None:
    """None for a loopback ``host``; a ConfigError when another bind has no ``token``; else the
    warning line to print at start (the port is reachable from the network; ``hosts``: the
    ``Host`` names it answers, named in the warning)."""
    if is_loopback(host):
        return None
    if not token:
        raise ConfigError(
            f"{command}: serve.host={host} is not loopback: any machine that reaches it could read "
            "the notes; set serve.token=<secret> (or RECALL_SERVE_TOKEN; clients send "
            "'Authorization: Bearer <secret>'), or bind host=127.0.0.1"
        )
    served = f" and a Host in {sorted(hosts)} (serve.allowed_hosts)" if hosts else ""
    return (
        f"warning: {command} listens on {host}, not loopback: every request needs "
        f"Authorization: Bearer <serve.token>{served}; put TLS in front of it to keep the token "
        "off the wire"
    )


class BearerGate:
    """ASGI wrapper: an HTTP request without ``Authorization: Bearer <token>`` gets a 401 with one
    line of JSON, a websocket is closed; lifespan events and authorised requests pass to ``app``."""

    def __init__(self, app, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        """Answer a 401 or call the wrapped app."""
        if scope["type"] == "websocket":  # no route takes one
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error":"missing or wrong bearer token; send Authorization: Bearer <serve.token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
