"""``recall mcp``, driven by the official ``mcp`` SDK's own client: over stdio (the command spawned as
a subprocess) and over streamable HTTP (a real server on 127.0.0.1), the ``recall`` tool lists, a
precomputed query answers the cache's rows, a new one the rows of a batch run of it alone, a bad
argument is a tool error of one line and the server keeps answering; a bind off loopback needs
``serve.token``."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import polars as pl
import pytest
from mcp import Client, StdioServerParameters
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pipeline.contract.errors import ConfigError
from pipeline.contract.registry import call_target
from pipeline.run import precompute
from pipeline.serve import RecallCache
from pipeline.serve.access import BearerGate, check_bind, is_loopback
from tests.helpers.paths import REPO, SHARED_DATA
from tests.helpers.serve_support import config, reference, rows_of
from tests.serve.test_serve_http import _listening

HIT = "Where in Vault do I generate the new password for the dbt service account on Trino?"
MISS = "which dashboards break when the orders connector lags?"
RECIPE = ["data=sample", "k=10"]  # serve_support.config adds the rest of CLI below
CLI = [*RECIPE, "device=cpu", "embed=hashing", f"data_dir={SHARED_DATA}", "serve.check_interval=0"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(config, the precomputed entry of HIT, the batch run's rows of MISS alone, the CLI args)."""
    tmp = tmp_path_factory.mktemp("mcp")
    cfg = config(tmp, *RECIPE)
    precompute.precompute(cfg)
    entry = RecallCache(cfg.cache_dir).get(HIT)
    assert entry is not None and len(entry["rows"]) == 10
    ds = call_target(cfg.data)
    alone = ds.part(pl.DataFrame({"query_id": ["m"], "text": [MISS]}))
    ref, _inj = reference(cfg, tmp, "miss-alone", dataset=alone)
    args = [*CLI, f"cache_dir={cfg.cache_dir}", f"out_dir={tmp / 'mcp-out'}"]
    return cfg, entry, rows_of(ref, "m"), args


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _same_rows(got: list[dict], want_rows: list[dict], want_scores: pl.Series) -> None:
    """``got`` (the tool's rows) holds ``want_rows``' ids, doc ids, titles and texts in order and
    their scores bit for bit at the reference's float width."""
    assert [r["id"] for r in got] == [r["node_id"] for r in want_rows]
    for field in ("doc_id", "title", "text"):
        assert [r[field] for r in got] == [r[field] for r in want_rows], field
    width = np.float32 if want_scores.dtype == pl.Float32 else np.float64
    a = np.array([r["score"] for r in got], dtype=width)
    b = want_scores.to_numpy().astype(width)
    assert np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


async def _session(client: Client, entry: dict, miss: pl.DataFrame) -> None:
    """The checks every transport passes, on one connected client."""
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["recall"]
    schema = tools[0].input_schema
    assert schema["required"] == ["query"] and set(schema["properties"]) == {"query", "scope", "k"}

    hit = await client.call_tool("recall", {"query": HIT, "k": 4})
    assert not hit.is_error and hit.structured_content["cache"] == "hit"
    rows = entry["rows"][:4]
    _same_rows(hit.structured_content["rows"], rows, pl.Series([r["score"] for r in rows]))
    assert hit.structured_content["rows"][0]["id"] == rows[0]["node_id"]  # nothing reordered
    assert json.loads(hit.content[0].text) == hit.structured_content  # the same JSON as text

    new = await client.call_tool("recall", {"query": MISS, "k": 10})
    assert not new.is_error and new.structured_content["cache"] == "miss"
    want = miss.to_dicts()
    _same_rows(new.structured_content["rows"], want, miss["score"])
    again = await client.call_tool("recall", {"query": MISS, "k": 3})
    assert again.structured_content == {"rows": new.structured_content["rows"][:3], "cache": "hit"}

    for args, names in [
        ({"query": HIT, "k": 0}, "'k'=0"),
        ({"query": HIT, "k": "3"}, "'k'='3'"),
        ({"query": HIT, "scope": "no-such-folder"}, "['no-such-folder']"),
        ({"query": HIT, "scope": "../etc"}, "'../etc'"),
        ({"query": "  "}, "'query'"),
        ({"k": 3}, "'query'"),
        ({"query": HIT, "limit": 3}, "['limit']"),
    ]:
        bad = await client.call_tool("recall", args)
        assert bad.is_error and bad.structured_content is None, args
        text = bad.content[0].text
        assert names in text and "\n" not in text and "Traceback" not in text, (args, text)
    after = await client.call_tool("recall", {"query": HIT, "k": 1})  # still answering
    assert after.structured_content["rows"][0]["id"] == entry["rows"][0]["node_id"]


def test_stdio_with_the_sdk_client(built):
    _cfg, entry, miss, args = built
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pipeline", "mcp", *args], env=_env(), cwd=str(REPO)
    )

    async def main():
        async with Client(params, read_timeout_seconds=120) as client:
            await _session(client, entry, miss)

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], port: int, *extra: str) -> subprocess.Popen:
    """``recall mcp transport=http`` on ``port``, once it answers HTTP."""
    cmd = [sys.executable, "-m", "pipeline", "mcp", *args, "transport=http", f"port={port}"]
    proc = subprocess.Popen(
        [*cmd, *extra], cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=5)
            return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(proc.stderr.read().decode())


def _stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    proc.wait(timeout=30)
    return proc.stderr.read().decode()


def test_streamable_http_with_the_sdk_client_on_loopback(built):
    _cfg, entry, miss, args = built
    port = _free_port()
    proc = _start(args, port)
    try:
        assert _listening(port) == ["0100007F"]  # 127.0.0.1, and nothing else

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as client:
                await _session(client, entry, miss)

        asyncio.run(main())
        # the SDK's DNS-rebinding guard on a loopback bind: another Host is refused
        evil = httpx.post(
            f"http://127.0.0.1:{port}/mcp", headers={"host": "evil.example"}, json={}, timeout=5
        )
        assert evil.status_code == 421
        page = httpx.post(
            f"http://127.0.0.1:{port}/mcp", headers={"origin": "http://evil.example"}, json={}
        )
        assert page.status_code == 403  # a web page's request (its Origin) is refused too
        form = httpx.post(f"http://127.0.0.1:{port}/mcp", content=b"{}", timeout=5)
        assert form.status_code == 400  # a POST that is not application/json: no simple CORS
    finally:
        err = _stop(proc)
    assert f"http://127.0.0.1:{port}/mcp" in err and "warning" not in err


def test_a_bind_off_loopback_needs_a_token(built):
    _cfg, _entry, _miss, args = built
    cmd = [sys.executable, "-m", "pipeline", "mcp", *args, "transport=http", "host=0.0.0.0"]
    got = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: recall mcp: serve.host=0.0.0.0 is not")
    assert "serve.token" in lines[0]


def test_with_a_token_every_request_needs_it(built):
    _cfg, entry, _miss, args = built
    port = _free_port()
    proc = _start(args, port, "host=0.0.0.0", "++serve.token=s3cret")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret"}):
            got = httpx.post(url, headers=headers, json={}, timeout=5)
            assert got.status_code == 401 and "\n" not in got.text and "error" in got.json()
        import httpx2
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def main():
            auth = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=120)
            async with auth, streamable_http_client(url, http_client=auth) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    got = await session.call_tool("recall", {"query": HIT, "k": 2})
                    assert [r["id"] for r in got.structured_content["rows"]] == [
                        r["node_id"] for r in entry["rows"][:2]
                    ]

        asyncio.run(main())
    finally:
        err = _stop(proc)
    assert "warning: recall mcp listens on 0.0.0.0" in err


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback
    if loopback:
        assert check_bind(host, None, "x") is None
    else:
        with pytest.raises(ConfigError, match="serve.token"):
            check_bind(host, None, "x")
        assert check_bind(host, "t", "x").startswith(f"warning: x listens on {host}")


def test_the_bearer_gate_in_front_of_an_app():
    async def ok(_request):
        return PlainTextResponse("ok")

    gate = BearerGate(Starlette(routes=[Route("/", ok)]), "t0k")

    async def main():
        transport = httpx.ASGITransport(app=gate)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            assert (await client.get("/")).status_code == 401
            assert (
                await client.get("/", headers={"authorization": "Bearer t0"})
            ).status_code == 401
            assert (
                await client.get("/", headers={"authorization": "Bearer t0kk"})
            ).status_code == 401
            good = await client.get("/", headers={"authorization": "Bearer t0k"})
            assert good.status_code == 200 and good.text == "ok"

    asyncio.run(main())


def test_nothing_reaches_stdout_while_the_service_loads():
    """A stdio client reads stdout as the protocol: output of Python or of C code during the load
    goes to stderr instead, and stdout is back afterwards."""
    code = (
        "import os\n"
        "from pipeline.cli.mcp_command import stdout_to_stderr\n"
        "with stdout_to_stderr():\n"
        "    print('from python')\n"
        "    os.write(1, b'from a file descriptor\\n')\n"
        "print('after', flush=True)\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert got.returncode == 0 and got.stdout == "after\n"
    assert got.stderr.splitlines() == ["from python", "from a file descriptor"]
