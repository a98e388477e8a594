"""The checks every request to ``recall serve`` passes before its route, as one ASGI middleware
(``Guard``), so every route (``/recall``, ``/health``, ReMe's, any added later) shares them:

- **Host**: the ``Host`` header must name an allowed host (``recall serve`` passes
  ``serve.allowed_hosts``: loopback names by default, the bind address added; ``"*"`` allows any;
  an app built without ``hosts`` checks none) → else 403. A web page that rebinds its
  own DNS name to 127.0.0.1 sends its own name, so it cannot read the answers.
- **Token**: with ``serve.token`` set, ``Authorization: Bearer <token>`` is required → else 401.
- **Content-Type**: a body must say ``application/json`` → else 415 (a page's form or a
  ``text/plain`` fetch cannot post without a CORS preflight, which is never answered), with no
  ``charset`` but UTF-8 (JSON is UTF-8; a latin-1 body would be misread) → else 415.
- **Head**: ``Host``, ``Authorization``, ``Content-Type`` or ``Content-Length`` sent twice, or
  ``Transfer-Encoding`` with ``Content-Length`` → 400 (the guard would check one copy while a
  route or a proxy read the other).
- **Body**: counted while it streams, refused past ``max_body`` bytes → 413 (``Connection:
  close``, the rest is never read), or not complete within ``body_seconds`` (30 s) → 408
  (``Connection: close``: a body trickled a byte at a time holds nothing for long); then parsed
  once as JSON: invalid JSON or UTF-8, a lone surrogate (``"\\ud800"``) anywhere, nesting
  deeper than :data:`MAX_DEPTH`, an integer over Python's digit limit → 400. The parsed value
  is ``request.state.json`` for the route (an empty body is passed on as empty).
- **Errors**: an exception from a route becomes a 500 with one line of JSON naming only its type
  (the traceback goes to the server's log), and the connection stays open.

Every refusal is one line of JSON: ``{"error": ...}``, or ReMe's envelope ``{"answer", "success":
false, "metadata": {}}`` under ``/reme/``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re

from pipeline.contract.errors import UserError

log = logging.getLogger("recall.serve")

MAX_BODY = 1 << 20  # 1 MiB: a query text is far shorter
BODY_SECONDS = 30.0  # the longest a body may take to arrive (1 MiB at ~35 kB/s)
CLOSE = {"connection": "close"}
SINGLE = (b"host", b"authorization", b"content-type", b"content-length")  # each at most once
MAX_ERROR = 600  # characters of an error line: enough for any message, never a request's echo
MAX_DEPTH = 32  # a request body is a flat object; nothing legitimate nests deeper
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FLAT = {str, int, float, bool, type(None)}
_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:[^/\s'\"]+/)+")


class Refused(UserError):
    """A request refused before its route: ``status`` and a one-line message."""

    def __init__(self, message: str, status: int = 400, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


def allowed_hosts(bind: str, extra=None) -> tuple[str, ...]:
    """The ``Host`` names accepted: ``extra`` (``serve.allowed_hosts``; None: the loopback names)
    plus the bind address itself unless it is a wildcard (``0.0.0.0``, ``::``)."""
    names = [str(h).lower() for h in (LOOPBACK_NAMES if extra is None else extra)]
    if bind not in ("0.0.0.0", "::", ""):
        names.append(bind.strip("[]").lower())
    return tuple(dict.fromkeys(names))


def without_paths(message: str, roots=()) -> str:
    """``message`` on one line of at most :data:`MAX_ERROR` characters (a value a request echoes,
    e.g. a scope list of 100,000 entries, is cut, ``…`` marking the cut), a path under one of
    ``roots`` (the store) relative to it and the folders of every other absolute path left out (a
    file's name stays): an error never tells a client where the store lies."""
    text = " ".join(str(message).split())
    for root in sorted((str(r) for r in roots), key=len, reverse=True):
        text = text.replace(root + "/", "").replace(root, os.path.basename(root) or ".")
    text = _ABSOLUTE.sub("", text)
    return text if len(text) <= MAX_ERROR else text[: MAX_ERROR - 1] + "…"


def check_value(value) -> None:
    """A Refused (400) when ``value`` (parsed JSON) nests deeper than :data:`MAX_DEPTH` or holds a
    lone surrogate in a string or key; walked iteratively, so no depth can overflow the stack."""
    if isinstance(value, dict) and all(
        type(v) in _FLAT and (type(v) is not str or not _SURROGATE.search(v))
        and not _SURROGATE.search(k) for k, v in value.items()
    ):  # fmt: skip
        return  # the usual body: one object of plain values, nothing to walk
    stack = [(value, 1, "body")]
    while stack:
        v, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise Refused(f"the JSON body nests deeper than {MAX_DEPTH} levels; send a flat object")
        if isinstance(v, str):
            if _SURROGATE.search(v):
                raise Refused(
                    f"{where}: a lone surrogate (\\ud800-\\udfff) is not text; send UTF-8"
                )
        elif isinstance(v, dict):
            for k, item in v.items():
                if _SURROGATE.search(k):
                    raise Refused("a key holds a lone surrogate (\\ud800-\\udfff); send UTF-8")
                stack.append((item, depth + 1, f"field {k!r}" if depth == 1 else where))
        elif isinstance(v, list):
            stack.extend((item, depth + 1, where) for item in v)


def parse_body(raw: bytes):
    """The JSON value of a request body, checked by :func:`check_value`; a Refused (400) naming
    the problem otherwise."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise Refused(
            f"the JSON body nests deeper than {MAX_DEPTH} levels; send a flat object"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(f"invalid JSON body ({exc}); send a JSON object") from None
    check_value(value)
    return value


def _media_type(headers: dict) -> str:
    return headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower().decode("latin-1")


def _charset(headers: dict) -> str | None:
    """The ``charset`` a ``Content-Type`` names (lower case, unquoted), or None."""
    for param in headers.get(b"content-type", b"").decode("latin-1").split(";")[1:]:
        key, _eq, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def _host_name(value: str) -> str:
    """The host of a ``Host`` header without its port (``[::1]:8765`` → ``::1``)."""
    if value.startswith("["):
        return value[1 : value.find("]")].lower() if "]" in value else value.lower()
    return value.rsplit(":", 1)[0].lower() if value.count(":") == 1 else value.lower()


class Guard:
    """ASGI middleware applying the module's checks in front of ``app``."""

    def __init__(self, app, token: str | None = None, hosts=None, max_body: int = MAX_BODY,
                 body_seconds: float = BODY_SECONDS) -> None:  # fmt: skip
        self.app, self.max_body, self.body_seconds = app, max_body, body_seconds
        self.token = token.encode() if token else None
        self.hosts = None if hosts is None else {str(h).lower() for h in hosts}

    def refusal(self, headers: dict, names: list) -> Refused | None:
        """The Refused of a request's head (its ``headers``: host, token, declared length;
        ``names``: every header name as sent, to find one sent twice), or None."""
        twice = sorted({n.decode("latin-1") for n in SINGLE if names.count(n) > 1})
        if twice:  # the guard would check one copy and a route could read the other
            return Refused(f"header {twice[0]} sent more than once; send it once", 400, CLOSE)
        if b"transfer-encoding" in headers and b"content-length" in headers:
            msg = "both Transfer-Encoding and Content-Length sent; send one of them"
            return Refused(msg, 400, CLOSE)  # where its body ends is in doubt: no next request
        if self.hosts is not None and "*" not in self.hosts:
            host = _host_name(headers.get(b"host", b"").decode("latin-1"))
            if host not in self.hosts:
                return Refused(f"Host {host!r} is not served; add it to serve.allowed_hosts", 403)
        if self.token is not None:
            got = headers.get(b"authorization", b"")
            if not hmac.compare_digest(got, b"Bearer " + self.token):
                why = "send Authorization: Bearer <serve.token>"
                return Refused(
                    f"missing or wrong token; {why}", 401, {"www-authenticate": "Bearer"}
                )
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return self._too_big()
        return None

    def _too_big(self) -> Refused:
        msg = f"request body over {self.max_body} bytes; send a shorter body"
        return Refused(msg, 413, {"connection": "close"})

    async def _body(self, receive) -> bytes:
        """The whole body, within :attr:`max_body` bytes and :attr:`body_seconds` (a body sent
        a byte at a time would hold its connection and worker forever) → else 413 / 408. The
        deadline is one timer that cancels this task (a few µs; a cancel scope cost 20)."""
        task, expired = asyncio.current_task(), []

        def expire() -> None:
            expired.append(True)
            task.cancel()

        timer = asyncio.get_running_loop().call_later(self.body_seconds, expire)
        try:
            return await self._read(receive)
        except asyncio.CancelledError:
            if not expired:
                raise  # the server's own cancel (shutdown, the client gone)
            if hasattr(task, "uncancel"):  # Python 3.11+: this cancel is handled here
                task.uncancel()
            msg = f"the body did not arrive within {self.body_seconds:g} s; send it at once"
            raise Refused(msg, 408, {"connection": "close"}) from None
        finally:
            timer.cancel()

    async def _read(self, receive) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refused("the client went away", 400)
            if not body and not message.get("more_body", False):  # the whole body at once
                if len(message.get("body", b"")) > self.max_body:
                    raise self._too_big()
                return message.get("body", b"")
            body += message.get("body", b"")
            if len(body) > self.max_body:
                raise self._too_big()
            if not message.get("more_body", False):
                return bytes(body)

    async def __call__(self, scope, receive, send) -> None:
        """Check the request, then run the route with the body replayed; errors as one line."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            headers = dict(scope["headers"])
            refused = self.refusal(headers, [name for name, _v in scope["headers"]])
            if refused is not None:
                raise refused
            if scope["method"] in ("POST", "PUT", "PATCH"):
                raw = await self._body(receive)
                if raw and _media_type(headers) != "application/json":
                    raise Refused("Content-Type must be application/json; send a JSON body", 415)
                if raw and _charset(headers) not in (None, "utf-8", "utf8"):
                    raise Refused(
                        f"charset={_charset(headers)} is not read; send the JSON as UTF-8 "
                        "(Content-Type: application/json or application/json; charset=utf-8)",
                        415,
                    )
                if raw:
                    scope.setdefault("state", {})["json"] = parse_body(raw)
                receive = _replay(raw, receive)
            await self.app(scope, receive, tracked)
        except Refused as exc:
            await _answer(send, scope["path"], exc.status, str(exc), exc.headers)
        except Exception as exc:
            if started:
                raise
            log.exception("recall serve: %s %s failed", scope["method"], scope["path"])
            msg = f"internal error ({type(exc).__name__}); see the server log"
            await _answer(tracked, scope["path"], 500, msg, {})


def _replay(raw: bytes, receive):
    """A ``receive`` giving the body read already, then the client's own (its disconnect)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


def error_body(path: str, message: str) -> bytes:
    """One line of JSON: ``{"error": message}``, or ReMe's failed envelope under ``/reme/``."""
    text = without_paths(message)
    reme = path.startswith("/reme/")
    body = (
        {"answer": f"Error: {text}", "success": False, "metadata": {}} if reme else {"error": text}
    )
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _answer(send, path: str, status: int, message: str, headers: dict) -> None:
    body = error_body(path, message)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    head += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
