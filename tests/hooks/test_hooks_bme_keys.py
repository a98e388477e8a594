"""The ST-BME hook (``python -m pipeline.hooks.bme``) on a chat ``recall precompute`` keyed with
each message's context, time and scene (``data=bme data.queries=<the chat>``), against the real
``RecallCache`` and ``Service``:

- ``--cache-dir``: every message finds the entry its own query was precomputed under (the hook
  reads the chat as ``data=bme`` does and builds the same key, ``keys.query_key``); before, the
  text alone was looked up and no card was written;
- ``--endpoint``: a miss is computed with the message's context and time (sent as ``fields``), so
  its card equals the precomputed one; before, it was computed from the text alone;
- each card's ``selectedNodeIds`` is the selection its ``injectionText`` shows (injection.parquet's
  ``selected``: ST-BME's ``selectedNodeIds``), as ST-BME's ``persistRecallInjectionRecord`` stores
  the same retrieve() result's selection with its injection."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.hooks.bme import ChatQueries, main
from pipeline.hooks.source import Source
from pipeline.run import precompute
from pipeline.serve import RecallCache, Service
from pipeline.serve.app import build_app
from tests.helpers.hooks_fakes import serving
from tests.helpers.serve_support import config, reference
from tests.hooks.test_hooks_real import _chat

NOW = "2026-12-04T05:00:00.000Z"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(chat, cfg, namespace, the batch run's injection rows) of a precomputed ST-BME chat."""
    tmp = tmp_path_factory.mktemp("bme-keys")
    chat = tmp / "chat.jsonl"
    _chat(chat)
    over = ["data=bme", f"data.path={chat}", f"data.queries={chat}", "data.vectors=false"]
    cfg = config(tmp, *over, "preset=bme", "inject.format=bme")
    res = precompute.precompute(cfg)
    _ref, inj = reference(cfg, tmp, "bme-keys-reference")
    return chat, cfg, res["namespace"], inj, tmp


def _cards(path) -> dict[int, dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {
        i: m["extra"]["bme_recall"]
        for i, m in enumerate(map(json.loads, lines[1:]))
        if "bme_recall" in (m.get("extra") or {})
    }


def _want(inj: pl.DataFrame, qid: str) -> tuple[str, list[str]]:
    row = inj.filter(pl.col("query_id") == qid)
    return row["text"].item().strip(), row["selected"].item().to_list()


def test_the_chat_s_queries_have_context_and_time(built):
    chat, _cfg, _ns, _inj, _tmp = built
    q = ChatQueries(chat)
    assert set(q.fields) == {"m1", "m3", "m4"}
    assert q.fields["m3"]["context"] == ["Who set the fire?", "Kael did."]  # [prev user, assistant]
    assert q.fields["m3"]["now"].isoformat() == "2026-01-01T09:03:00+00:00"  # send_date
    assert q.fields["m1"]["viewer"] == "Aria"


def test_cache_dir_finds_each_message_s_own_entry(built, capsys):
    chat, cfg, ns, inj, tmp = built
    out = tmp / "cache-dir.jsonl"
    args = [str(chat), str(out), "--cache-dir", str(cfg.cache_dir), "--namespace", ns]
    assert main([*args, "--now", NOW]) == 0
    assert capsys.readouterr().out.strip().endswith(": 2 bme_recall card(s) written")  # was 0
    cards = _cards(out)
    assert set(cards) == {1, 3, 4}  # m4 kept its own card
    for i in (1, 3):
        text, selected = _want(inj, f"m{i}")
        assert cards[i]["injectionText"] == text
        assert cards[i]["selectedNodeIds"] == selected  # the selection the injection shows


def test_text_alone_misses_the_keyed_entries(built):
    chat, cfg, ns, _inj, tmp = built
    cache = RecallCache(cfg.cache_dir, ns)
    q = ChatQueries(chat)
    assert cache.get("Who set the fire?") is None  # the old lookup: nothing
    assert cache.get("Who set the fire?", fields=q.fields["m1"]) is not None


def test_endpoint_computes_a_miss_with_the_message_s_context(built, capsys):
    chat, cfg, _ns, inj, tmp = built
    over = ["data=bme", f"data.path={chat}", f"data.queries={chat}", "data.vectors=false"]
    fresh = config(tmp / "empty", *over, "preset=bme", "inject.format=bme")
    service = Service(fresh)  # an empty cache: every message is a miss
    try:
        with serving(build_app(service)) as url:
            out = tmp / "endpoint.jsonl"
            assert main([str(chat), str(out), "--endpoint", url, "--now", NOW]) == 0
        plain = service.recall("Did Kael rescue Aria?", format="bme")  # no context: another answer
    finally:
        service.close()
    assert service.counts["miss"] >= 2
    cards = _cards(out)
    for i in (1, 3):
        text, selected = _want(inj, f"m{i}")
        assert cards[i]["injectionText"] == text  # as precomputed with context and time
        assert cards[i]["selectedNodeIds"] == selected
    assert plain["injection"].strip() != cards[3]["injectionText"]  # the context mattered


def test_request_fields_are_checked(built):
    from pipeline.serve.service import BadRequest, request_fields

    with pytest.raises(BadRequest, match=r"fields \['colour'\]: not query fields"):
        request_fields({"colour": "red"})
    with pytest.raises(BadRequest, match="field 'now'"):
        request_fields({"now": "not a date"})
    got = request_fields(
        {"now": "2026-01-01T10:00:00+01:00", "context": ["a", "b"], "viewer": None}
    )
    assert got["now"].isoformat() == "2026-01-01T09:00:00+00:00" and got["context"] == ["a", "b"]
    assert "viewer" not in got and request_fields(None) == {}


def test_source_passes_fields_to_the_cache(built):
    chat, cfg, ns, inj, _tmp = built
    q = ChatQueries(chat)
    src = Source(RecallCache(cfg.cache_dir, ns))
    got = src.recall("Did Kael rescue Aria?", fields=q.fields["m3"])
    assert got is not None and got["injection"].strip() == _want(inj, "m3")[0]


def test_a_missing_chat_or_graph_is_one_error_line(tmp_path, capsys):
    gone = tmp_path / "gone.jsonl"
    assert main([str(gone), str(tmp_path / "o.jsonl"), "--cache-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {gone}: chat file not found; fix: pass a SillyTavern chat .jsonl"
    )  # was a FileNotFoundError traceback
    chat = tmp_path / "chat.jsonl"
    _chat(chat)
    args = [
        str(chat),
        str(tmp_path / "o.jsonl"),
        "--cache-dir",
        str(tmp_path),
        "--graph",
        str(gone),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"error: {gone}, field 'data.path': ST-BME graph file not found")
        and "\n" not in err
    )
