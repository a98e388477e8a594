"""The hooks (``pipeline/hooks/``) driven against the REAL ``pipeline.serve``: a ``Service`` and a
``RecallCache`` over a cache that ``recall precompute`` wrote for the OKS store of
``tests/data/oks_store`` (``data=oks``, ``preset=oks``, ``inject.format=oks``).

Each hook's answer is compared with what ``RecallCache.get`` / ``Service.recall`` return for the
text (node ids, scores, order), and those with independent ``recall run`` references (each in its
own ``out_dir`` / ``cache_dir``): a precomputed text is a hit equal to the batch run, an uncached
text is a miss equal to a run of that text alone. The ReMe answer for ``limit`` rows is compared
with a run rendering ``inject.format=reme`` capped at ``limit`` nodes."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import polars as pl
import pytest
from starlette.testclient import TestClient

from pipeline.contract.registry import call_target
from pipeline.hooks.bme import write_bme_cards
from pipeline.hooks.hermes import RecallMemoryProvider
from pipeline.hooks.oks import RecallSearchBackend
from pipeline.hooks.reme import add_routes
from pipeline.hooks.source import Source
from pipeline.run import precompute
from pipeline.serve import RecallCache, Service
from pipeline.serve.app import build_app
from tests.helpers.paths import TESTS_DATA
from tests.helpers.serve_support import config, reference, rows_of, same_bits

STORE = TESTS_DATA / "oks_store"
NEW = ["rollback plan before a deploy", "jitter for retries"]  # not among the store's queries
LIMIT = 2


@pytest.fixture(scope="module")
def oks(tmp_path_factory):
    """(cfg, the batch reference's recall and injection, the store's queries, a Service, the
    cache, tmp): the store precomputed, then a ``recall run`` of the same queries beside it."""
    tmp = tmp_path_factory.mktemp("hooks-real")
    cfg = config(
        tmp,
        "data=oks",
        f"data.path={STORE}",
        f"data.queries={STORE / 'queries.jsonl'}",
        "data.goals=none",  # plain queries: a text alone is their key
        "preset=oks",
        "inject.format=oks",
    )
    res = precompute.precompute(cfg)
    recall, inj = reference(cfg, tmp, "batch-reference")
    queries = call_target(cfg.data).queries
    service = Service(cfg)
    cache = RecallCache(cfg.cache_dir, res["namespace"])
    yield cfg, recall, inj, queries, service, cache, tmp
    service.close()


@pytest.fixture(scope="module")
def fresh(oks):
    """A ``recall run`` of the uncached texts alone (``inject.format=oks``), own folders."""
    cfg, _r, _i, _q, _s, _c, tmp = oks
    return reference(cfg, tmp, "new-reference", dataset=_part(cfg, NEW))


def _part(cfg, texts: list[str]):
    q = pl.DataFrame({"query_id": [f"n{i}" for i in range(len(texts))], "text": texts})
    return call_target(cfg.data).part(q)


def _block(inj: pl.DataFrame | None, qid: str) -> str | None:
    got = [] if inj is None else inj.filter(pl.col("query_id") == qid)["text"].to_list()
    return got[0] if got else None


def _pages(rows: list[dict], limit: int) -> list[tuple[str, str, float]]:
    """OKS's hits by hand: the first row of each page (file stem of doc_id), rank order."""
    out: dict = {}
    for r in sorted(rows, key=lambda r: r["rank"]):
        out.setdefault(PurePosixPath(r["doc_id"]).stem, (r["node_id"], float(r["score"])))
    return [(slug, node, score) for slug, (node, score) in out.items()][:limit]


def test_cached_entries_are_the_batch_run_and_the_service_hits(oks):
    _cfg, recall, inj, queries, service, cache, _tmp = oks
    assert queries.height == 5
    for qid, text in queries.select("query_id", "text").iter_rows():
        entry = cache.get(text)
        same_bits(entry["rows"], rows_of(recall, qid))  # precompute = the batch run
        assert entry["injection"] == _block(inj, qid)
        got = service.recall(text, format="oks")
        assert got["cache"] == "hit" and got["rows"] == entry["rows"]
        assert got["injection"] == entry["injection"]


def test_oks_backend_hits_are_the_cache_entry_and_misses_a_fresh_run(oks, fresh):
    _cfg, _recall, _inj, queries, service, cache, _tmp = oks
    backend = RecallSearchBackend(source=Source(cache, service, format="oks"))
    for text in queries["text"].to_list():
        hits = backend.search(text, limit=10)
        want = _pages(cache.get(text)["rows"], 10)
        assert [(h.slug, h.extra["best_node"], h.score) for h in hits] == want
        assert all(h.backend == "recall" for h in hits)
    ref, _ref_inj = fresh
    before = service.counts["miss"]
    for i, text in enumerate(NEW):
        assert cache.get(text) is None
        hits = backend.search(text, limit=3)
        want = _pages(rows_of(ref, f"n{i}").to_dicts(), 3)  # the run of that text alone
        assert want and [(h.slug, h.extra["best_node"], h.score) for h in hits] == want
    assert service.counts["miss"] == before + len(NEW)
    # a cache read alone (no recaller): an uncached text gives no hits
    assert RecallSearchBackend(source=Source(cache)).search(NEW[0], limit=3) == []


def test_hermes_prefetch_reads_the_cache_and_computes_this_turns_miss(oks, fresh):
    _cfg, _recall, inj, queries, service, cache, _tmp = oks
    provider = RecallMemoryProvider(Source(cache, service, format="oks"), prefetch_timeout=60)
    provider.initialize("s1")
    for qid, text in queries.select("query_id", "text").iter_rows():
        assert provider.prefetch(text, session_id="s1") == (_block(inj, qid) or "").strip()
    ref, ref_inj = fresh
    text = NEW[1]
    block = _block(ref_inj, "n1")
    assert block  # the run of that text injects something
    assert provider.prefetch(text, session_id="s1") == block.strip()  # computed for this turn
    got = service.recall(text, format="oks")  # now kept by the service: a hit
    assert got["cache"] == "hit" and got["injection"] == block
    same_bits(got["rows"], rows_of(ref, "n1"))


def test_reme_route_of_the_serve_app(oks):
    cfg, recall, _inj, queries, service, _cache, tmp = oks
    hit, new = queries["text"][0], NEW[0]
    ref_cfg = config(
        tmp / "reme-ref",
        "data=oks",
        f"data.path={STORE}",
        "data.goals=none",
        "preset=oks",
        "inject.format=reme",
        f"inject.max_nodes={LIMIT}",
    )
    ref, ref_inj = reference(ref_cfg, tmp, "reme-reference", dataset=_part(cfg, [hit, new]))
    app = build_app(service)  # `recall serve`'s app: the ReMe routes are mounted
    n_routes = len(app.routes)
    add_routes(app, service)  # as the README's older example does: added once only
    assert len(app.routes) == n_routes
    assert {r.path for r in app.routes} >= {"/recall", "/reme/search", "/reme/health_check"}
    client = TestClient(app)
    for i, (text, cache) in enumerate([(hit, "hit"), (new, None)]):
        r = client.post("/reme/search", json={"query": text, "limit": LIMIT})
        assert r.status_code == 200, r.text
        body = r.json()
        want = rows_of(ref, f"n{i}").head(LIMIT)
        results = body["metadata"]["results"]
        assert [c["id"] for c in results] == want["node_id"].to_list()
        assert [c["scores"]["score"] for c in results] == want["score"].to_list()
        assert [c["text"] for c in results] == want["text"].to_list()
        assert body["answer"] == _block(ref_inj, f"n{i}").strip()
        heads = [x.split(" ")[1] for x in body["answer"].splitlines() if x.startswith("=" * 10)]
        spans = [  # the header's path:start-end is the chunk's (no span: the store has no lines)
            c["path"] + (f":{c['start_line']}-{c['end_line']}" if c["start_line"] else "")
            for c in results
        ]
        assert heads == spans
        assert body["metadata"]["counts"]["returned"] == LIMIT
        if cache:
            assert body["metadata"]["counts"]["cache"] == cache
    same_bits(service.recall(hit)["rows"][:LIMIT], rows_of(recall, "q1").head(LIMIT))
    r = client.post("/reme/search", json={"query": hit, "scope": "nowhere"})
    assert r.status_code == 404 and r.json()["success"] is False
    health = client.post("/reme/health_check").json()["metadata"]["health"]
    assert health["healthy"] is True and health["components"]["namespace"] == service.namespace


def test_bme_cards_from_the_real_cache(oks, tmp_path):
    _cfg, _recall, _inj, queries, service, cache, _tmp = oks
    hit = queries["text"][0]
    chat = tmp_path / "chat.jsonl"
    lines = [{"chat_metadata": {}}, {"is_user": True, "mes": hit, "extra": {}},
             {"is_user": True, "mes": NEW[0], "extra": {}}]  # fmt: skip
    chat.write_text("".join(json.dumps(m) + "\n" for m in lines))
    now = "2026-12-04T00:00:00.000Z"
    assert write_bme_cards(chat, tmp_path / "a.jsonl", Source(cache), now=now) == 1
    got = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    card = got[1]["extra"]["bme_recall"]
    entry = cache.get(hit)
    assert card["selectedNodeIds"] == [r["node_id"] for r in entry["rows"]][:12]
    assert card["injectionText"] == entry["injection"].strip()
    assert "bme_recall" not in got[2]["extra"]  # uncached, no recaller: no card
    n = write_bme_cards(chat, tmp_path / "b.jsonl", Source(cache, service, format="oks"), now=now)
    assert n == 2
    card = json.loads((tmp_path / "b.jsonl").read_text().splitlines()[2])["extra"]["bme_recall"]
    assert card["selectedNodeIds"] == [r["node_id"] for r in service.recall(NEW[0])["rows"]][:12]


def _chat(path: Path) -> list[dict]:
    """A SillyTavern chat holding ST-BME's graph (``chat_metadata.st_bme_graph``): three user
    messages, one of which already has a card."""
    from tests.adapters.test_adapter_bme import graph

    head = {"user_name": "User", "character_name": "Aria",
            "chat_metadata": {"st_bme_graph": graph()}}  # fmt: skip
    said = [(False, "The harbor burns."), (True, "Who set the fire?"), (False, "Kael did."),
            (True, "Did Kael rescue Aria?"), (True, "what about the chapter summary")]  # fmt: skip
    msgs = [
        {"name": "User" if u else "Aria", "is_user": u, "mes": t, "extra": {},
         "send_date": f"January 1, 2026 9:0{i}am"}
        for i, (u, t) in enumerate(said)
    ]  # fmt: skip
    msgs[4]["extra"] = {"bme_recall": {"version": 1, "injectionText": "kept"}}
    path.write_text("".join(json.dumps(m) + "\n" for m in [head, *msgs]), encoding="utf-8")
    return msgs


def test_precompute_writes_bme_cards_of_the_run(tmp_path):
    from pipeline.contract.errors import UserError
    from pipeline.hooks.bme import check_cards, precompute_cards

    chat, out = tmp_path / "chat.jsonl", tmp_path / "chat.cards.jsonl"
    msgs = _chat(chat)
    over = ["data=bme", f"data.path={chat}", f"data.queries={chat}", "data.vectors=false"]
    over += ["preset=bme", "inject.format=bme", f"bme_cards.out={out}"]
    cfg = config(tmp_path, *over)
    res = precompute.precompute(cfg)
    assert precompute_cards(cfg, res["namespace"]) == (str(out), 2)  # m1, m3 (m4 has one)
    ref, ref_inj = reference(cfg, tmp_path, "bme-reference")  # recall run, own folders
    lines = out.read_text(encoding="utf-8").splitlines()
    assert chat.read_bytes().splitlines()[:2] == out.read_bytes().splitlines()[:2]  # untouched
    for i in (1, 3, 4):  # the chat's user messages: queries m1, m3, m4
        card = json.loads(lines[i + 1])["extra"]["bme_recall"]
        if i == 4:
            assert card == {"version": 1, "injectionText": "kept"}  # its own card stays
            continue
        assert card["recallInput"] == msgs[i]["mes"]
        assert card["injectionText"] == _block(ref_inj, f"m{i}").strip()
        # ST-BME's selectedNodeIds: the selection this injection shows (injection.parquet's
        # ``selected``: owner POV + scene reconstruction of the first 12), not the rank order
        want = ref_inj.filter(pl.col("query_id") == f"m{i}")["selected"].item().to_list()
        assert want and card["selectedNodeIds"] == want
    with pytest.raises(UserError, match="exists"):
        check_cards(cfg)  # out is there now: never overwritten
    oks_cfg = config(tmp_path, *over[:-2], "inject.format=oks", f"bme_cards.out={tmp_path / 'x'}")
    with pytest.raises(UserError, match="inject.format=bme"):
        check_cards(oks_cfg)
