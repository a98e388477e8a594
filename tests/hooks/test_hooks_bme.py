"""ST-BME recall cards (``pipeline/hooks/bme.py``): ``extra.bme_recall`` v1 records written into a
copy of a SillyTavern chat file. The field list is ST-BME's (Youzini-afk/ST-Bionic-Memory-Ecology
@ 590da3b, ``retrieval/recall-persistence.js``): ``buildPersistedRecallRecord`` writes, lines 60-76,
and ``readPersistedRecallFromUserMessage`` reads, lines 34-52, the same 13 keys."""

from __future__ import annotations

import hashlib
import json

import pytest

from pipeline.contract.errors import UserError
from pipeline.hooks.bme import CARD_FIELDS, card, estimate_tokens, main, write_bme_cards
from pipeline.hooks.source import Source
from tests.helpers.hooks_fakes import HIT, MISS, UNKNOWN, FakeCache, FakeService, build_app, serving

NOW = "2026-12-04T05:00:00.000Z"
JS_FIELDS = [  # recall-persistence.js lines 61-75, in order
    "version", "injectionText", "selectedNodeIds", "recallInput", "recallSource", "hookName",
    "tokenEstimate", "createdAt", "updatedAt", "generationCount", "manuallyEdited",
    "authoritativeInputUsed", "boundUserFloorText",
]  # fmt: skip
OLD_CARD = {"version": 1, "injectionText": "kept as it was", "selectedNodeIds": ["n9"]}


def test_fields_are_st_bme_s():
    assert list(CARD_FIELDS) == JS_FIELDS


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("你好", 1), ("你好abc", 2), ("😀😀😀", 2)],
)
def test_estimate_tokens_hand(text, tokens):
    # ceil(cjk/2 + other/4); JavaScript's length counts UTF-16 units, an emoji is 2
    assert estimate_tokens(text) == tokens


def test_card_values():
    entry = FakeService().recall(HIT, format="bme")
    got = card(f"  {HIT}\r\n", entry, NOW)
    injection = entry["injection"]  # "[Memory - Recalled]\nhit: 4 node(s)": 34 chars → 9 tokens
    assert got == {
        "version": 1,
        "injectionText": injection,
        "selectedNodeIds": [
            "concepts/alpha.md#1", "concepts/alpha.md#0", "rules/beta.md#0", "concepts/gamma.md#0",
        ],
        "recallInput": HIT,
        "recallSource": "recall-pipeline",
        "hookName": "RECALL_PRECOMPUTE",
        "tokenEstimate": 9,
        "createdAt": NOW,
        "updatedAt": NOW,
        "generationCount": 0,
        "manuallyEdited": False,
        "authoritativeInputUsed": False,
        "boundUserFloorText": HIT,
    }  # fmt: skip
    assert len(injection) == 34
    assert card(HIT, {"rows": [], "injection": "  "}, NOW) is None  # ST-BME drops empty records


def chat_lines() -> list[bytes]:
    def line(obj) -> bytes:  # SillyTavern writes JSON.stringify per line
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    return [
        line({"user_name": "U", "character_name": "C", "chat_metadata": {"st_bme_graph": {}}}),
        line({"name": "U", "is_user": True, "mes": HIT, "extra": {"display_text": HIT}}),
        line({"name": "C", "is_user": False, "mes": "Rotate them monthly.", "extra": {}}),
        line({"name": "U", "is_user": True, "mes": HIT, "extra": {"bme_recall": OLD_CARD}}),
        line({"name": "U", "is_user": True, "mes": f"{MISS}\r\n"}),  # no extra at all
        line({"name": "U", "is_user": True, "mes": UNKNOWN, "extra": {}}),
        line({"name": "U", "is_user": True, "mes": "   ", "extra": {}}),
    ]


def test_write_cards_into_a_copy(tmp_path):
    lines = chat_lines()
    src = tmp_path / "chat.jsonl"
    src.write_bytes(b"\n".join(lines[:4]) + b"\r\n" + b"\n".join(lines[4:]) + b"\n")
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    service = FakeService()
    n = write_bme_cards(
        src, tmp_path / "out.jsonl", Source(recaller=service, format="bme"), now=NOW
    )
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before  # the input is only read
    out = (tmp_path / "out.jsonl").read_bytes().splitlines(keepends=True)
    ins = src.read_bytes().splitlines(keepends=True)
    assert n == 2 and len(out) == len(ins)
    changed = [i for i, (a, b) in enumerate(zip(ins, out, strict=True)) if a != b]
    assert changed == [1, 4]  # the HIT turn and the MISS turn; the old card's line is untouched
    assert out[3].endswith(b"\r\n")  # line endings kept
    first, miss = json.loads(out[1]), json.loads(out[4])
    assert first["extra"] == {
        "display_text": HIT,
        "bme_recall": card(HIT, service.recall(HIT, format="bme"), NOW),
    }
    assert miss["extra"] == {"bme_recall": card(MISS, service.recall(MISS, format="bme"), NOW)}
    # everything but the card is as it was; the line is compact, as JSON.stringify writes it
    assert first | {"extra": {"display_text": HIT}} == json.loads(ins[1])
    compact = json.dumps(first, ensure_ascii=False, separators=(",", ":")).encode()
    assert out[1] == compact + b"\n"


def test_cache_only_source(tmp_path):
    src = tmp_path / "chat.jsonl"
    src.write_bytes(b"\n".join(chat_lines()) + b"\n")
    n = write_bme_cards(src, tmp_path / "out.jsonl", Source(cache=FakeCache("bme")), now=NOW)
    assert n == 1  # the cache holds HIT; MISS would need the service


def test_refusals(tmp_path):
    src = tmp_path / "chat.jsonl"
    src.write_bytes(b"\n".join(chat_lines()) + b"\n")
    source = Source(recaller=FakeService(), format="bme")
    with pytest.raises(UserError, match="exists"):
        write_bme_cards(src, src, source, now=NOW)
    (tmp_path / "taken.jsonl").write_text("x")
    with pytest.raises(UserError, match="exists"):
        write_bme_cards(src, tmp_path / "taken.jsonl", source, now=NOW)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(chat_lines()[0] + b"\n{not json\n")
    with pytest.raises(UserError, match=r"bad.jsonl, row 2: not JSON"):
        write_bme_cards(bad, tmp_path / "o.jsonl", source, now=NOW)


def test_cli(tmp_path, capsys):
    src = tmp_path / "chat.jsonl"
    src.write_bytes(b"\n".join(chat_lines()) + b"\n")
    with serving(build_app(FakeService())) as url:
        rc = main([str(src), str(tmp_path / "out.jsonl"), "--endpoint", url, "--now", NOW])
    assert rc == 0 and capsys.readouterr().out.strip().endswith(": 2 bme_recall card(s) written")
    assert main([str(src), str(tmp_path / "o2.jsonl")]) == 2
    assert (
        capsys.readouterr().err.count("\n") == 1
    )  # one line: error: ... set cache_dir or endpoint
