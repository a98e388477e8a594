"""LoCoMo adapter: dialog turns as nodes, sessions as docs, QA evidence (``dia_id``) as qrels.

Input is a LoCoMo JSON(.gz) file: a list of conversations with ``sample_id``, ``conversation``
(``session_N`` turn lists and ``session_N_date_time``) and ``qa``. Malformed evidence strings
(``'D8:6; D9:17'``, ``'D30:05'``, ``'D:11:26'``, ``'D'``) are split and normalised.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter

import polars as pl

from pipeline.adapters.common import EDGE_COLUMNS, QREL_COLUMNS, finish, read_json, require_file
from pipeline.contract import schema
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?0*(\d+):0*(\d+)")


def _when(value: object, where: str, row: str, field: str) -> dt.datetime | None:
    """Parse LoCoMo's '1:56 pm on 8 May, 2023' (read as UTC); ISO strings are accepted too."""
    if value is None:
        return None
    try:
        return dt.datetime.strptime(str(value).strip(), "%I:%M %p on %d %B, %Y").replace(
            tzinfo=dt.timezone.utc
        )
    except ValueError:
        return schema.parse_timestamp(value, where, row, field)


def evidence_ids(evidence: list[str], skipped: Counter) -> list[str]:
    """Normalised, deduplicated ``D<session>:<turn>`` ids; unparseable tokens are counted and dropped."""
    out: list[str] = []
    for raw in evidence:
        for tok in re.split(r"[;\s]+", str(raw).strip()):
            m = _EVIDENCE.fullmatch(tok)
            if not m:
                if tok:
                    skipped["evidence_token_malformed"] += 1
                continue
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia not in out:
                out.append(dia)
    return out


def _need(obj: dict, key: str, kind: type, where: str, row: str):
    if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
        raise DataError(
            where, f"missing or not a {kind.__name__}", f"give it a '{key}'", row=row, field=key
        )
    return obj[key]


def _conversation_ids(data: object, where: str, conversations: list[str] | None) -> list[str]:
    """Each conversation's ``sample_id``; every id in ``conversations`` must be among them."""
    if not isinstance(data, list):
        raise DataError(
            where, "expected a JSON list of conversations", "pass locomo10.json or a slice of it"
        )
    ids = [_need(c, "sample_id", str, where, f"[{i}]") for i, c in enumerate(data)]
    if conversations is not None:
        missing = sorted(set(conversations) - set(ids))
        if missing:
            raise DataError(
                where,
                f"no conversation {missing} (have {ids})",
                "fix data.conversations",
                field="sample_id",
            )
    return ids


def _turns(
    conv: dict, sid: str, where: str, nodes: list[dict], edges: list[dict]
) -> tuple[dt.datetime | None, set]:
    """Append the conversation's turns (in session order) to ``nodes`` and the ``next_turn`` chain to
    ``edges``; returns (the last session's time, the ``dia_id``s seen)."""
    turns = _need(conv, "conversation", dict, where, sid)
    sessions = sorted(int(m.group(1)) for k in turns if (m := _SESSION.fullmatch(k)))
    seq, prev, last_when, dias = 0, None, None, set()
    for n in sessions:
        srow = f"{sid} session_{n}"
        when = _when(turns.get(f"session_{n}_date_time"), where, srow, f"session_{n}_date_time")
        for j, turn in enumerate(_need(turns, f"session_{n}", list, where, sid)):
            trow = f"{srow}[{j}]"
            dia = _need(turn, "dia_id", str, where, trow)
            speaker = _need(turn, "speaker", str, where, trow)
            text = f"{speaker}: {_need(turn, 'text', str, where, trow)}"
            if turn.get("blip_caption"):
                text += f" [shares image: {turn['blip_caption']}]"
            node_id = f"{sid}:{dia}"
            nodes.append(
                {
                    "node_id": node_id,
                    "text": text,
                    "doc_id": f"{sid}/session_{n}",
                    "speaker": speaker,
                    "seq": seq,
                    "created_at": when,
                    "title": None,
                }
            )
            if prev is not None:
                edges.append({"src": prev, "dst": node_id, "relation": "next_turn", "weight": 1.0})
            prev, seq, last_when = node_id, seq + 1, when
            dias.add(dia)
    return last_when, dias


def _questions(
    conv: dict,
    sid: str,
    where: str,
    last_when: dt.datetime | None,
    dias: set,
    skipped: Counter,
    queries: list[dict],
    qrels: list[dict],
) -> None:
    """Append the conversation's QA questions (asked at ``last_when``) to ``queries`` and their
    evidence turns to ``qrels``; evidence naming no turn of the conversation is counted in ``skipped``."""
    for i, qa in enumerate(conv.get("qa") or []):
        qrow, qid = f"{sid} qa[{i}]", f"{sid}:q{i}"
        question = _need(qa, "question", str, where, qrow)
        evidence = _need(qa, "evidence", list, where, qrow)
        cat = qa.get("category")
        queries.append(
            {
                "query_id": qid,
                "text": question,
                "group": None if cat is None else str(cat),
                "doc_scope": [sid],
                "now": last_when,
            }
        )
        for dia in evidence_ids(evidence, skipped):
            if dia not in dias:
                skipped["evidence_turn_missing"] += 1
            qrels.append({"query_id": qid, "node_id": f"{sid}:{dia}", "relevance": 1})


def _frames(
    nodes: list[dict], edges: list[dict], queries: list[dict], qrels: list[dict], where: str
) -> dict[str, pl.DataFrame]:
    """The four tables, typed and conformed to the schema."""
    return {
        "nodes": schema.frame(
            nodes,
            "nodes",
            ("node_id", "text", "doc_id", "speaker", "seq", "created_at", "title"),
            where,
        ),
        "edges": schema.frame(edges, "edges", EDGE_COLUMNS, where),
        "queries": schema.frame(
            queries, "queries", ("query_id", "text", "group", "doc_scope", "now"), where
        ),
        "qrels": schema.frame(qrels, "qrels", QREL_COLUMNS, where),
    }


def load(
    path: str,
    *,
    name: str = "locomo",
    conversations: list[str] | None = None,
    limit_queries: int | None = None,
) -> Dataset:
    """Load a LoCoMo file; ``conversations`` keeps only those ``sample_id``s."""
    p = require_file(path, "LoCoMo file")
    where = str(p)
    data = read_json(p)
    ids = _conversation_ids(data, where, conversations)
    skipped: Counter = Counter()
    nodes: list[dict] = []
    edges: list[dict] = []
    queries: list[dict] = []
    qrels: list[dict] = []
    for conv, sid in zip(data, ids):
        if conversations is not None and sid not in conversations:
            continue
        last_when, dias = _turns(conv, sid, where, nodes, edges)
        _questions(conv, sid, where, last_when, dias, skipped, queries, qrels)
    frames = _frames(nodes, edges, queries, qrels, where)
    return finish(
        name,
        frames["nodes"],
        frames["queries"],
        [p],
        limit_queries,
        edges=frames["edges"],
        qrels=frames["qrels"],
        skipped=skipped,
    )
