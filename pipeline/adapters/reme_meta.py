"""The maintenance signals ReMe's design keeps in ``meta/*.json`` (``docs/old/auto_recall_design.md``
§2 and ``auto_consolidate_design.md`` §11 at agentscope-ai/ReMe b1c9bf67), as node columns:

| file | fields read | node column |
|---|---|---|
| ``meta/communities.json`` | ``communities`` {path → id} | ``community_id`` (signals use it instead of Leiden) |
| ``meta/access_log.json`` | ``paths`` {path → ``last_hit_count_30d``, ``last_read``} | ``hits_30d``, ``last_access_at`` |
| ``meta/archived.json`` | ``paths`` (or ``archived``): a list of paths | ``archived_store`` |

The columns are always there (null where a file or a path gives nothing), so ``signals`` uses them
instead of computing its own (Leiden communities, the recency archive): a store without
``communities.json`` gets no same-community boost, one without ``archived.json`` filters nothing,
as the design degrades. Each file is loaded on its own: a missing file, another ``version`` or a
malformed one (not JSON, or a field of the wrong type, a non-finite number or an impossible date:
``fields.py``'s schemas) is that signal missing, with a warning naming file, record and field,
never an error; one older than
``max_age_days`` (14) at the reference time is used, with a warning (the design: "warn and still
use"). ``freshness`` says, per signal, ``status`` (fresh | stale | missing | version_mismatch |
invalid), ``computed_at``, ``age_days``: the manifest's ``signals_freshness.store``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import polars as pl

from pipeline.adapters import fields
from pipeline.adapters.common import inside
from pipeline.contract.errors import DataError
from pipeline.contract.schema import TS

log = logging.getLogger(__name__)
META_VERSION = 1
MAX_AGE_DAYS = 14.0
SIGNAL_FILES = {
    "communities": "communities.json",
    "access_log": "access_log.json",
    "archived": "archived.json",
}


SCHEMAS = {  # per signal file: the document's schema, and each entry's (under ``paths``)
    "communities": (fields.REME_COMMUNITIES, None),
    "access_log": (fields.REME_ACCESS_LOG, fields.REME_ACCESS_ENTRY),
    "archived": (fields.REME_ARCHIVED, None),
}


def invalid(name: str, doc: dict, path: Path) -> DataError | None:
    """The first field of signal file ``name`` of the wrong type, a non-finite number or an
    impossible date, as the DataError naming file, record and field; None when it is well formed."""
    head, entry = SCHEMAS[name]

    def records():
        yield fields.REME_META, "document", doc
        yield head, "document", doc
        for p, e in (doc.get("paths") or {}).items() if entry else ():
            yield entry, f"paths[{p!r}]", e

    for schema, row, record in records():  # lazily: entries only once the document fits
        bad = fields.problem(record, schema)
        if bad is not None:
            return DataError(str(path), bad[1], "rewrite or delete the file", row=row, field=bad[0])
    return None


def _read(path: Path, now: dt.datetime, max_age_days: float) -> tuple[dict | None, dict]:
    """(document or None, freshness entry) of one signal file."""
    fresh = {"status": "missing", "computed_at": None, "age_days": None}
    if not path.is_file():
        return None, fresh
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        log.warning("%s is not valid JSON (%s); the signal is treated as missing", path, exc)
        return None, {**fresh, "status": "invalid"}
    if not isinstance(doc, dict):
        log.warning("%s is not a JSON object; the signal is treated as missing", path)
        return None, {**fresh, "status": "invalid"}
    at = fields.utc_datetime(doc.get("computed_at"))
    fresh["computed_at"] = at.isoformat() if at else None
    fresh["age_days"] = round((now - at).total_seconds() / 86_400, 3) if at else None
    if doc.get("version") != META_VERSION:
        log.warning(
            "%s has version %r, expected %d; the signal is treated as missing",
            path,
            doc.get("version"),
            META_VERSION,
        )
        return None, {**fresh, "status": "version_mismatch"}
    bad = invalid(path.stem, doc, path) if path.stem in SCHEMAS else None
    if bad is not None:
        log.warning("%s; the signal is treated as missing", bad)
        return None, {**fresh, "status": "invalid"}
    if at is None or fresh["age_days"] > max_age_days:
        log.warning(
            "%s was computed %s, more than %s days before %s; using it anyway",
            path,
            fresh["computed_at"],
            max_age_days,
            now.isoformat(),
        )
        return doc, {**fresh, "status": "stale"}
    return doc, {**fresh, "status": "fresh"}


def _columns(name: str, doc: dict) -> dict[str, dict]:
    """path → {column: value} of one signal document (entries of the wrong shape are skipped)."""
    if name == "communities":
        comm = doc.get("communities") or {}
        return {p: {"community_id": str(c)} for p, c in comm.items() if c is not None}
    if name == "access_log":
        out = {}
        for p, e in (doc.get("paths") or {}).items():
            if isinstance(e, dict):
                hits = e.get("last_hit_count_30d")
                out[p] = {
                    "hits_30d": hits,
                    "last_access_at": fields.utc_datetime(e.get("last_read")),
                }
        return out
    paths = doc.get("paths", doc.get("archived")) or []
    return {p: {"archived_store": True} for p in paths if isinstance(p, str)}


def load(
    root: Path, now: dt.datetime, max_age_days: float = MAX_AGE_DAYS
) -> tuple[pl.DataFrame, dict]:
    """(one row per path named by a signal file, with every signal column; freshness per signal)."""
    per_path: dict[str, dict] = {}
    freshness = {}
    for name, fname in SIGNAL_FILES.items():
        path = inside(root, root / "meta" / fname)  # a link out of the store is an error
        doc, freshness[name] = _read(path, now, max_age_days)
        if doc is not None:
            for p, cols in _columns(name, doc).items():
                per_path.setdefault(p, {}).update(cols)
    schema = {
        "doc_id": pl.String,
        "community_id": pl.String,
        "hits_30d": pl.Int64,
        "last_access_at": TS,
        "archived_store": pl.Boolean,
    }
    frame = pl.DataFrame([{"doc_id": p, **c} for p, c in sorted(per_path.items())], schema=schema)
    return frame, freshness
