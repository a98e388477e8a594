"""ReMe's one write after retrieval: ``meta/access_log.json`` (``docs/old/auto_recall_design.md`` §9
at agentscope-ai/ReMe b1c9bf67: "retrieve only reads the workspace ... its only write is
meta/access_log.json", hits deduplicated per (path, day)).

The design names the per-path fields (``last_read``, ``last_hit_count_30d``) but gives no example,
so the file's layout is this module's (``version`` 1)::

    {"version": 1, "computed_at": ISO, "window_days": 30,
     "paths": {"daily/a.md": {"last_read": ISO, "last_hit_count_30d": 2,
                              "hit_days": ["2026-11-30", "2026-12-01"]}}}

A path hit by any query of the run on day D is logged once for D (``hit_days`` is the set of days in
the 30-day window, its end day included); ``last_read`` is the latest hit time. The window ends on the
latest day the log has seen (the run's ``now``, the log's ``computed_at`` or a logged hit day,
whichever is last), so feeding runs in any order gives the same file: feeding 12-05 then 12-01 keeps
both days. The merge only adds: entries of other paths are kept (their counts re-windowed); an entry
with no ``hit_days`` (a count another writer kept) that the run did not hit is kept as it is, and one
that the run hits starts its ``hit_days`` from its ``last_read`` day. Bodies and front matter are never
touched; the file is replaced atomically (temp file + rename), so a crash leaves the old one.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl

from pipeline.adapters import reme_meta
from pipeline.adapters.common import inside
from pipeline.contract.errors import DataError, UserError
from pipeline.contract.io import atomic_write_bytes
from pipeline.writeback.common import store_root

ACCESS_LOG_VERSION = 1
WINDOW_DAYS = 30
LOG_PATH = "meta/access_log.json"


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_log(path: Path) -> dict | None:
    """The access log at ``path`` (None when absent); another version is a DataError (never merged)."""
    if not path.is_file():
        return None
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(
            str(path), f"not valid JSON ({exc})", "restore it or move it away"
        ) from None
    if not isinstance(log, dict) or log.get("version") != ACCESS_LOG_VERSION:
        got = log.get("version") if isinstance(log, dict) else type(log).__name__
        raise DataError(
            str(path),
            f"access log version {got!r}, this writer merges version {ACCESS_LOG_VERSION}",
            "move the old file away (it is not merged into)",
            field="version",
        )
    bad = reme_meta.invalid("access_log", log, path)
    if bad is not None:  # never merged into: the writer would carry the bad value on
        raise bad
    return log


def _window_end(entries: dict, computed_at, now: dt.datetime) -> dt.date:
    """The last day of the 30-day window: the latest of ``now``, ``computed_at`` and any hit day."""
    days = [now.date().isoformat(), str(computed_at or "")[:10]]
    days += [d for e in entries.values() for d in e.get("hit_days") or []]
    return dt.date.fromisoformat(max(d for d in days if d))


def merge(log: dict | None, paths: list[str], now: dt.datetime) -> dict:
    """The next access log after ``paths`` were hit at ``now`` (a pure function of its inputs, and
    the same whatever order runs are merged in)."""
    now = now.astimezone(dt.timezone.utc)
    entries = {p: dict(e) for p, e in ((log or {}).get("paths") or {}).items()}
    for p in set(paths):
        e = entries.setdefault(p, {})
        last = e.get("last_read")
        if "hit_days" not in e and last:  # another writer's count: its last_read day is one hit day
            e["hit_days"] = [str(last)[:10]]
        e["hit_days"] = sorted(set(e.get("hit_days") or []) | {now.date().isoformat()})
        e["last_read"] = max(last, _iso(now)) if last else _iso(now)
    end = _window_end(entries, (log or {}).get("computed_at"), now)
    lo = (end - dt.timedelta(days=WINDOW_DAYS - 1)).isoformat()
    for e in entries.values():
        if "hit_days" in e:
            e["hit_days"] = [d for d in e["hit_days"] if lo <= d <= end.isoformat()]
            e["last_hit_count_30d"] = len(e["hit_days"])
    old_at = (log or {}).get("computed_at")
    return {
        "version": ACCESS_LOG_VERSION,
        "computed_at": max(old_at, _iso(now)) if old_at else _iso(now),
        "window_days": WINDOW_DAYS,
        "paths": dict(sorted(entries.items())),
    }


def write_back(
    run_dir: Path, cfg: dict, rows: pl.DataFrame, now: dt.datetime, out: str | None
) -> Path:
    """Merge the run's hit paths (``doc_id`` of its recall rows) into the store's access log."""
    if "doc_id" not in rows.columns:
        raise UserError(f"{run_dir}/recall.parquet has no doc_id column; rerun with data=reme")
    root = store_root(run_dir, cfg, "reme", "a ReMe store", "pass --out <store root>", out)
    if not root.is_dir():
        raise UserError(f"{root}: no such ReMe store; pass --out <store root>")
    dst = inside(root, root / LOG_PATH)
    paths = rows["doc_id"].drop_nulls().unique().sort().to_list()
    new = merge(read_log(dst), paths, now)
    data = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_bytes(dst, data.encode("utf-8"))
    return dst
