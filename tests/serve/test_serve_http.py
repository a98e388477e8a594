"""``recall serve`` over HTTP: the response body, a 4xx with one line of JSON for every bad request
(never a 500), ``recall lookup``, and a real uvicorn bound to 127.0.0.1 by default."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest
from starlette.testclient import TestClient

from pipeline.cli.serve import empty_namespace_warning
from pipeline.contract.registry import call_target
from pipeline.run import precompute
from pipeline.serve import Service
from pipeline.serve.app import MAX_BODY, build_app
from tests.helpers.serve_support import config

TEXT = "Where in Vault do I generate the new password for the dbt service account on Trino?"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("http")
    cfg = config(tmp, "data=sample", "k=10")
    precompute.precompute(cfg)
    service = Service(cfg)
    with TestClient(build_app(service), raise_server_exceptions=False) as client:
        yield cfg, service, client
    service.close()


def test_a_hit_over_http_is_the_cached_entry(served):
    cfg, service, client = served
    got = client.post("/recall", json={"text": TEXT, "k": 4})
    assert got.status_code == 200
    body = got.json()
    entry = service.cache.get(TEXT)
    assert body == {
        "rows": entry["rows"][:4],
        "injection": None,
        "cache": "hit",
        "scope_version": entry["scope_version"],
    }
    assert [r["rank"] for r in body["rows"]] == [1, 2, 3, 4]
    assert {"node_id", "doc_id", "rank", "score", "dense", "lexical", "channel"} <= set(
        body["rows"][0]
    )
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["namespace"] == service.namespace
    assert health["entries"] == call_target(cfg.data).queries.height


BAD = [
    ("missing text", {"json": {"k": 3}}, 400),
    ("empty text", {"json": {"text": "  \r\n"}}, 400),
    ("text not a string", {"json": {"text": 3}}, 400),
    ("k zero", {"json": {"text": TEXT, "k": 0}}, 400),
    ("k negative", {"json": {"text": TEXT, "k": -2}}, 400),
    ("k a string", {"json": {"text": TEXT, "k": "3"}}, 400),
    ("k a bool", {"json": {"text": TEXT, "k": True}}, 400),
    ("unknown format", {"json": {"text": TEXT, "format": "xml"}}, 400),
    ("unknown field", {"json": {"text": TEXT, "limit": 3}}, 400),
    ("scope with ../", {"json": {"text": TEXT, "scope": "../etc"}}, 400),
    ("scope absolute", {"json": {"text": TEXT, "scope": "/etc/passwd"}}, 400),
    ("scope a number", {"json": {"text": TEXT, "scope": 7}}, 400),
    ("unknown scope", {"json": {"text": TEXT, "scope": "no-such-folder"}}, 404),
    (
        "invalid JSON",
        {"content": b'{"text": "a",', "headers": {"content-type": "application/json"}},
        400,
    ),
    (
        "not UTF-8",
        {"content": b'{"text": "\xff"}', "headers": {"content-type": "application/json"}},
        400,
    ),
    (
        "not application/json",
        {"content": b'{"text": "a"}', "headers": {"content-type": "text/plain"}},
        415,
    ),
    ("a JSON list", {"json": [TEXT]}, 400),
    ("10 MB body", {"content": b'{"text": "' + b"a" * (10 << 20) + b'"}'}, 413),
]


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_a_bad_request_gets_a_4xx_with_one_line_of_json(served, case):
    _cfg, _service, client = served
    _name, kwargs, status = case
    got = client.post("/recall", **kwargs)
    assert got.status_code == status
    assert got.headers["content-type"] == "application/json"
    assert "\n" not in got.text and set(got.json()) == {"error"} and got.json()["error"]


def test_a_body_over_the_limit_without_a_length_is_refused(served):
    _cfg, _service, client = served

    def chunks():
        for _ in range(MAX_BODY // 65536 + 2):
            yield b"a" * 65536

    got = client.post("/recall", content=chunks())
    assert got.status_code == 413 and "\n" not in got.text


def test_unknown_route_and_method_are_json_4xx(served):
    _cfg, _service, client = served
    assert client.get("/nope").status_code == 404 and "error" in client.get("/nope").json()
    assert client.get("/recall").status_code == 405


def _cli(cfg, cmd, *extra) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline.cli.main",
        cmd,
        "data=sample",
        "embed=hashing",
        "device=cpu",
        "k=10",
        f"cache_dir={cfg.cache_dir}",
        f"out_dir={cfg.out_dir}",
        *extra,
    ]


def test_recall_lookup_prints_the_entry_as_json(served):
    cfg, service, _client = served
    out = subprocess.run(_cli(cfg, "lookup", f"text={TEXT}\r\n"), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = service.cache.get(TEXT)
    assert got["rows"] == want["rows"] and got["text_key"] == want["text_key"]
    miss = subprocess.run(_cli(cfg, "lookup", "text=never asked"), capture_output=True, text=True)
    assert miss.returncode == 1 and miss.stdout == ""


def _listening(port: int) -> list[str]:
    """Local addresses (hex ip:port as /proc/net/tcp writes them) listening on ``port``."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                out.append(local.rsplit(":", 1)[0])
    return out


def test_recall_serve_binds_127_0_0_1_by_default(served):
    cfg, _service, _client = served
    assert cfg.serve.host == "127.0.0.1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        _cli(cfg, "serve", f"port={port}"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline, got = time.time() + 120, None
        while time.time() < deadline and proc.poll() is None:
            try:
                got = httpx.post(f"http://127.0.0.1:{port}/recall", json={"text": TEXT}, timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert got is not None and got.status_code == 200, proc.stderr.read1().decode()
        assert got.json()["cache"] == "hit"
        assert _listening(port) == ["0100007F"]  # 127.0.0.1, and nothing else
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "warning" not in proc.stderr.read().decode()  # its namespace was precomputed


def test_serve_warns_when_its_namespace_was_never_precomputed():
    """The overrides of ``recall serve`` name a namespace the cache lacks (e.g. no
    ``data.queries`` where the precompute had one): one warning line naming both, none when the
    namespace is there."""
    assert empty_namespace_warning(["notes-aaa"], "notes-aaa", "/c") is None
    assert empty_namespace_warning(["notes-aaa"], "notes-bbb", "/c") == (
        "warning: /c: no recall cache namespace 'notes-bbb' (there: ['notes-aaa']); every request "
        "is computed as a miss until recall precompute runs with the same overrides (or pass "
        "namespace=<one of them>)"
    )


def test_lookup_refuses_an_entry_of_another_code_version(served, monkeypatch, capsys):
    from pipeline.cli import serve
    from pipeline.core import version

    cfg, service, _client = served
    assert serve.lookup(cfg, {"text": [TEXT]}) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == service.cache.get(TEXT)["rows"]
    monkeypatch.setattr(version, "code_version", lambda: "0.0.0+another")  # an upgrade, no rerun
    assert serve.lookup(cfg, {"text": [TEXT]}) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "another code version" in captured.err


def test_the_service_misses_entries_of_another_code_version(served, monkeypatch):
    from pipeline.core import version

    cfg, service, _client = served
    hit = service.recall(TEXT)
    monkeypatch.setattr(version, "code_version", lambda: "0.0.0+another")
    upgraded = Service(cfg)
    try:
        got = upgraded.recall(TEXT)
        assert got["cache"] == "miss" and got["rows"] == hit["rows"]  # recomputed, same answer
    finally:
        upgraded.close()
