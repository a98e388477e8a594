"""``recall serve`` under a second hostile look (issue 53's held-out attacks), against the real app
(uvicorn on 127.0.0.1 where the bytes on the wire matter, Starlette's TestClient elsewhere): one
request's bad field failing the misses batched with it, wrong JSON types in ``fields`` coerced
(``now: 1`` read as one microsecond after 1970), a note whose name is not UTF-8 (500 forever), a
partition rewritten with other column types (served as strings; the next precompute kept it), a
``CURRENT`` naming a generation that is not there, an error echoing a 100,000-entry scope, a
latin-1 charset, a header sent twice, ``Transfer-Encoding`` with ``Content-Length``, a body
trickled forever. Each: the status, one line of JSON, and the server answering afterwards."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import warnings

import polars as pl
import pytest
from starlette.testclient import TestClient

from pipeline.contract.errors import DataError, UserError
from pipeline.recallcache import keys, layout
from pipeline.run import precompute
from pipeline.serve import Service
from pipeline.serve.app import build_app
from pipeline.serve.guard import MAX_ERROR
from pipeline.serve.mcp_app import _error, recall_tool
from tests.helpers.hooks_fakes import serving
from tests.helpers.paths import TESTS_DATA
from tests.helpers.serve_support import QUERIES, notes_store, reference, rows_of, same_bits

HIT, OPS, TEAM = QUERIES
JSON_HEAD = {"Content-Type": "application/json"}


@pytest.fixture
def store(tmp_path):
    """(cfg, store folder, namespace folder): the notes store, precomputed."""
    cfg, folder = notes_store(tmp_path, "+serve.cache_check=0")
    res = precompute.precompute(cfg)
    return cfg, folder, layout.namespace_dir(cfg.cache_dir, res["namespace"])


@pytest.fixture
def client(store):
    """A TestClient of the served notes store (and its service, closed after)."""
    service = Service(store[0])
    yield TestClient(build_app(service), raise_server_exceptions=False)
    service.close()


def _one_line(got) -> str:
    """The message of a one-line ``{"error": ...}`` body."""
    assert "\n" not in got.text
    body = got.json()
    assert set(body) == {"error"}
    return body["error"]


def _body(q: dict) -> dict:
    return {"text": q["text"], **({"scope": q["doc_scope"]} if q.get("doc_scope") else {})}


# --- a request's own error stays its own ------------------------------------------------------


def test_a_bad_field_fails_only_its_own_request_not_its_batch_mates(store):
    """A stored query ``embedding`` the nodes cannot match is refused by the query path; before,
    the whole micro-batch failed with it (an innocent miss got the attacker's 400)."""
    cfg, _folder, _ns = store
    service = Service(cfg)
    try:
        state = service.current()
        bad = (state, "x", None, keys.query_key("x", {"embedding": [1.0]}), {"embedding": [1.0]})
        good = (state, TEAM["text"], ("team",), keys.text_key(TEAM["text"]), {})
        got = service._compute([bad, good])
        assert isinstance(got[0], UserError) and "stored embedding" in str(got[0])
        assert got[1]["rows"] and got[1]["rows"][0]["doc_id"] == "team/oncall.md"
        alone = service._compute([good])[0]
        assert got[1]["rows"] == alone["rows"]  # computed apart, the rows a batch of one has
    finally:
        service.close()


def test_two_concurrent_misses_one_bad_one_good_over_http(tmp_path):
    """The same over real HTTP: a 1 s batch window puts both requests in one batch."""
    cfg, _folder = notes_store(tmp_path, "serve.batch_window_ms=1000")
    service = Service(cfg)
    out: dict = {}

    def ask(name: str, body: dict, url: str) -> None:
        import http.client

        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("POST", "/recall", body=json.dumps(body), headers=JSON_HEAD)
        got = conn.getresponse()
        out[name] = (got.status, json.loads(got.read()))
        conn.close()

    bad = {"text": "x", "fields": {"embedding": [1.0, 2.0]}}
    try:
        with serving(build_app(service)) as url:
            threads = [threading.Thread(target=ask, args=(n, b, url))
                       for n, b in (("bad", bad), ("good", _body(TEAM)))]  # fmt: skip
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        assert out["bad"][0] == 400 and "stored embedding" in out["bad"][1]["error"]
        assert out["good"][0] == 200 and out["good"][1]["cache"] == "miss"
        assert out["good"][1]["rows"][0]["doc_id"] == "team/oncall.md"
    finally:
        service.close()


# --- fields: the contract's JSON types, never coerced -------------------------------------------

ISO = "an ISO 8601 date-time string, e.g. 2026-01-02T03:04:05Z"
WRONG_TYPES = [
    ({"now": 1733300000}, f"fields.now=1733300000: give {ISO}"),  # was 1970-01-01T00:28:53
    ({"now": True}, f"fields.now=true: give {ISO}"),  # was 1 µs after 1970
    ({"viewer": {"a": 1}}, 'fields.viewer={"a": 1}: give a string'),  # was the viewer "{1}"
    ({"viewer": True}, "fields.viewer=true: give a string"),  # was the viewer "true"
    ({"context": [{"a": 1}]}, 'fields.context=[{"a": 1}]: give a list of strings'),
    ({"context": [1, 2]}, "fields.context=[1, 2]: give a list of strings"),
    ({"team": 5}, "fields.team=5: give a string"),
    ({"agent_id": [1]}, "fields.agent_id=[1]: give a string"),
    ({"story_segment": True}, "fields.story_segment=true: give an integer"),
    ({"embedding": [1e39]}, "fields.embedding=[1e+39]: give a list of numbers within ±3.403e+38"),
]


@pytest.mark.parametrize("fields,message", WRONG_TYPES, ids=[str(f) for f, _m in WRONG_TYPES])
def test_a_field_of_another_json_type_is_a_400(client, fields, message):
    got = client.post("/recall", json={"text": HIT["text"], "fields": fields})
    assert got.status_code == 400 and _one_line(got) == message
    assert client.post("/recall", json=_body(HIT)).json()["cache"] == "hit"


def test_fields_of_their_own_types_are_read(client):
    """An ISO time, a list of strings and whole numbers in an embedding (read as floats) pass."""
    ok = {"now": "2026-01-02T03:04:05Z", "context": ["a", "b"], "story_segment": 3}
    assert client.post("/recall", json={"text": HIT["text"], "fields": ok}).status_code == 200
    got = client.post("/recall", json={"text": "x", "fields": {"embedding": [1, 2.5]}})
    assert got.status_code == 400 and "stored embedding" in _one_line(got)  # typed, then the path


# --- the store and the cache ---------------------------------------------------------------------


def test_a_note_name_that_is_not_utf8_is_a_503_then_answers(store):
    """Before: every request and /health a 500 (UnicodeEncodeError) until the file was gone, and
    a service started over such a store a traceback."""
    cfg, folder, _ns = store
    service = Service(cfg)
    client = TestClient(build_app(service), raise_server_exceptions=False)
    bad = folder / "ops" / os.fsdecode(b"caf\xe9.md")
    try:
        bad.write_text("# Cafe\n\nLatin-1 file name.\n")
        want = (
            r"the store cannot be read (ops/caf\xe9.md: the file name is not valid UTF-8; fix: "
            "rename it in UTF-8); it is answered once it reads"
        )
        for got in (client.post("/recall", json=_body(HIT)), client.get("/health")):
            assert got.status_code == 503 and _one_line(got) == want
        with pytest.raises(DataError, match="the file name is not valid UTF-8"):
            Service(cfg)
        bad.rename(folder / "ops" / "cafe.md")
        got = client.post("/recall", json=_body(HIT))
        assert got.status_code == 200 and got.json()["rows"]
    finally:
        service.close()


def _retyped(path) -> None:
    """The partition rewritten as valid Parquet with every non-list column a string."""
    frame = pl.read_parquet(path)
    frame.with_columns(pl.col(c).cast(pl.String) for c, t in frame.schema.items()
                       if not isinstance(t, pl.List)).write_parquet(path)  # fmt: skip


def test_a_partition_rewritten_with_other_types_is_a_miss_and_the_next_precompute_repairs_it(
    store,
):
    """Before: its entries were hits whose rank and score were strings ("1", "67.37…"), and the
    next precompute hard-linked the file into the new generation (its manifest then vouched for
    it)."""
    cfg, _folder, ns_dir = store
    first = Service(cfg)
    try:
        want = {q["query_id"]: first.recall(**_kw(q))["rows"] for q in QUERIES}
    finally:
        first.close()
    gen = ns_dir / layout.current(ns_dir)
    team = keys.scope_id(("team",))
    _retyped(gen / f"scope={team}" / "data.parquet")
    with pytest.warns(UserWarning, match=rf"scope={team}/data.parquet does not read \(not the"):
        service = Service(cfg)
        got = {q["query_id"]: service.recall(**_kw(q)) for q in QUERIES}
    try:
        for q in QUERIES:
            body = got[q["query_id"]]
            assert body["rows"] == want[q["query_id"]]
            assert isinstance(body["rows"][0]["rank"], int)
            assert body["cache"] == ("miss" if q is TEAM else "hit")
        with pytest.warns(UserWarning, match="a partition does not read \\(not the file its"):
            res = precompute.precompute(cfg)
        assert res["misses"] == len(QUERIES)
        new = ns_dir / res["generation"] / f"scope={team}" / "data.parquet"
        assert pl.read_parquet(new).schema["rank"] == pl.Int32
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert service.recall(**_kw(TEAM))["cache"] == "hit"
    finally:
        service.close()


def _kw(q: dict) -> dict:
    return {"text": q["text"], "scope": q.get("doc_scope")}


def test_a_partition_not_in_the_manifest_is_left_out(store):
    """A ``scope=…`` folder added by hand (not one the build wrote) is never read."""
    cfg, _folder, ns_dir = store
    gen = ns_dir / layout.current(ns_dir)
    src = next(gen.glob("scope=*/data.parquet"))
    (gen / "scope=added").mkdir()
    (gen / "scope=added" / "data.parquet").write_bytes(src.read_bytes())
    with pytest.warns(UserWarning, match="scope=added/data.parquet does not read"):
        service = Service(cfg)
        assert len(service.cache) == len(QUERIES)  # not one more
    service.close()


def test_current_naming_a_missing_generation_serves_misses_and_says_so(store):
    """Before: /health named the missing generation as the live one."""
    cfg, _folder, ns_dir = store
    (ns_dir / "CURRENT").write_text("g-000099\n")
    service = Service(cfg)
    client = TestClient(build_app(service), raise_server_exceptions=False)
    try:
        got = client.post("/recall", json=_body(HIT))
        assert got.status_code == 200 and got.json()["cache"] == "miss"
        health = client.get("/health").json()
        assert health["generation"] is None and health["entries"] == 0
    finally:
        service.close()


# --- error lines stay short ---------------------------------------------------------------------


def test_an_error_never_echoes_a_huge_request(client):
    """A 404 for 100,000 scope entries was a 988,935-byte error line."""
    scopes = [f"s{i}" for i in range(100_000)]
    got = client.post("/recall", json={"text": "x", "scope": scopes})
    assert got.status_code == 404 and len(got.content) <= MAX_ERROR * 3 + 20
    assert _one_line(got).startswith("scope ['s0', 's1', ") and _one_line(got).endswith("…")
    got = client.post("/recall", json={"text": "x", "fields": {f"f{i}": 1 for i in range(50_000)}})
    assert got.status_code == 400 and len(got.content) <= MAX_ERROR * 3 + 20
    assert client.post("/recall", json=_body(HIT)).json()["cache"] == "hit"


def test_an_mcp_tool_error_is_one_short_line_without_paths():
    got = _error("scope " + "x" * 10_000 + " at /home/someone/notes/ops/a.md")
    text = got.content[0].text
    assert got.is_error and len(text) == MAX_ERROR and text.endswith("…")
    assert "/home" not in _error("cannot read /home/someone/notes/a.md").content[0].text


# --- the head of a request ----------------------------------------------------------------------


@pytest.mark.parametrize("charset", ["latin-1", "utf-16", '"iso-8859-1"'])
def test_a_charset_other_than_utf8_is_a_415(client, charset):
    """Before: accepted, and the body decoded as UTF-8 whatever the header said."""
    head = {"Content-Type": f"application/json; charset={charset}"}
    got = client.post("/recall", content=json.dumps(_body(HIT)).encode(), headers=head)
    assert got.status_code == 415
    assert _one_line(got).startswith(f"charset={charset.strip(chr(34))} is not read; send")
    head = {"Content-Type": "application/json; charset=UTF-8"}
    got = client.post("/recall", content=json.dumps(_body(HIT)).encode(), headers=head)
    assert got.status_code == 200 and got.json()["cache"] == "hit"


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    """The base URL of the notes store on uvicorn (127.0.0.1), bodies allowed 1 s to arrive."""
    cfg, _folder = notes_store(tmp_path_factory.mktemp("wire"))
    precompute.precompute(cfg)
    service = Service(cfg)
    with serving(build_app(service, body_seconds=1.0)) as url:
        yield url
    service.close()


def _exchange(url: str, data: bytes) -> bytes:
    """The server's whole answer to the raw bytes ``data`` (read until it closes or 30 s)."""
    host, port = url.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        while b"\r\n\r\n" not in got or not got.split(b"\r\n\r\n", 1)[1]:
            part = s.recv(65536)
            if not part:
                break
            got += part
    return got


def _parts(raw: bytes) -> tuple[bytes, bytes, str]:
    head, body = raw.split(b"\r\n\r\n", 1)
    status = head.split(b"\r\n", 1)[0]
    assert b"\n" not in body
    return status, head.lower(), json.loads(body)["error"]


BODY = json.dumps(_body(HIT)).encode()
HEAD = b"POST /recall HTTP/1.1\r\nHost: 127.0.0.1\r\n"
TWICE = [
    ("content-type twice", HEAD + b"Content-Type: text/plain\r\nContent-Type: application/json\r\n"
     b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY, "header content-type sent more than once"),
    ("authorization twice", HEAD + b"Authorization: Bearer a\r\nAuthorization: Bearer b\r\n"
     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY,
     "header authorization sent more than once"),
    ("transfer-encoding and content-length", HEAD + b"Content-Type: application/json\r\n"
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(BODY) + BODY
     + b"\r\n0\r\n\r\n", "both Transfer-Encoding and Content-Length sent"),
]  # fmt: skip


@pytest.mark.parametrize("case", TWICE, ids=[c[0] for c in TWICE])
def test_a_header_sent_twice_is_a_400_and_the_connection_closes(wire, case):
    """Before: 200; the guard checked the last Content-Type while a route reads the first."""
    _name, data, message = case
    status, head, error = _parts(_exchange(wire, data))
    assert status == b"HTTP/1.1 400 Bad Request" and error.startswith(message)
    assert b"connection: close" in head
    status, _head, _e = _parts(_exchange(wire, HEAD + b"Content-Type: application/json\r\n"
                                         b"Content-Length: 3\r\n\r\n{\"}"))  # fmt: skip
    assert status == b"HTTP/1.1 400 Bad Request"  # the server answers the next connection


def test_a_body_that_never_finishes_is_a_408(wire):
    """Content-Length 100, one byte sent: before, the connection (and a worker) waited forever."""
    raw = _exchange(wire, HEAD + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    status, head, error = _parts(raw)
    assert status == b"HTTP/1.1 408 Request Timeout" and b"connection: close" in head
    assert error == "the body did not arrive within 1 s; send it at once"
    raw = _exchange(wire, HEAD + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    % len(BODY) + BODY)  # fmt: skip
    assert raw.startswith(b"HTTP/1.1 200 OK")


# --- text that is not UTF-8, on every path ------------------------------------------------------


def test_a_lone_surrogate_is_one_line_in_mcp_and_the_python_api(client):
    """Before: MCP's tool answered "internal error (UnicodeEncodeError)" (no guard parses its
    JSON), as did ``Service.recall``."""
    service = client.app.state.service
    with pytest.raises(UserError) as got:
        recall_tool(service, {"query": "a\ud800"})
    assert str(got.value) == "argument 'query' 'a\\\\ud800' is not valid UTF-8 text; send UTF-8"
    with pytest.raises(UserError, match="scope entry 'x\\\\\\\\udfff' is not valid UTF-8"):
        recall_tool(service, {"query": "a", "scope": ["x\udfff"]})
    assert recall_tool(service, {"query": HIT["text"]})["cache"] == "hit"


def test_recall_lookup_with_a_non_utf8_argument_is_one_error_line(store):
    """Before: Hydra's UnicodeEncodeError and 'Set the environment variable HYDRA_FULL_ERROR'."""
    cfg, _folder, _ns = store
    argv = [sys.executable, "-m", "pipeline.cli.main", "lookup", "data=workspace"]
    argv += [f"data.path={cfg.data.path}", f"data.queries={cfg.data.queries}", "k=5"]
    argv += ["embed=hashing", "device=cpu", f"cache_dir={cfg.cache_dir}", f"out_dir={cfg.out_dir}"]
    out = subprocess.run([*argv, os.fsdecode(b"text=caf\xe9")], capture_output=True, timeout=300)
    assert out.returncode == 2 and out.stdout == b""
    assert out.stderr.decode().splitlines() == [
        "error: text= 'caf\\\\udce9' is not valid UTF-8 text; send UTF-8"
    ]


def test_an_oks_settings_file_linked_outside_the_store_is_refused(tmp_path):
    """``settings/recall.yaml`` was the one OKS file read through a symbolic link: a link to a
    file outside the instance was read, and its YAML error (quoting a line of that file) became
    the service's 503 body."""
    from pipeline.adapters import oks

    root = tmp_path / "inst"
    shutil.copytree(TESTS_DATA / "oks_store", root)
    (tmp_path / "outside.txt").write_text("root:$6$secret-hash:19000:0\n")
    (root / "settings" / "recall.yaml").unlink(missing_ok=True)
    (root / "settings" / "recall.yaml").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(DataError) as got:
        oks.load(str(root), queries=str(root / "queries.jsonl"))
    assert str(got.value) == (
        f"{root}/settings/recall.yaml: is a symbolic link; store files are read only inside the "
        "store; fix: replace it with the real file or folder"
    )


def test_a_fifo_in_a_reme_index_is_one_error_line_not_a_hang(tmp_path):
    """ReMe's embedding cache (``metadata/embedding_store/*.npz``) was opened whatever it was: a
    FIFO there blocked the load forever (in ``recall serve``, the reload held the service's lock,
    so every request and ``/health`` waited). The load runs in a thread; a reader left blocked is
    released by opening the FIFO's other end."""
    from pipeline.adapters import reme
    from tests.adapters.test_adapter_reme import build

    build(tmp_path)
    npz = next((tmp_path / "metadata" / "embedding_store").glob("*.npz"))
    npz.unlink()
    os.mkfifo(npz)
    got: dict = {}

    def load() -> None:
        try:
            reme.load(str(tmp_path))
        except DataError as exc:
            got["error"] = str(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():  # the old code: unblock the reader so the thread ends
        os.close(os.open(npz, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
    assert got.get("error") == (
        f"{npz}: not a regular file; fix: replace it with the file it should be"
    )


def test_a_scope_not_seen_yet_is_never_hashed_on_the_event_loop(tmp_path):
    """``compute=False`` (the event loop) used to hash a new scope's version in place: a
    100,000-entry scope held the loop, and every other client, for 0.7 s. Now it is deferred to
    a worker thread like a miss, and a scope seen once is a hit on the loop (no store or pointer
    check due within the hour)."""
    cfg, _folder = notes_store(tmp_path, "serve.check_interval=3600", "+serve.cache_check=3600")
    precompute.precompute(cfg)
    service = Service(cfg)
    try:
        assert service.recall(OPS["text"], ["ops"], compute=False) is None
        assert service.recall(OPS["text"], ["ops"])["cache"] == "hit"
        assert service.recall(OPS["text"], ["ops"], compute=False)["cache"] == "hit"
        assert service.recall("x", [f"s{i}" for i in range(1000)], compute=False) is None
    finally:
        service.close()


def test_a_viewer_asking_for_a_scope_only_they_may_see_gets_the_batch_answer(tmp_path):
    """The 404 check saw only the notes without a ``visibility`` list: alice asking within
    ``secret/`` (hers) got "no node's doc_id is in it" where ``recall run`` of the same query
    answers her note. Now her rows equal the run's bit for bit, while a request without a viewer,
    or bob's, is still the 404 of a scope that names nothing, whoever asked before."""
    cfg, _folder = notes_store(tmp_path)
    q = {"query_id": "q-alice", "text": "merger plan", "doc_scope": ["secret"], "viewer": "alice"}
    (tmp_path / "queries.jsonl").write_text(json.dumps(q) + "\n")
    want, _inj = reference(cfg, tmp_path, "ref")
    service = Service(cfg)
    client = TestClient(build_app(service), raise_server_exceptions=False)
    try:
        body = {"text": q["text"], "scope": "secret", "fields": {"viewer": "alice"}}
        got = client.post("/recall", json=body)
        assert got.status_code == 200
        same_bits(got.json()["rows"], rows_of(want, "q-alice"))
        assert [r["doc_id"] for r in got.json()["rows"]] == ["secret/plan.md"]
        for other in ({"viewer": "bob"}, None):
            got = client.post("/recall", json={**body, "fields": other})
            assert got.status_code == 404
            assert _one_line(got) == "scope ['secret']: no node's doc_id is in it"
    finally:
        service.close()
