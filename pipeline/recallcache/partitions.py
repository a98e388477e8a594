"""Writing and checking one generation of the recall cache (``pipeline.run.precompute`` writes it): the key index and its
check against the partitions, the partitions themselves (a hard link to the
previous generation's file where nothing changed)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings
from io import BytesIO
from pathlib import Path

import polars as pl

from pipeline.contract import io
from pipeline.core.progress import progress
from pipeline.recallcache import layout

KEY_COLUMNS = ["text_key", "scope_version", "recipe"]
ENTRY_COLUMNS = ["query_text", "injection"]
FIRST = ["query_id", "query_text", *KEY_COLUMNS, "injection"]  # a partition's leading columns
# every entry's key in one file (not *.parquet, so `**/*.parquet` scans see partitions only)
KEY_INDEX = "_keys.arrow"
INDEX_COLUMNS = ["query_id", *KEY_COLUMNS, "scope"]


def partition_path(gen: Path, scope: str) -> Path:
    """The Parquet file of one scope's partition in the generation folder ``gen``."""
    return gen / f"scope={scope}" / "data.parquet"


def _scopes_on_disk(gen: Path) -> set[str]:
    return {p.parent.name.split("=", 1)[1] for p in gen.glob("scope=*/data.parquet")}


def file_facts(path: Path) -> dict:
    """{bytes, sha256} of a partition file (what the manifest records and the next run checks)."""
    data = path.read_bytes()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def listed_partitions(gen: Path) -> dict | None:
    """The manifest's ``partitions`` of ``gen`` ({scope: {queries, bytes, sha256, …}}), or None
    when it has no readable manifest."""
    try:
        parts = json.loads((gen / "_manifest.json").read_text()).get("partitions", {})
    except (OSError, ValueError, AttributeError):
        return None
    return parts if isinstance(parts, dict) else None


def not_as_listed(gen: Path, parts: dict) -> list[str]:
    """The scopes of ``gen`` whose partition is not the file the manifest ``parts`` records: not
    listed, not a regular file (a folder, a FIFO, a link), other bytes or sha256 (damaged,
    rewritten with other columns or types)."""
    bad = []
    for scope in sorted(_scopes_on_disk(gen)):
        path, want = partition_path(gen, scope), parts.get(scope)
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            regular = False
        facts = {k: want.get(k) for k in ("bytes", "sha256")} if isinstance(want, dict) else None
        if not regular or facts is None or file_facts(path) != facts:
            bad.append(scope)
    return bad


def index_is_valid(gen: Path, hashed: bool = False) -> bool:
    """True when ``gen`` finished (manifest there), has a key index, and its partitions are exactly
    the manifest's, each with the bytes and sha256 it records (``hashed``: the caller has just
    checked those with :func:`not_as_listed`), holding the index's query counts."""
    parts, idx = listed_partitions(gen), gen / KEY_INDEX
    if parts is None or not idx.is_file():
        return False
    if set(parts) != _scopes_on_disk(gen) or (not hashed and not_as_listed(gen, parts)):
        return False
    counts = dict(pl.read_ipc(BytesIO(idx.read_bytes()))["scope"].value_counts().iter_rows())
    return counts == {s: p["queries"] for s, p in parts.items()}


def read_keys(gen: Path | None, hashed: bool = False) -> pl.DataFrame:
    """(query_id, text_key, scope_version, recipe, scope) of every entry of the generation ``gen``:
    its key index when :func:`index_is_valid` (``hashed`` passed on), else read back from every
    partition."""
    if gen is not None and index_is_valid(gen, hashed):
        return pl.read_ipc(BytesIO((gen / KEY_INDEX).read_bytes()))
    return scan_keys(gen)


def usable_keys(gen: Path | None) -> tuple[Path | None, pl.DataFrame]:
    """(``gen``, :func:`read_keys` of it); (None, no keys) with a warning when a partition of
    ``gen`` does not read (truncated, damaged) or is not the file its manifest records
    (:func:`not_as_listed`): a damaged generation is never reused (a hard link to its file would
    carry the damage into the next manifest), so every entry is computed again and the next
    generation is whole."""
    parts = listed_partitions(gen) if gen is not None else None
    try:
        if parts is not None and not_as_listed(gen, parts):  # reusing it would bless the damage
            raise ValueError("not the file its manifest records")
        return gen, read_keys(gen, hashed=parts is not None)  # each partition hashed once
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        why = str(exc) if type(exc) is ValueError else type(exc).__name__
        warnings.warn(
            f"recall cache {gen.parent.name}/{gen.name}: a partition does not read "
            f"({why}); every entry is computed again",
            stacklevel=2,
        )
        return None, scan_keys(None)


def scan_keys(gen: Path | None) -> pl.DataFrame:
    """:func:`read_keys` from the partitions themselves (one file read per scope)."""
    frames = [
        pl.read_parquet(p, columns=["query_id", *KEY_COLUMNS])
        .unique()
        .with_columns(scope=pl.lit(p.parent.name.split("=", 1)[1]))
        for p in (sorted(gen.glob("scope=*/data.parquet")) if gen is not None else [])
    ]
    schema = {c: pl.String for c in INDEX_COLUMNS}
    return pl.concat(frames).select(INDEX_COLUMNS) if frames else pl.DataFrame(schema=schema)


def write_key_index(gen: Path, keys: pl.DataFrame) -> None:
    """The key index: after :func:`write_partitions` the generation holds exactly ``keys``."""
    buf = BytesIO()
    keys.select(pl.col(c).cast(pl.String) for c in INDEX_COLUMNS).sort(
        "scope", "query_id"
    ).write_ipc(buf)
    io.atomic_write_bytes(gen / KEY_INDEX, buf.getvalue())


def old_rows(old: Path | None, scopes) -> pl.DataFrame | None:
    """The rows of ``scopes``' partitions in generation ``old`` (None when it has none of them)."""
    paths = [partition_path(old, s) for s in sorted(scopes)] if old is not None else []
    frames = [pl.read_parquet(p) for p in paths if p.is_file()]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _changed_scopes(hit: pl.DataFrame, cached: pl.DataFrame, scopes: set) -> set:
    """The scopes among ``scopes`` whose cached query set differs from the hits' (queries gone or
    moved): one symmetric anti-join, not a filter per scope (10,000 scopes took minutes)."""
    pairs = ["scope", "query_id"]
    want = hit.select(pairs).filter(pl.col("scope").is_in(list(scopes)))
    have = cached.select(pairs).filter(pl.col("scope").is_in(list(scopes)))
    diff = pl.concat([want.join(have, on=pairs, how="anti"), have.join(want, on=pairs, how="anti")])
    return set(diff["scope"].to_list())


def _injection_changed(old: Path | None, hit: pl.DataFrame, inj: pl.DataFrame | None) -> set:
    """Scopes of hit queries whose stored injection block differs from the new one."""
    if old is None or not hit.height:
        return set()
    prev = old_rows(old, set(hit["scope"].to_list()))
    if prev is None:
        return set()
    stored = prev.unique("query_id", keep="first").select("query_id", "injection")
    now = inj if inj is not None else stored.select("query_id", injection=pl.lit(None, pl.String))
    both = hit.select("query_id", "scope").join(stored, on="query_id", how="left")
    both = both.join(now, on="query_id", how="left", suffix="_new")
    same = both["injection"].eq_missing(both["injection_new"])
    return set(both.filter(~same)["scope"].to_list())


def _frame(scope, keep, old, fresh, inj) -> pl.DataFrame:
    """One partition: the kept entries of the previous generation and the new ones, with their
    injection blocks, leading columns first, sorted by query then rank (no recall first)."""
    parts = [fresh] if fresh is not None else []
    if old is not None and partition_path(old, scope).is_file():
        prev = pl.read_parquet(partition_path(old, scope))
        parts.insert(0, prev.filter(pl.col("query_id").is_in(keep)))
    frame = pl.concat([p.drop("injection", strict=False) for p in parts], how="diagonal_relaxed")
    if inj is not None:
        frame = frame.join(inj, on="query_id", how="left", maintain_order="left")
    else:
        frame = frame.with_columns(injection=pl.lit(None, pl.String))
    rest = [c for c in frame.columns if c not in FIRST]
    return frame.select(*FIRST, *rest).sort(["query_id", "rank"], nulls_last=False)


def write_partitions(gen: Path, old, keys, hit, new, cached, inj) -> dict:
    """Every partition of the new generation ``gen``: rewritten where its entries changed (misses,
    queries gone, injection blocks changed), else a hard link to the previous generation's file.
    ``cached`` is the previous generation's keys; returns rewritten/removed scope ids and each
    partition's file facts."""
    old_scopes = _scopes_on_disk(old) if old is not None else set()
    cur = set(keys["scope"].to_list())
    dirty = set(new["scope"].to_list()) if new.height else set()
    dirty |= _changed_scopes(hit, cached, cur & old_scopes) | (cur - old_scopes)
    dirty |= _injection_changed(old, hit, inj)
    kept = hit.partition_by("scope", as_dict=True)
    fresh = new.partition_by("scope", as_dict=True) if new.height else {}
    files = {}
    for s in progress(sorted(cur), "recall cache partitions", unit="scope"):
        path = partition_path(gen, s)
        if s in dirty:
            keep = (
                kept[(s,)]["query_id"].implode()
                if (s,) in kept
                else pl.Series([], dtype=pl.String).implode()
            )
            got = fresh[(s,)].drop("scope") if (s,) in fresh else None
            io.write_parquet(path, _frame(s, keep, old, got, inj))
        else:
            layout.link_or_copy(partition_path(old, s), path)
        files[s] = file_facts(path)
    return {"rewritten": sorted(dirty & cur), "removed": sorted(old_scopes - cur), "files": files}
