"""ReMe's ``search`` / ``health_check`` actions (``pipeline/hooks/reme.py``) called as ReMe's Hermes
plugin calls them: ``integrations/hermes_agent/client.py`` ``ReMeHttpClient.call`` (agentscope-ai/ReMe
@ c8e12487) is not on PyPI, so ``reme_call`` below is its request and its checks, line for line:
POST ``{endpoint}/{action}`` with the JSON payload (``ensure_ascii=False``) and JSON
Accept/Content-Type headers, a non-object or ``success`` not true is an error; ``health`` needs
``metadata.health.healthy`` true. The plugin's ``prefetch`` sends ``{"query", "limit": 5}``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from starlette.testclient import TestClient

from hooks_fakes import HIT, REME, ROWS_REME, FakeService, build_app, serving
from pipeline.hooks.reme import MAX_BODY, add_routes, chunk


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
        ({"query": HIT, "min_score": 0.2}, 400, "Error: ['min_score'] not supported"),
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
