"""What every request to ``recall serve`` passes (``pipeline.serve.guard``), against the real app on
a real uvicorn bound to 127.0.0.1: hostile bodies are a 400 with one line of JSON and the
keep-alive connection stays usable, a 500 too; a body over the limit is refused while it streams;
the Host allow-list, the bearer token and ``application/json``; a public bind needs a token."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys

import pytest

from pipeline.contract.errors import ConfigError
from pipeline.hooks.client import HttpRecaller, RecallServiceError
from pipeline.run import precompute
from pipeline.serve import Service
from pipeline.serve.access import check_bind
from pipeline.serve.app import MAX_BODY, build_app
from pipeline.serve.guard import allowed_hosts
from tests.helpers.hooks_fakes import serving
from tests.helpers.serve_support import QUERIES, notes_store

HIT = QUERIES[0]["text"]
JSON_HEAD = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(service, base URL) of the notes store, precomputed, served by uvicorn on 127.0.0.1."""
    cfg, _store = notes_store(tmp_path_factory.mktemp("guard"))
    precompute.precompute(cfg)
    service = Service(cfg)
    with serving(build_app(service)) as url:
        yield service, url
    service.close()


def _connect(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.connect()
    return conn


def _ask(conn, method: str, path: str, body: bytes = b"", headers=None):
    """(status, headers, body text) of one request on the open connection ``conn``."""
    conn.request(method, path, body=body, headers=headers if headers is not None else JSON_HEAD)
    got = conn.getresponse()
    return got.status, {k.lower(): v for k, v in got.getheaders()}, got.read().decode()


def _one_line(text: str, key: str = "error") -> str:
    assert "\n" not in text
    got = json.loads(text)
    assert set(got) == {key} if key == "error" else got["success"] is False
    return got[key]


def _still_answers(conn, sock) -> None:
    """The same connection (the same socket) answers a hit next."""
    status, _h, text = _ask(conn, "POST", "/recall", json.dumps({"text": HIT}).encode())
    assert status == 200 and json.loads(text)["cache"] == "hit"
    assert conn.sock is sock


DEEP = 990  # a 500 (RecursionError) before; 950 was a 400
HOSTILE = [
    ("surrogate in text", "/recall", b'{"text": "\\ud800"}', "field 'text': a lone surrogate"),
    ("surrogate in scope", "/recall", b'{"text": "a", "scope": ["\\udfff"]}', "field 'scope'"),
    ("surrogate in a key", "/recall", b'{"text": "a", "\\ud800": 1}', "a key holds a lone surrogate"),
    ("deep nesting", "/recall", b'{"text": "a", "k": ' + b"[" * DEEP + b"]" * DEEP + b"}",
     "the JSON body nests deeper than 32 levels"),
    ("deep nesting, 950", "/recall", b"[" * 950 + b"]" * 950,
     "the JSON body nests deeper than 32 levels"),
    ("5000-digit k", "/recall", b'{"text": "a", "k": ' + b"9" * 5000 + b"}", "invalid JSON body"),
    ("5000-digit limit", "/reme/search", b'{"query": "a", "limit": ' + b"9" * 5000 + b"}",
     "Error: invalid JSON body"),
    ("surrogate query", "/reme/search", b'{"query": "\\ud800"}', "Error: field 'query'"),
]  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_body_is_a_400_and_the_connection_stays_open(served, case):
    _service, url = served
    _name, path, body, message = case
    conn = _connect(url)
    sock = conn.sock
    status, headers, text = _ask(conn, "POST", path, body)
    assert status == 400, text
    assert headers.get("connection") != "close"
    key = "answer" if path.startswith("/reme/") else "error"
    assert _one_line(text, key).startswith(message)
    _still_answers(conn, sock)
    conn.close()


def test_a_500_keeps_the_connection_open(served, monkeypatch):
    service, url = served

    def broken():
        raise RuntimeError("a bug /home/someone/notes")

    monkeypatch.setattr(service, "health", broken)
    conn = _connect(url)
    sock = conn.sock
    status, headers, text = _ask(conn, "GET", "/health", headers={})
    assert status == 500 and headers.get("connection") != "close"
    assert _one_line(text) == "internal error (RuntimeError); see the server log"
    _still_answers(conn, sock)
    conn.close()


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(served):
    """2 MiB of a chunked body that never ends: the 413 comes after the first MiB (before, the
    ReMe route waited for the whole body)."""
    _service, url = served
    host, port = url.removeprefix("http://").split(":")
    for path in ("/reme/search", "/recall"):
        with socket.create_connection((host, int(port)), timeout=60) as s:
            head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            s.sendall((head + "Transfer-Encoding: chunked\r\n\r\n").encode())
            chunk = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
            try:
                for _ in range(2 * MAX_BODY // 65536):
                    s.sendall(chunk)
            except OSError:  # the server closed its side after the 413
                pass
            got = b""
            while b"\r\n\r\n" not in got:
                part = s.recv(65536)
                assert part, got
                got += part
        status_line, rest = got.split(b"\r\n", 1)
        assert status_line == b"HTTP/1.1 413 Request Entity Too Large", status_line
        assert b"connection: close" in rest.lower()
    conn = _connect(url)
    _still_answers(conn, conn.sock)  # a new connection is served
    conn.close()


@pytest.fixture(scope="module")
def guarded(served):
    """The same service behind a token and the Host allow-list of a loopback bind."""
    service, _url = served
    with serving(build_app(service, token="s3cret", hosts=allowed_hosts("127.0.0.1"))) as url:
        yield url


AUTH = {"Authorization": "Bearer s3cret", "Content-Type": "application/json"}
HEADS = [
    ("Host of another site", {"Host": "evil.example", **AUTH}, 403, "Host 'evil.example'"),
    ("Host with a port", {"Host": "evil.example:80", **AUTH}, 403, "Host 'evil.example'"),
    ("no token", {"Content-Type": "application/json"}, 401, "missing or wrong token"),
    ("wrong token", {**AUTH, "Authorization": "Bearer s3cre"}, 401, "missing or wrong token"),
    ("basic auth", {**AUTH, "Authorization": "Basic czNjcmV0"}, 401, "missing or wrong token"),
    ("text/plain", {**AUTH, "Content-Type": "text/plain"}, 415, "Content-Type must be"),
    ("form", {**AUTH, "Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type"),
    ("no content type", {"Authorization": "Bearer s3cret"}, 415, "Content-Type must be"),
]


@pytest.mark.parametrize("case", HEADS, ids=[h[0] for h in HEADS])
def test_host_token_and_content_type_are_checked(guarded, case):
    _name, headers, status, message = case
    conn = _connect(guarded)
    got, head, text = _ask(conn, "POST", "/recall", json.dumps({"text": HIT}).encode(), headers)
    assert got == status and _one_line(text).startswith(message)
    if status == 401:
        assert head["www-authenticate"] == "Bearer"
    conn.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_a_loopback_host_with_the_token_is_served(guarded, host):
    conn = _connect(guarded)
    port = guarded.rsplit(":", 1)[1]
    headers = {**AUTH, "Host": f"{host}:{port}"}
    got, _h, text = _ask(conn, "POST", "/recall", json.dumps({"text": HIT}).encode(), headers)
    assert got == 200 and json.loads(text)["cache"] == "hit"
    got, _h, text = _ask(conn, "GET", "/health", headers={"Authorization": "Bearer s3cret"})
    assert got == 200 and json.loads(text)["status"] == "ok"
    got, _h, text = _ask(conn, "POST", "/reme/search", json.dumps({"query": HIT}).encode(), AUTH)
    assert got == 200 and json.loads(text)["success"] is True
    conn.close()


def test_the_hooks_client_sends_the_token_from_the_environment(guarded, monkeypatch):
    """The stdlib client the hooks use (OKS, Hermes, ST-BME --endpoint) reaches a guarded server
    with RECALL_SERVE_TOKEN set, and gets the server's one-line 401 without it."""
    monkeypatch.delenv("RECALL_SERVE_TOKEN", raising=False)
    with pytest.raises(RecallServiceError, match="HTTP 401.*missing or wrong token"):
        HttpRecaller(guarded).recall(HIT)
    monkeypatch.setenv("RECALL_SERVE_TOKEN", "s3cret")
    assert HttpRecaller(guarded).recall(HIT)["cache"] == "hit"
    assert HttpRecaller(guarded, token="s3cret").recall(HIT)["cache"] == "hit"
    monkeypatch.setenv("RECALL_SERVE_TOKEN", "wrong")
    with pytest.raises(RecallServiceError, match="HTTP 401"):
        HttpRecaller(guarded).recall(HIT)


def test_a_public_bind_needs_a_token_and_warns():
    assert check_bind("127.0.0.1", None, "recall serve", allowed_hosts("127.0.0.1")) is None
    assert check_bind("::1", None, "recall serve", allowed_hosts("::1")) is None
    with pytest.raises(ConfigError, match="recall serve: serve.host=0.0.0.0 is not loopback"):
        check_bind("0.0.0.0", None, "recall serve", allowed_hosts("0.0.0.0"))
    hosts = allowed_hosts("10.1.2.3", ["recall.lan"])
    assert hosts == ("recall.lan", "10.1.2.3")
    assert check_bind("10.1.2.3", "t", "recall serve", hosts) == (
        "warning: recall serve listens on 10.1.2.3, not loopback: every request needs "
        "Authorization: Bearer <serve.token> and a Host in ['10.1.2.3', 'recall.lan'] "
        "(serve.allowed_hosts); put TLS in front of it to keep the token off the wire"
    )
    assert allowed_hosts("0.0.0.0") == ("localhost", "127.0.0.1", "::1")


def test_recall_serve_refuses_a_public_bind_without_a_token(tmp_path):
    argv = [sys.executable, "-m", "pipeline.cli.main", "serve", "data=sample", "embed=hashing"]
    argv += ["device=cpu", f"cache_dir={tmp_path}", f"out_dir={tmp_path}", "host=0.0.0.0"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "RECALL_SERVE_TOKEN"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: recall serve: serve.host=0.0.0.0 is not loopback: any machine that reaches it "
        "could read the notes; set serve.token=<secret> (or RECALL_SERVE_TOKEN; clients send "
        "'Authorization: Bearer <secret>'), or bind host=127.0.0.1"
    ]
