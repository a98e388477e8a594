"""ReMe's ``search`` / ``health_check`` actions (``pipeline/hooks/reme.py``) called as ReMe's Hermes
plugin calls them: ``integrations/hermes_agent/client.py`` ``ReMeHttpClient.call`` (agentscope-ai/ReMe
@ c8e12487) is not on PyPI, so ``reme_call`` below is its request and its checks, line for line:
POST ``{endpoint}/{action}`` with the JSON payload (``ensure_ascii=False``) and JSON
Accept/Content-Type headers, a non-object or ``success`` not true is an error; ``health`` needs
``metadata.health.healthy`` true. The plugin's ``prefetch`` sends ``{"query", "limit": 5}``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from starlette.testclient import TestClient

from pipeline.hooks.reme import MAX_BODY, add_routes, chunk
from tests.helpers.hooks_fakes import HIT, REME, ROWS_REME, FakeService, build_app, serving
from tests.helpers.paths import TESTS_DATA


def reme_call(endpoint: str, action: str, payload: dict | None = None) -> dict:
    body = json.dumps(payload or {}, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(
        f"{endpoint}/{action}",
        data=body,
        headers={"Accept": "application/json", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        result = json.loads(response.read().decode("utf-8", errors="replace"))
    assert isinstance(result, dict) and result.get("success") is True, result
    return result


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def app(service):
    app = build_app(service)
    add_routes(app, service)
    return app


def test_plugin_search_and_health(app, service):
    with serving(app) as url:
        endpoint = f"{url}/reme"  # the plugin's reme.json "endpoint"
        health = reme_call(endpoint, "health_check")
        found = reme_call(endpoint, "search", {"query": REME, "limit": 5})
        one = reme_call(endpoint, "search", {"query": REME, "limit": 1})
    assert health["metadata"]["health"]["healthy"] is True
    assert health["metadata"]["health"]["components"] == service.health()
    want = service.recall(REME, k=5, format="reme")  # two rows: the block of the whole entry
    assert found["answer"] == want["injection"].strip()  # what the plugin injects
    meta = found["metadata"]
    assert meta["counts"] == {"returned": 2, "cache": "hit"}
    assert meta["scope_version"] == "v1"
    # FileChunk dumps: path and lines from node_id "<path>#L<start>-L<end>", every score component
    assert meta["results"] == [
        {"id": "daily/2026-11-30.md#L3-L7", "path": "daily/2026-11-30.md", "start_line": 3,
         "end_line": 7, "text": "", "scores": {"score": 0.0113, "dense": 0.82, "lexical": 4.1}},
        {"id": "digest/deploys.md#L1-L4", "path": "digest/deploys.md", "start_line": 1,
         "end_line": 4, "text": "", "scores": {"score": 0.0098, "dense": 0.64, "lexical": 0.0}},
    ]  # fmt: skip
    assert [r["id"] for r in one["metadata"]["results"]] == ["daily/2026-11-30.md#L3-L7"]
    # limit 1: the block of the first row only (the entry's block covers both)
    assert (
        one["answer"]
        == want["injection"].split("\n", 2)[0] + "\n" + "text of " + ROWS_REME[0]["node_id"]
    )
    assert ("what did we decide about the deploy window", None, 5, "rows") in service.calls


def test_chunk_without_lines():
    row = {"node_id": "notes/a.md#2", "doc_id": "notes/a.md", "rank": 1, "score": 1, "text": "t",
           "pinned": True, "channel": "bm25"}  # fmt: skip
    assert chunk(row) == {"id": "notes/a.md#2", "path": "notes/a.md", "start_line": 0,
                          "end_line": 0, "text": "t", "scores": {"score": 1.0}}  # fmt: skip


def test_chunk_lines_are_the_rows_own_when_it_has_them():
    """A note of a workspace without ReMe's index: node id ``<path>#<section>``, the lines in its
    ``start_line``/``end_line`` columns (what the ``reme`` block's header ``path:5-5`` shows);
    they are lines, not scores."""
    row = {"node_id": "daily/a.md#intro", "doc_id": "daily/a.md", "rank": 1, "score": 0.5,
           "text": "t", "start_line": 5, "end_line": 5, "lexical": 2.0}  # fmt: skip
    assert chunk(row) == {"id": "daily/a.md#intro", "path": "daily/a.md", "start_line": 5,
                          "end_line": 5, "text": "t",
                          "scores": {"score": 0.5, "lexical": 2.0}}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"limit": 5}, 400, "Error: query cannot be empty"),
        ({"query": "  "}, 400, "Error: query cannot be empty"),
        ({"query": HIT, "limit": -1}, 400, "Error: limit must be a positive integer, got -1"),
        ({"query": HIT, "limit": "5"}, 400, "Error: limit must be a positive integer, got '5'"),
        ({"query": HIT, "limit": 0}, 400, "Error: limit must be a positive integer, got 0"),
        ({"query": HIT, "limit": False}, 400, "Error: limit must be a positive integer, got False"),
        ({"query": HIT, "limit": ""}, 400, "Error: limit must be a positive integer, got ''"),
        ({"query": HIT, "limit": []}, 400, "Error: limit must be a positive integer, got []"),
        ({"query": HIT, "min_score": "high"}, 400, "Error: min_score must be a finite number"),
        ({"query": HIT, "start_date": "2026-01-01"}, 400, "Error: ['start_date'] not supported"),
        ({"query": HIT, "scope": "../etc"}, 400, "scope='../etc': unknown scope"),
        ([HIT], 400, "Error: the body is not a JSON object"),
    ],
)
def test_bad_requests_are_4xx_one_line(app, body, status, message):
    r = TestClient(app).post("/reme/search", json=body)
    assert r.status_code == status
    assert r.json()["success"] is False and r.json()["answer"].startswith(message)
    assert "\n" not in r.json()["answer"]


def test_not_json_and_too_big(app):
    client = TestClient(app)
    r = client.post("/reme/search", content=b"{query", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["answer"].startswith("Error: the body is not JSON")
    big = json.dumps({"query": "x" * (MAX_BODY + 1)})
    r = client.post("/reme/search", content=big)
    assert r.status_code == 413 and r.json()["success"] is False


def test_plugin_sees_errors_as_failures(app):
    # ReMeHttpClient turns an HTTPError into ReMeServiceError(f"HTTP {code}: {detail}")
    with serving(app) as url, pytest.raises(urllib.error.HTTPError) as err:
        reme_call(f"{url}/reme", "search", {"query": ""})
    assert err.value.code == 400
    assert json.loads(err.value.read())["answer"] == "Error: query cannot be empty"


def test_unhealthy_service_reported():
    class Broken(FakeService):
        def health(self):
            raise RuntimeError("store gone\nsecond line")

    app = build_app(Broken())
    add_routes(app, Broken())
    r = TestClient(app).post("/reme/health_check")
    health = r.json()["metadata"]["health"]
    assert r.status_code == 200 and health["healthy"] is False
    assert health["components"] == {"error": "store gone"}


def test_a_5000_digit_limit_is_a_400_and_the_server_still_answers(app):
    """Python refuses to parse an integer of over 4,300 digits (a ValueError inside json.loads)."""
    client = TestClient(app)
    raw = b'{"query": "q", "limit": ' + b"9" * 5000 + b"}"
    r = client.post("/reme/search", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["answer"].startswith("Error: the body is not JSON")
    assert "\n" not in r.json()["answer"]
    assert client.post("/reme/search", json={"query": REME}).status_code == 200


def test_min_score_filters_before_the_limit_as_reme_does(app, service):
    """ROWS_REME scores 0.0113 and 0.0098: a floor of 0.01 keeps the first only; 0 or a negative
    floor keeps both (ReMe filters only when min_score > 0)."""
    client = TestClient(app)
    r = client.post("/reme/search", json={"query": REME, "min_score": 0.01})
    assert r.status_code == 200 and r.json()["success"] is True
    assert [c["id"] for c in r.json()["metadata"]["results"]] == ["daily/2026-11-30.md#L3-L7"]
    assert r.json()["answer"] == service.render(REME, ROWS_REME[:1], "reme")
    for floor in (0, -1, 0.0098):
        r = client.post("/reme/search", json={"query": REME, "min_score": floor})
        assert r.json()["metadata"]["counts"]["returned"] == 2, floor
    r = client.post("/reme/search", json={"query": REME, "min_score": 0.5})
    assert r.json() == {"answer": "", "success": True, "metadata": {
        "results": [], "counts": {"returned": 0, "cache": "hit"}, "scope_version": "v1"}}  # fmt: skip


def test_auto_memory_is_answered_and_records_nothing(app, service):
    payload = {"session_id": "hermes-default-s1-0", "messages": [
        {"name": "user", "role": "user", "content": "hi"}]}  # fmt: skip
    with serving(app) as url:
        got = reme_call(f"{url}/reme", "auto_memory", payload)
    assert got["metadata"] == {"recorded": False}
    assert service.calls == []  # nothing recalled, nothing written


def test_reme_header_prints_what_reme_prints():
    """ReMe's ``_format_scores``: ``score=`` alone unless both branches found something for the
    query, then ``vector=`` and ``keyword=`` (``-`` for a row one branch did not find)."""
    from pipeline.inject.reme import renderer

    text = renderer(None)
    one = {"node_id": "a.md#L1-L2", "doc_id": "a.md", "start_line": 1, "end_line": 2,
           "score": 0.5, "text": "A"}  # fmt: skip
    assert text([{**one, "lexical": 2.0}]) == "========== a.md:1-2 [score=0.5000] ==========\nA"
    both = [{**one, "dense": 0.25, "lexical": 2.0}, {**one, "doc_id": "b.md", "dense": None,
                                                      "lexical": 1.0, "text": "B"}]  # fmt: skip
    assert text(both).splitlines() == [
        "========== a.md:1-2 [score=0.5000 vector=0.2500 keyword=2.0000] ==========",
        "A",
        "========== b.md:1-2 [score=0.5000 vector=- keyword=1.0000] ==========",
        "B",
    ]


def test_chunk_lines_come_from_the_store_when_the_row_has_none():
    """The cache's rows carry no lines; the store's node table does (the header's ``:5-6``)."""
    import polars as pl

    from pipeline.hooks.reme import node_lines

    class Store:
        nodes = pl.DataFrame({"node_id": ["n.md#intro", "n.md#end"], "start_line": [5, None],
                              "end_line": [6, None]})  # fmt: skip

    class WithStore(FakeService):
        def current(self):
            return Store()

    lines = node_lines(WithStore(), ["n.md#intro", "n.md#end", "other"])
    assert lines == {"n.md#intro": (5, 6)}
    row = {"node_id": "n.md#intro", "doc_id": "n.md", "rank": 1, "score": 1.0, "text": "t"}
    assert (chunk(row, lines["n.md#intro"])["start_line"], chunk(row, (5, 6))["end_line"]) == (5, 6)
    assert node_lines(FakeService(), ["n.md#intro"]) == {}  # no store table: {}


REME_PLUGIN = TESTS_DATA / "reme_hermes_agent"
PLUGIN_SCRIPT = """
import json, logging, sys
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(f"{record.levelname} {record.getMessage()}")
logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.INFO)
from reme_hermes_agent import ReMeMemoryProvider
from agent.memory_provider import MemoryProvider
p = ReMeMemoryProvider()
p.initialize("s1", hermes_home=sys.argv[1], platform="cli")
answer = p.prefetch(sys.argv[2], session_id="s1")
p.sync_turn("what about the deploy window?", "Fridays are frozen.", session_id="s1")
p.shutdown()
print(json.dumps({"provider": isinstance(p, MemoryProvider), "answer": answer,
                  "warnings": [r for r in records if not r.startswith(("INFO", "DEBUG"))]}))
"""


def test_remes_own_hermes_plugin_recalls_and_records_without_a_warning(tmp_path, app, service):
    """ReMe's own provider (unmodified) in Hermes' ``MemoryProvider`` class: health check, the
    turn's ``search`` (the answer injected), ``sync_turn`` → ``auto_memory``, no warning."""
    from tests.hooks.test_hooks_hermes import hermes_path

    pkg = tmp_path / "pkgs" / "reme_hermes_agent"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "client.py"):
        shutil.copy(REME_PLUGIN / f"{name}.txt", pkg / name)
    home = tmp_path / "hermes"
    home.mkdir()
    path = os.pathsep.join(map(str, (pkg.parent, hermes_path())))
    with serving(app) as url:
        (home / "reme.json").write_text(json.dumps({"endpoint": f"{url}/reme"}))
        run = subprocess.run(
            [sys.executable, "-c", PLUGIN_SCRIPT, str(home), REME],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["provider"] is True and out["warnings"] == []
    assert out["answer"] == service.render(REME, ROWS_REME, "reme")  # limit 5 ≥ its 2 rows
    assert service.calls == [(REME, None, 5, "rows")]  # one search; auto_memory recalls nothing
