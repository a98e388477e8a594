"""Field schemas of the native store files the adapters read, checked by one function.

Each schema maps a record's field to a :class:`Field` (kind, required, minimum). :func:`check`
reports the first field of the wrong type, a non-finite number (``NaN``/``Infinity``, which
Python's JSON reader accepts) or an impossible date as one :class:`DataError` naming the file,
the record and the field; :func:`problem` gives the same text without raising (for the signals
ReMe's design drops with a warning instead). ``SCHEMAS`` lists every schema, so a test can walk
every field of every store file.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from pipeline.contract.errors import DataError


@dataclass(frozen=True)
class Field:
    """One field: ``kind`` (a key of ``KINDS``), whether it must be present and non-null, and the
    smallest value allowed (numbers)."""

    kind: str
    required: bool = False
    min: float | None = None


def finite_number(v) -> bool:
    """True for an int or float that is finite (not a bool, NaN or ±inf)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _id(v) -> bool:
    return v is None or isinstance(v, str) or _int(v)


def epoch_utc(seconds) -> dt.datetime | None:
    """A POSIX time in seconds as a UTC datetime; None when it is not a finite number or names no
    date Python can hold (years 1–9999): the caller's DataError says which field and how to fix it."""
    if not finite_number(seconds):
        return None
    try:
        return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):  # OSError: past the platform's time_t
        return None


def utc_datetime(v) -> dt.datetime | None:
    """An ISO date-time string as a UTC datetime (naive: UTC); None when it is no ISO date-time or
    names no instant of years 1–9999 in UTC (``9999-12-31T23:59:59-23:59``)."""
    if not isinstance(v, str):
        return None
    try:
        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        return (
            t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)
        )
    except (ValueError, OverflowError):
        return None


def _epoch_s(v) -> bool:
    return epoch_utc(v) is not None


def _date(v) -> bool:
    try:
        return isinstance(v, str) and dt.date.fromisoformat(v) is not None
    except ValueError:
        return False


KINDS = {  # kind -> (test, what the error says the value should be)
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (_int, "an integer"),
    "number": (finite_number, "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "datetime": (lambda v: utc_datetime(v) is not None, "an ISO date-time of years 1–9999 UTC"),
    "epoch_s": (_epoch_s, "a time in seconds since 1970 of years 1–9999"),
    "list[str]": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), None),
    "list[number]": (lambda v: isinstance(v, list) and all(map(finite_number, v)), None),
    "list[dict]": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), None),
    "list[date]": (lambda v: isinstance(v, list) and all(map(_date, v)), None),
    "map[int]": (lambda v: isinstance(v, dict) and all(map(_int, v.values())), None),
    "map[id]": (lambda v: isinstance(v, dict) and all(map(_id, v.values())), None),
}
WHAT = {
    "list[str]": "a list of strings",
    "list[number]": "a list of finite numbers",
    "list[dict]": "a list of objects",
    "list[date]": "a list of YYYY-MM-DD dates",
    "map[int]": "an object of integers",
    "map[id]": "an object of string or integer ids",
}

# ReMe (agentscope-ai/ReMe @ c8e12487, pipeline/adapters/reme_index.py, reme_meta.py)
REME_CHUNK = {  # metadata/file_store/file_chunks_<name>_<version>.jsonl.zst: one FileChunk a line
    "id": Field("str", True),
    "text": Field("str", True),
    "path": Field("str", True),
    "start_line": Field("int", True, 1),
    "end_line": Field("int", True, 1),
    "_embedding_f16_b64": Field("str"),
    "embedding": Field("list[number]"),
}
REME_FILE_NODE = {  # metadata/file_graph/<name>.jsonl.zst: one FileNode a line
    "path": Field("str", True),
    "st_mtime": Field("epoch_s", True, 0),
    "links": Field("list[dict]"),
    "chunk_ids": Field("list[str]"),
    "front_matter": Field("dict"),
}
REME_FILE_LINK = {"target_path": Field("str"), "target_anchor": Field("str")}  # FileNode.links[]
REME_META = {"version": Field("int"), "computed_at": Field("datetime")}  # meta/*.json head
REME_COMMUNITIES = {"communities": Field("map[id]")}  # meta/communities.json
REME_ACCESS_LOG = {"paths": Field("dict")}  # meta/access_log.json
REME_ACCESS_ENTRY = {  # meta/access_log.json paths.<path> (pipeline/writeback/reme.py)
    "last_read": Field("datetime"),
    "last_hit_count_30d": Field("int", False, 0),
    "hit_days": Field("list[date]"),
}
REME_ARCHIVED = {"paths": Field("list[str]"), "archived": Field("list[str]")}  # meta/archived.json

# OKS (open-agent-power/open-knowledge-studio @ 6a281b47, pipeline/adapters/oks.py)
OKS_RECALL_STATE = {"n": Field("int", False, 0), "seen": Field("map[int]")}  # .oks/recall-state-*
OKS_INJECT = {  # records/inject.jsonl: one injection a line (user-prompt-recall.py)
    "session_id": Field("str"),
    "turn": Field("int", False, 0),
    "agent_id": Field("str"),
    "cwd": Field("str"),
    "prompt_hash": Field("str"),
    "slugs": Field("list[str]"),
    "rels": Field("list[number]"),
    "injected_at": Field("datetime"),
}

# ST-BME (@ 590da3b, pipeline/adapters/bme_store.py, bme_nodes.py)
BME_SYNC_MANIFEST = {  # ST-BME_sync_<chat>.json, format 2
    "formatVersion": Field("int", True),
    "chunks": Field("list[dict]"),
    "meta": Field("dict"),
}
BME_SYNC_CHUNK = {"kind": Field("str"), "filename": Field("str")}  # manifest chunks[]
BME_CHUNK_FILE = {"records": Field("list")}  # ST-BME_sync_<chat>.__<n>.json
BME_GRAPH = {  # the graph object: export, chat metadata or sync snapshot
    "nodes": Field("list"),
    "edges": Field("list"),
    "knowledgeState": Field("dict"),
    "regionState": Field("dict"),
    "timelineState": Field("dict"),
    "summaryState": Field("dict"),
    "historyState": Field("dict"),
}
BME_NODE = {  # graph.nodes[] (the fields bme_nodes.node_row reads besides its numbers)
    "type": Field("str"),
    "fields": Field("dict"),
    "seqRange": Field("list[number]"),
    "archived": Field("bool"),
    "parentId": Field("str"),
    "scope": Field("dict"),
    "storyTime": Field("dict"),
    "storyTimeSpan": Field("dict"),
    "prevId": Field("str"),
    "nextId": Field("str"),
}

SCHEMAS = {
    "reme chunk": REME_CHUNK,
    "reme file node": REME_FILE_NODE,
    "reme file link": REME_FILE_LINK,
    "reme meta": REME_META,
    "reme communities": REME_COMMUNITIES,
    "reme access log": REME_ACCESS_LOG,
    "reme access entry": REME_ACCESS_ENTRY,
    "reme archived": REME_ARCHIVED,
    "oks recall state": OKS_RECALL_STATE,
    "oks inject": OKS_INJECT,
    "bme sync manifest": BME_SYNC_MANIFEST,
    "bme sync chunk": BME_SYNC_CHUNK,
    "bme chunk file": BME_CHUNK_FILE,
    "bme graph": BME_GRAPH,
    "bme node": BME_NODE,
}


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def problem(record, schema: dict[str, Field]) -> tuple[str | None, str] | None:
    """(field, what is wrong) of the first bad field of ``record``; None when it fits ``schema``.
    The field is None when ``record`` itself is not a JSON object."""
    if not isinstance(record, dict):
        return None, f"record is {_show(record)}, not an object"
    for name, f in schema.items():
        value = record.get(name)
        if value is None:
            if f.required:
                return name, f"'{name}' is missing"
            continue
        test, what = KINDS[f.kind]
        if not test(value):
            return name, f"'{name}' is {_show(value)}, not {what or WHAT[f.kind]}"
        if f.min is not None and value < f.min:
            return name, f"'{name}' is {_show(value)}, below {f.min:g}"
        big = next((x for x in _ints(value) if not -(2**63) <= x < 2**63), None)
        if big is not None:  # JSON allows any integer; the columns hold 64 bits
            return name, f"'{name}' holds {_show(big)}, past the 64-bit integers"
    return None


def _ints(value) -> list[int]:
    """The integers of a field value (itself, a list's items, an object's values)."""
    items = (
        value if isinstance(value, list) else value.values() if isinstance(value, dict) else [value]
    )
    return [x for x in items if _int(x)]


def check(record, schema: dict[str, Field], where: str, row, fix: str):
    """``record`` when it fits ``schema``; else a DataError naming ``where`` (the file), ``row``
    (the record) and the field, with ``fix``."""
    bad = problem(record, schema)
    if bad is not None:
        raise DataError(where, bad[1], fix, row=row, field=bad[0])
    return record
