"""ST-BME recall cards: ``extra.bme_recall`` v1 records written into a **copy** of a SillyTavern
chat file, for each user message that lacks one, from the recall cache (``inject.format=bme``).

ST-BME (Youzini-afk/ST-Bionic-Memory-Ecology @ 590da3b, ``retrieval/recall-persistence.js``)
keeps one record per user message under ``message.extra.bme_recall`` (``BME_RECALL_EXTRA_KEY``,
``BME_RECALL_VERSION`` 1, lines 3-4) and re-injects it when no fresh recall completes
(``resolveFinalRecallInjectionSource``). ``buildPersistedRecallRecord`` (lines 55-77) writes the
13 fields of ``CARD_FIELDS``; ``readPersistedRecallFromUserMessage`` (lines 24-53) reads the same 13
and drops a record without ``injectionText``; ``writePersistedRecallToUserMessage`` (lines 79-90)
writes only to ``is_user`` messages. Values, as ST-BME's own persistence (``index.js``
``persistRecallInjectionRecord``) fills them: ``recallInput`` and ``boundUserFloorText`` = the
message's ``mes`` normalised as ``normalizeRecallInputText`` (CRLF → LF, trim: the cache's key
normalisation too), ``tokenEstimate`` = ``estimateTokens`` (``retrieval/injector.js``),
``generationCount`` 0, ``manuallyEdited`` and ``authoritativeInputUsed`` false,
``selectedNodeIds`` = the entry's rows' node ids in rank order (at most ``maxRecallNodes``, 12).

A message that already has a ``bme_recall`` key is left as it is; so are messages whose text has
no cache entry or an empty injection. Lines not given a card are copied byte for byte; a line given
one is written as ``JSON.stringify`` writes it (compact). The input file is only read.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path

from pipeline.errors import DataError, UserError
from pipeline.hooks.source import Source, normalize

KEY = "bme_recall"
VERSION = 1
MAX_NODES = 12  # settings-defaults.js recallMaxNodes
SOURCE = "recall-pipeline"
HOOK = "RECALL_PRECOMPUTE"
CARD_FIELDS = (
    "version",
    "injectionText",
    "selectedNodeIds",
    "recallInput",
    "recallSource",
    "hookName",
    "tokenEstimate",
    "createdAt",
    "updatedAt",
    "generationCount",
    "manuallyEdited",
    "authoritativeInputUsed",
    "boundUserFloorText",
)
CJK = re.compile("[\u4e00-\u9fff]")


def estimate_tokens(text: str) -> int:
    """ST-BME's ``estimateTokens``: ⌈CJK/2 + other/4⌉, lengths in UTF-16 code units (JS)."""
    if not text:
        return 0
    cjk = len(CJK.findall(text))
    units = len(text.encode("utf-16-le")) // 2
    return math.ceil(cjk / 2 + (units - cjk) / 4)


def iso_now() -> str:
    """The current UTC time as JavaScript's ``toISOString`` prints it (ms, ``Z``)."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def card(text: str, entry: dict, now: str) -> dict | None:
    """The v1 record of ``text`` from its entry, or None when the entry injects nothing."""
    injection = str(entry.get("injection") or "").strip()
    if not injection:
        return None
    ids = [r["node_id"] for r in sorted(entry.get("rows") or [], key=lambda r: r["rank"])]
    bound = normalize(text)
    values = (VERSION, injection, list(dict.fromkeys(ids))[:MAX_NODES], bound, SOURCE, HOOK)
    values += (estimate_tokens(injection), now, now, 0, False, False, bound)
    return dict(zip(CARD_FIELDS, values, strict=True))


def _message(raw: bytes, where: str, row: int) -> dict | None:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(
            where, f"not JSON ({exc})", "pass a SillyTavern chat .jsonl", row=row
        ) from exc
    return obj if isinstance(obj, dict) else None


def _needs_card(msg: dict | None) -> bool:
    if not msg or not msg.get("is_user"):
        return False
    extra = msg.get("extra")
    return not (isinstance(extra, dict) and KEY in extra) and bool(normalize(msg.get("mes") or ""))


def write_bme_cards(
    chat_in: str | Path,
    chat_out: str | Path,
    source: Source,
    *,
    scope: str | None = None,
    now: str | None = None,
) -> int:
    """Copy ``chat_in`` to ``chat_out`` with a card on each user message lacking one; the count."""
    from pipeline.io import atomic_write_bytes

    src, dst = Path(chat_in), Path(chat_out)
    if dst.exists() or dst.resolve() == src.resolve():
        raise UserError(f"{dst}: exists; cards go into a new copy: name a file that does not exist")
    now = now or iso_now()
    lines, written = src.read_bytes().splitlines(keepends=True), 0
    for i, raw in enumerate(lines[1:], start=2):  # line 1: the chat's metadata header
        body = raw.rstrip(b"\r\n")
        msg = _message(body, str(src), i) if body.strip() else None
        if not _needs_card(msg):
            continue
        entry = source.recall(msg["mes"], scope=scope)
        record = card(msg["mes"], entry, now) if entry else None
        if record is None:
            continue
        extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
        msg["extra"] = {**extra, KEY: record}
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        lines[i - 1] = text.encode("utf-8") + raw[len(body) :]
        written += 1
    atomic_write_bytes(dst, b"".join(lines))
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.hooks.bme CHAT_IN CHAT_OUT --endpoint URL | --cache-dir DIR``."""
    import argparse

    from pipeline.errors import reported

    ap = argparse.ArgumentParser(prog="python -m pipeline.hooks.bme", description=main.__doc__)
    ap.add_argument("chat_in")
    ap.add_argument("chat_out")
    ap.add_argument("--endpoint", help="a running `recall serve` (misses are computed)")
    ap.add_argument("--cache-dir", help="a recall cache_dir (read in process; misses get no card)")
    ap.add_argument("--namespace")
    ap.add_argument("--scope")
    ap.add_argument("--now", help="createdAt/updatedAt (ISO 8601; default: now, UTC)")
    args = ap.parse_args(argv)

    def run() -> None:
        keys = ("endpoint", "cache_dir", "namespace")
        settings = {k: getattr(args, k) for k in keys if getattr(args, k)}
        source = Source.from_settings(settings, where="command line", format="bme")
        n = write_bme_cards(args.chat_in, args.chat_out, source, scope=args.scope, now=args.now)
        print(f"{args.chat_out}: {n} bme_recall card(s) written")

    return reported(run)


if __name__ == "__main__":
    raise SystemExit(main())
