"""``recall serve`` over a broken cache or store, against the real app: a missing or garbled
``CURRENT``, a truncated partition (and the precompute after it), an unreadable note or folder, a
permission change, a FIFO named ``*.md``, files the recall does not read (OKS's per-prompt
writes), a hidden scope, distinct scopes without bound, a killed pointer write. Each answer is a
status and one line of JSON (or the right rows), and the server answers afterwards.

The test process may run as root, which reads any file whatever its mode: ``unreadable`` makes
a mode-000 file or folder fail as the kernel fails it for its owner (``PermissionError``)."""

from __future__ import annotations

import builtins
import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from pipeline.recallcache import layout
from pipeline.run import precompute
from pipeline.serve import Service
from pipeline.serve.app import build_app
from tests.helpers.paths import TESTS_DATA
from tests.helpers.serve_support import QUERIES, config, notes_store

HIT, OPS, TEAM = QUERIES
JSON_HEAD = {"content-type": "application/json"}


@pytest.fixture
def store(tmp_path):
    """(cfg, store folder, namespace folder): the notes store, precomputed."""
    cfg, folder = notes_store(tmp_path)
    res = precompute.precompute(cfg)
    return cfg, folder, layout.namespace_dir(cfg.cache_dir, res["namespace"])


@pytest.fixture
def unreadable(monkeypatch):
    """Opening or listing a path whose mode has no read bit fails with PermissionError (the
    kernel's rule for a non-root owner), whoever runs the tests."""
    real_open, real_scandir = builtins.open, os.scandir

    def denied(path) -> bool:
        try:
            return isinstance(path, (str, Path)) and not os.stat(path).st_mode & 0o444
        except OSError:
            return False

    def guarded_open(file, *args, **kwargs):
        if denied(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def guarded_scandir(path="."):
        if denied(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(Path, "read_bytes", lambda self: _read(self, guarded_open))
    monkeypatch.setattr(os, "scandir", guarded_scandir)


def _read(path: Path, opener) -> bytes:
    with opener(path, "rb") as fh:
        return fh.read()


def _client(service) -> TestClient:
    return TestClient(build_app(service), raise_server_exceptions=False)


def _post(client, body: dict, path: str = "/recall"):
    got = client.post(path, json=body)
    assert "\n" not in got.text
    return got.status_code, got.json()


def _ask(client, q: dict):
    body = {"text": q["text"], **({"scope": q["doc_scope"]} if q.get("doc_scope") else {})}
    return _post(client, body)


def test_a_missing_or_garbled_current_serves_misses(tmp_path):
    """No live generation: the first lookup is computed (then kept in memory), none is a 500."""
    cfg, _folder = notes_store(tmp_path, "+serve.cache_check=0")
    ns_dir = layout.namespace_dir(cfg.cache_dir, precompute.precompute(cfg)["namespace"])
    service = Service(cfg)
    client = _client(service)
    try:
        status, hit = _ask(client, HIT)
        assert status == 200 and hit["cache"] == "hit"
        for i, pointer in enumerate((None, b"g-zzz\n", b"\xff\xfe\x00garbage")):
            if pointer is None:
                (ns_dir / "CURRENT").unlink()
            else:
                (ns_dir / "CURRENT").write_bytes(pointer)
            status, got = _ask(client, HIT)
            assert status == 200 and got["rows"] == hit["rows"]
            assert got["cache"] == ("miss" if i == 0 else "hit")  # computed once, then in memory
            health = client.get("/health")
            assert health.status_code == 200 and health.json()["generation"] is None
    finally:
        service.close()


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_partition_is_a_miss_and_the_next_precompute_repairs_it(store):
    cfg, _folder, ns_dir = store
    gen = ns_dir / layout.current(ns_dir)
    want = {}
    first = Service(cfg)
    try:
        for q in QUERIES:
            want[q["query_id"]] = _ask(_client(first), q)[1]["rows"]
    finally:
        first.close()
    team = precompute.serve_keys.scope_id(("team",))
    _truncate(gen / f"scope={team}" / "data.parquet")
    with pytest.warns(UserWarning, match=rf"scope={team}/data.parquet does not read"):
        service = Service(cfg)
        client = _client(service)
        got = {q["query_id"]: _ask(client, q) for q in QUERIES}
    try:
        for q in QUERIES:  # the other scopes are hits, the damaged one a miss; rows unchanged
            status, body = got[q["query_id"]]
            assert status == 200 and body["rows"] == want[q["query_id"]]
            assert body["cache"] == ("miss" if q is TEAM else "hit")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the partitions are not read again per request
            assert _ask(client, HIT)[1]["cache"] == "hit"
        with pytest.warns(UserWarning, match="a partition does not read"):
            res = precompute.precompute(cfg)  # no traceback: the damaged generation is rebuilt
        assert res["generation"] == "g-000002" and res["misses"] == len(QUERIES)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fresh = Service(cfg)
        try:
            for q in QUERIES:
                status, body = _ask(_client(fresh), q)
                assert (status, body["cache"], body["rows"]) == (200, "hit", want[q["query_id"]])
        finally:
            fresh.close()
    finally:
        service.close()


def _broken(client, q: dict, *, where: str, root: Path) -> None:
    """``q`` and ``/health`` answer 503 with one line naming ``where`` (relative to the store),
    no absolute path; ReMe's search too, in its envelope."""
    status, body = _ask(client, q)
    assert status == 503 and where in body["error"], body
    assert str(root) not in body["error"] and " /" not in body["error"]
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["error"] == body["error"]
    status, reme = _post(client, {"query": q["text"]}, "/reme/search")
    assert status == 503 and reme["success"] is False and where in reme["answer"]


UNREADABLE = [  # (path made mode 000, its mode after, the queries asked, what the 503 names)
    ("ops/vault.md", 0o644, [HIT, HIT, HIT], "ops/vault.md"),  # a note: every request
    ("team", 0o755, [TEAM, OPS], "team: folder cannot be read"),  # before: dropped, a 404
]


@pytest.mark.parametrize("case", UNREADABLE, ids=["note", "folder"])
def test_an_unreadable_file_is_a_503_until_it_reads_again(store, unreadable, tmp_path, case):
    """A permission change alone (size and mtime kept) is noticed; never the old answer."""
    rel, mode, asked, where = case
    cfg, folder, _ns = store
    service = Service(cfg)
    client = _client(service)
    try:
        status, hit = _ask(client, asked[0])
        assert status == 200 and hit["cache"] == "hit"
        (folder / rel).chmod(0)
        for q in asked:
            _broken(client, q, where=where, root=tmp_path)
        (folder / rel).chmod(mode)
        status, got = _ask(client, asked[0])
        assert status == 200 and got["rows"] == hit["rows"]
    finally:
        service.close()


def test_a_fifo_named_md_is_a_503_not_a_hang(store, tmp_path):
    """A FIFO among the notes and an edit: the reload refuses the FIFO (it would block the
    read forever) and the server keeps answering; once it is gone the edit is served."""
    import http.client

    from tests.helpers.hooks_fakes import serving

    cfg, folder, _ns = store
    service = Service(cfg)
    try:
        with serving(build_app(service)) as url:
            host, port = url.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=60)  # a hang fails
            os.mkfifo(folder / "ops" / "pipe.md")
            (folder / "ops" / "deploy.md").write_text(
                "# Deploy\n\nDeploys go out on Mondays now.\n"
            )
            for path in ("/recall", "/health"):
                body = json.dumps({"text": OPS["text"]}) if path == "/recall" else None
                conn.request("POST" if body else "GET", path, body=body, headers=JSON_HEAD)
                got = conn.getresponse()
                text = got.read().decode()
                assert got.status == 503 and "ops/pipe.md: not a regular file" in text, text
                assert str(tmp_path) not in text
            (folder / "ops" / "pipe.md").unlink()
            conn.request(
                "POST", "/recall", body=json.dumps({"text": OPS["text"]}), headers=JSON_HEAD
            )
            got = conn.getresponse()
            body = json.loads(got.read())
            assert got.status == 200 and body["cache"] == "miss"  # the edited ops note
            assert "Mondays" in body["rows"][0]["text"] + body["rows"][1]["text"]
            conn.close()
    finally:
        service.close()


OKS_STORE = TESTS_DATA / "oks_store"


def test_files_the_recall_does_not_read_are_not_edits(tmp_path):
    """OKS writes ``records/inject.jsonl`` and ``.oks/recall-state-<session>.json`` on every
    prompt: no reload, the next lookup a hit. A page edited or made read-only is a change."""
    root = tmp_path / "oks"
    shutil.copytree(OKS_STORE, root)
    cfg = config(tmp_path, "data=oks", f"data.path={root}", f"data.queries={root / 'queries.jsonl'}",
                 "data.goals=none", "preset=oks")  # fmt: skip
    assert not precompute.uses_log(cfg)  # the recipe does not read the injection log
    precompute.precompute(cfg)
    text = json.loads((root / "queries.jsonl").read_text().splitlines()[0])["text"]
    service = Service(cfg)
    client = _client(service)
    try:
        assert _post(client, {"text": text})[1]["cache"] == "hit"
        log = root / "records" / "inject.jsonl"
        log.write_text(log.read_text() + log.read_text().splitlines()[0] + "\n")
        (root / ".oks" / "recall-state-s2.json").write_text('{"n": 1, "seen": {}}')
        (root / ".oks" / "recall-state-sess1.json").write_text('{"n": 9, "seen": {}}')
        for _ in range(2):
            assert _post(client, {"text": text})[1]["cache"] == "hit"
        assert client.get("/health").json()["reloads"] == 0
        page = root / "wiki" / "scratch.md"
        page.chmod(0o444)  # a permission change alone
        assert _post(client, {"text": text})[0] == 200
        assert client.get("/health").json()["reloads"] == 1
        page.chmod(0o644)
        page.write_text(page.read_text() + "\nOne more line.\n")
        assert _post(client, {"text": text})[0] == 200
        assert client.get("/health").json()["reloads"] == 2
    finally:
        service.close()


def test_a_hidden_scope_answers_as_a_missing_one(store):
    """``secret/`` holds one note visible to alice only; a request has no viewer."""
    cfg, _folder, _ns = store
    service = Service(cfg)
    client = _client(service)
    try:
        got = {s: _post(client, {"text": "merger plan", "scope": s}) for s in ("secret", "nowhere")}
        assert got["secret"] == (404, {"error": "scope ['secret']: no node's doc_id is in it"})
        assert got["nowhere"] == (404, {"error": "scope ['nowhere']: no node's doc_id is in it"})
        reme = {s: _post(client, {"query": "merger plan", "scope": s}, "/reme/search")
                for s in ("secret", "nowhere")}  # fmt: skip
        assert reme["secret"][0] == reme["nowhere"][0] == 404
        assert reme["secret"][1]["answer"].replace("secret", "X") == reme["nowhere"][1][
            "answer"
        ].replace("nowhere", "X")
        rows = _post(client, {"text": "merger plan bluebird"})[1]["rows"]
        assert all(not r["doc_id"].startswith("secret/") for r in rows)
    finally:
        service.close()


def test_distinct_scopes_keep_a_bounded_map(store, monkeypatch):
    from pipeline.serve import service as service_module

    cfg, _folder, _ns = store
    monkeypatch.setattr(service_module, "SCOPE_VERSIONS", 8)
    service = Service(cfg)
    try:
        state = service.current()
        want = service.version(state, ("team",))
        for i in range(20):  # each a distinct, long scope list that names a real folder
            assert service.version(state, ("team", "x" * 1000 + str(i))) == want
        assert len(state.versions) == 8
        assert all(len(k) == 12 for k in state.versions)  # scope ids, not the long lists
        status, body = _post(
            _client(service), {"text": TEAM["text"], "scope": ["team", "y" * 1000]}
        )
        assert status == 200 and len(state.versions) == 8
    finally:
        service.close()


def test_a_killed_pointer_write_is_cleaned_by_the_next_precompute(store):
    cfg, _folder, ns_dir = store
    left = ns_dir / ".CURRENT.0badc0de.tmp"  # io.atomic_write's temp name, killed before rename
    left.write_bytes(b"g-0000")
    precompute.precompute(cfg)
    assert not left.exists()
    assert sorted(p.name for p in ns_dir.iterdir()) == ["CURRENT", "LOCK", "g-000001", "g-000002"]
