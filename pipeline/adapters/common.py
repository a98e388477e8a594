"""Small helpers shared by the adapters: file reading, fingerprints, query slicing."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from pathlib import Path

import polars as pl

from pipeline.adapters import fields
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of the file's bytes, read in 1 MiB blocks (the dataset fingerprints)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def require_file(path: str | Path, what: str, key: str = "data.path") -> Path:
    """``path`` as a Path when it is a file, else a DataError that names ``what`` was missing and
    the config ``key`` that sets it."""
    p = Path(path)
    if not p.is_file():
        fix = (
            "check data.path (e.g. data.path=../shared/data/...)"
            if key == "data.path"
            else f"set {key}=<an existing file>"
        )
        raise DataError(str(p), f"{what} not found", fix, field=key)
    return p


def read_text(path: str | Path) -> str:
    """UTF-8 text of a plain or ``.gz`` file; invalid UTF-8 is a DataError."""
    p = Path(path)
    raw = gzip.open(p, "rb").read() if p.suffix == ".gz" else p.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            str(p), f"not valid UTF-8 at byte {exc.start}", "re-save the file as UTF-8"
        ) from None


def read_json(path: str | Path):
    """The parsed JSON document at ``path``; a syntax error is a DataError with its line."""
    p = Path(path)
    try:
        return json.loads(read_text(p))
    except json.JSONDecodeError as exc:
        raise DataError(
            str(p), f"invalid JSON ({exc.msg})", "fix the JSON syntax", row=f"line {exc.lineno}"
        ) from None


def read_jsonl(path: str | Path, schema: dict | None = None, fix: str = "") -> list[dict]:
    """One dict per non-blank line of a JSON Lines file; a bad line or a non-object is a DataError,
    and so is a line that does not fit ``schema`` (``fields.py``; ``fix`` says how to mend it)."""
    p = Path(path)
    rows = []
    # lines end at "\n" only: U+2028/U+2029/U+0085 inside a value (JSON.stringify leaves them
    # raw) are not line ends, as str.splitlines would take them
    for i, line in enumerate(read_text(p).split("\n")):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                str(p), f"invalid JSON ({exc.msg})", "fix that line", row=f"line {i + 1}"
            ) from None
        if not isinstance(obj, dict):
            raise DataError(
                str(p), "expected a JSON object", "write one object per line", row=f"line {i + 1}"
            )
        if schema is not None:
            fields.check(obj, schema, str(p), f"line {i + 1}", fix)
        rows.append(obj)
    return rows


def refuse_symlink(path: Path) -> None:
    """A DataError when ``path`` is a symbolic link: a store's files are read only inside it (a
    link could lead anywhere: another user's files, /etc)."""
    if path.is_symlink():
        raise DataError(
            str(path),
            "is a symbolic link; store files are read only inside the store",
            "replace it with the real file or folder",
        )


def inside(root: Path, path: Path) -> Path:
    """``path`` when neither it nor a folder between ``root`` and it is a symbolic link (else
    :func:`refuse_symlink`'s DataError) and it is a regular file or a folder (a FIFO, a socket or
    a device is a DataError: opening a FIFO blocks forever); it need not exist."""
    p = Path(root)
    for part in Path(path).relative_to(root).parts:
        p = p / part
        refuse_symlink(p)
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # absent (or unreadable): the caller's own check says so
        return Path(path)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise DataError(str(path), "not a regular file", "replace it with the file it should be")
    return Path(path)


def slice_queries(ds: Dataset, limit: int | None) -> Dataset:
    """Keep the first ``limit`` queries (and their qrels); for tests and quick looks."""
    if limit is None or limit >= ds.queries.height:
        return ds
    ds.queries = ds.queries.head(int(limit))
    if ds.qrels is not None:
        ds.qrels = ds.qrels.filter(pl.col("query_id").is_in(ds.queries["query_id"].implode()))
    return ds
