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
``selectedNodeIds`` = ``retrieve()``'s ``selectedNodeIds`` of the same recall, i.e. the nodes the
injection selected (``injection.parquet``'s ``selected``: owner POV + scene of the first 12,
:meth:`ChatQueries.selected`), else the entry's first 12 node ids in rank order.

Each user message is looked up under the key its query was precomputed with: the chat read as
``data=bme data.queries=<chat>`` reads it (:class:`ChatQueries`: context lines, ``send_date``,
viewer and the graph's scene state), and a miss at ``recall serve`` is computed with those fields.
``recall precompute … inject.format=bme bme_cards.out=OUT [bme_cards.chat=CHAT]`` writes the cards
of ``CHAT`` (default ``data.queries``, e.g. the chat ``data=bme`` reads) from the cache just built
(:func:`precompute_cards`); a dataset other than ``data=bme`` is matched by text
(:class:`TextIndex`).

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

from pipeline.contract.errors import DataError, UserError
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


def card(text: str, entry: dict, now: str, selected: list[str] | None = None) -> dict | None:
    """The v1 record of ``text`` from its entry, or None when the entry injects nothing.
    ``selected``: the nodes the injection selected (ST-BME's ``selectedNodeIds``, which its
    persistence stores with the injection that shows them: :meth:`ChatQueries.selected`); without
    it, the entry's first ``MAX_NODES`` node ids in rank order."""
    injection = str(entry.get("injection") or "").strip()
    if not injection:
        return None
    if selected is None:
        ids = [r["node_id"] for r in sorted(entry.get("rows") or [], key=lambda r: r["rank"])]
        selected = list(dict.fromkeys(ids))[:MAX_NODES]
    bound = normalize(text)
    values = (VERSION, injection, list(selected), bound, SOURCE, HOOK)
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


class ChatQueries:
    """A chat's user messages as ``data=bme`` reads them (``adapters.bme.load`` with the chat as
    ``data.queries``: each query's context, time, viewer and scene state, ``query_id`` ``m<i>``),
    so a hook builds the very cache key ``recall precompute`` built for each (``keys.query_key``),
    and the graph's nodes and edges, to name the nodes the injection selected.

    ``graph``: the ST-BME graph the precompute read (``data.path``); default: the chat itself
    (its ``chat_metadata.st_bme_graph``). ``inject``: the recipe's ``inject`` settings other than
    ``format`` (default: bme's own)."""

    def __init__(
        self,
        chat: str | Path,
        graph: str | Path | None = None,
        *,
        inject: dict | None = None,
        include_archived: bool = False,
    ) -> None:
        from pipeline.adapters import bme as adapter
        from pipeline.contract.ingest import drop_empty
        from pipeline.recallcache.keys import RESULT_FIELDS

        ds = adapter.load(str(graph or chat), queries=str(chat), vectors="false")
        self.nodes, self.queries = drop_empty(ds)
        self.edges, self.inject, self.archived = ds.edges, dict(inject or {}), include_archived
        cols = [c for c in self.queries.columns if c in RESULT_FIELDS]
        self.fields = {
            r["query_id"]: {k: r[k] for k in cols} for r in self.queries.to_dicts()
        }  # the columns keys.query_key reads, as precompute.entry_keys passes them

    def selected(self, qid: str, entry: dict) -> list[str] | None:
        """ST-BME's ``selectedNodeIds`` of the injection of ``entry`` (query ``qid``): the entry's
        rows rendered again as ``inject.format=bme`` (``inject.formats``, owner-POV augmentation and
        scene reconstruction); None when that render is not the entry's injection (another
        recipe's ``inject`` settings), so the card never names nodes its text does not show."""
        import polars as pl

        from pipeline.inject import formats

        rows = entry.get("rows") or []
        if not rows:
            return None
        recall = pl.DataFrame(rows).with_columns(query_id=pl.lit(qid))
        query = self.queries.filter(pl.col("query_id") == qid)
        out = formats.render(
            recall,
            self.nodes,
            "bme",
            queries=query,
            include_archived=self.archived,
            edges=self.edges,
            **self.inject,
        )
        if out.height != 1 or out["text"][0].strip() != str(entry.get("injection") or "").strip():
            return None
        return out["selected"][0].to_list()


def write_bme_cards(
    chat_in: str | Path,
    chat_out: str | Path,
    source: Source,
    *,
    scope: str | None = None,
    now: str | None = None,
    queries: ChatQueries | None = None,
) -> int:
    """Copy ``chat_in`` to ``chat_out`` with a card on each user message lacking one; the count.
    With ``queries`` (:class:`ChatQueries` of this chat), each message is looked up with its own
    query's fields (the key the precompute built; a miss is computed with them), and its card's
    ``selectedNodeIds`` are the nodes its injection selected."""
    from pipeline.contract.io import atomic_write_bytes

    src, dst = Path(chat_in), Path(chat_out)
    if not src.is_file():
        raise DataError(str(src), "chat file not found", "pass a SillyTavern chat .jsonl")
    if dst.exists() or dst.resolve() == src.resolve():
        raise UserError(f"{dst}: exists; cards go into a new copy: name a file that does not exist")
    now = now or iso_now()
    lines, written, m = src.read_bytes().splitlines(keepends=True), 0, -1
    for i, raw in enumerate(lines[1:], start=2):  # line 1: the chat's metadata header
        body = raw.rstrip(b"\r\n")
        msg = _message(body, str(src), i) if body.strip() else None
        m += bool(body.strip())  # message m<m> of query_files.chat_rows (blank lines skipped)
        if not _needs_card(msg):
            continue
        qid = f"m{m}"
        fields = queries.fields.get(qid) if queries is not None else None
        entry = source.recall(msg["mes"], scope=scope, fields=fields)
        chosen = queries.selected(qid, entry) if queries is not None and entry else None
        record = card(msg["mes"], entry, now, chosen) if entry else None
        if record is None:
            continue
        extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
        msg["extra"] = {**extra, KEY: record}
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        lines[i - 1] = text.encode("utf-8") + raw[len(body) :]
        written += 1
    atomic_write_bytes(dst, b"".join(lines))
    return written


class TextIndex:
    """Cache entries by normalised query text alone (``pipeline.recallcache.keys.normalise``; the first
    entry of a text wins): a chat's user messages find the entries their own queries got, whatever
    other fields (context, now, viewer, scene) keyed those queries."""

    def __init__(self, entries: list[dict]) -> None:
        from pipeline.recallcache.keys import normalise

        self._normalise, self._by = normalise, {}
        for e in entries:
            self._by.setdefault(normalise(e["query_text"]), e)

    def get(self, text: str, scope: str | None = None) -> dict | None:
        """The first entry whose query text normalises as ``text`` does, or None."""
        return self._by.get(self._normalise(text))


def _holds_graph(chat: str | Path) -> bool:
    """Whether the chat's first line carries a (non-empty) ST-BME graph
    (``chat_metadata.st_bme_graph``)."""
    try:
        with open(chat, "rb") as fh:
            meta = json.loads(fh.readline()).get("chat_metadata")
    except (OSError, ValueError, AttributeError):
        return False
    graph = meta.get("st_bme_graph") if isinstance(meta, dict) else None
    return bool(graph) and isinstance(graph, (dict, str))  # {}: ST-BME's empty graph


def check_cards(cfg) -> None:
    """Refuse ``bme_cards.out`` (before a precompute runs) unless ``inject.format=bme``, a chat
    is named (``bme_cards.chat``, else ``data.queries``) and ``out`` does not exist yet."""
    opts = cfg.get("bme_cards") or {}
    if not opts.get("out"):
        return
    if cfg.inject.format != "bme":
        raise UserError(
            f"bme_cards.out={opts['out']}: cards need the bme block; add inject.format=bme"
        )
    if not (opts.get("chat") or cfg.data.get("queries")):
        raise UserError("bme_cards.out is set but no chat: add bme_cards.chat=<chat.jsonl>")
    if Path(opts["out"]).exists():
        raise UserError(f"bme_cards.out={opts['out']}: exists; name a file that does not exist")


def precompute_cards(cfg, namespace: str) -> tuple[str, int] | None:
    """After ``recall precompute``: (out, cards written) of ``bme_cards`` from the namespace's
    live generation, no computation: with ``data=bme``, each message's entry under the key its
    query was precomputed with (:class:`ChatQueries`, the recipe's ``inject`` settings for the
    selection), else by text alone (:class:`TextIndex`); None when ``bme_cards.out`` is unset."""
    from pipeline.recallcache.reader import RecallCache

    check_cards(cfg)
    opts = cfg.get("bme_cards") or {}
    if not opts.get("out"):
        return None
    chat = opts.get("chat") or cfg.data.get("queries")
    cache = RecallCache(cfg.cache_dir, namespace)
    if cfg.data.get("_target_") != "bme":  # no ST-BME graph: plain text lookups
        return str(opts["out"]), write_bme_cards(
            chat, opts["out"], Source(TextIndex(cache.entries()))
        )
    inject = {k: v for k, v in cfg.inject.items() if k != "format"}
    queries = ChatQueries(
        chat, cfg.data.path, inject=inject, include_archived=bool(cfg.include_archived)
    )
    return str(opts["out"]), write_bme_cards(chat, opts["out"], Source(cache), queries=queries)


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.hooks.bme CHAT_IN CHAT_OUT --endpoint URL | --cache-dir DIR``."""
    import argparse

    from pipeline.contract.errors import reported

    ap = argparse.ArgumentParser(prog="python -m pipeline.hooks.bme", description=main.__doc__)
    ap.add_argument("chat_in")
    ap.add_argument("chat_out")
    ap.add_argument("--endpoint", help="a running `recall serve` (misses are computed)")
    ap.add_argument("--cache-dir", help="a recall cache_dir (read in process; misses get no card)")
    ap.add_argument("--namespace")
    ap.add_argument("--scope")
    ap.add_argument("--now", help="createdAt/updatedAt (ISO 8601; default: now, UTC)")
    ap.add_argument(
        "--graph",
        help="the ST-BME graph the precompute read (data.path); default: the chat's own "
        "chat_metadata.st_bme_graph, else messages are looked up by text alone",
    )
    args = ap.parse_args(argv)

    def run() -> None:
        keys = ("endpoint", "cache_dir", "namespace")
        settings = {k: getattr(args, k) for k in keys if getattr(args, k)}
        source = Source.from_settings(settings, where="command line", format="bme")
        graph = args.graph or (args.chat_in if _holds_graph(args.chat_in) else None)
        queries = ChatQueries(args.chat_in, graph) if graph else None
        n = write_bme_cards(
            args.chat_in, args.chat_out, source, scope=args.scope, now=args.now, queries=queries
        )
        print(f"{args.chat_out}: {n} bme_recall card(s) written")

    return reported(run)


if __name__ == "__main__":
    raise SystemExit(main())
