"""Small helpers shared by the adapters: file reading, fingerprints, query slicing, and
:func:`finish`, the end of every adapter's ``load``."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import zlib
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from pipeline.adapters import fields
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError
from pipeline.contract.schema import conform

# the columns of two tables several adapters build (``schema.frame``, in this order)
QREL_COLUMNS = ("query_id", "node_id", "relevance")  # node-level judgements
EDGE_COLUMNS = ("src", "dst", "relation", "weight")


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


def _raw(p: Path, fix: str) -> bytes:
    """The bytes of ``p``, decompressed when its suffix is ``.gz`` or ``.zst`` (pyarrow's zstd
    codec, a dependency already); a cut-short or corrupt stream is a DataError."""
    if p.suffix == ".gz":
        try:
            with gzip.open(p, "rb") as fh:
                return fh.read()
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise _corrupt(p, "gzip", exc, fix) from None
    if p.suffix == ".zst":
        import pyarrow as pa

        try:
            with pa.CompressedInputStream(pa.OSFile(str(p)), "zstd") as fh:
                return fh.read()
        except (OSError, pa.ArrowException) as exc:
            raise _corrupt(p, "zstd", exc, fix) from None
    return p.read_bytes()


def _corrupt(p: Path, codec: str, exc: Exception, fix: str) -> DataError:
    """The DataError of a ``codec`` stream that does not decompress."""
    return DataError(
        str(p),
        f"truncated or corrupt {codec} stream ({str(exc)[:120]})",
        fix or f"write the file again (it is cut short or not {codec})",
    )


def read_text(path: str | Path, fix: str = "") -> str:
    """UTF-8 text of a plain, ``.gz`` or ``.zst`` file; a corrupt stream or invalid UTF-8 is a
    DataError (``fix`` says how to mend the file, else a generic fix)."""
    p = Path(path)
    raw = _raw(p, fix)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            str(p), f"not valid UTF-8 at byte {exc.start}", fix or "re-save the file as UTF-8"
        ) from None


def read_parquet(path: str | Path, table: str) -> pl.DataFrame:
    """The contract ``table`` (``schema.conform``) in the Parquet file at ``path``; a file that is
    not Parquet is a DataError."""
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # polars/arrow raise several types for unreadable files
        raise DataError(
            str(path),
            f"cannot be read as Parquet ({str(exc).splitlines()[0][:200]})",
            f"write the {table} table with polars/pyarrow write_parquet",
        ) from None
    return conform(df, table, str(path))


def read_json(path: str | Path):
    """The parsed JSON document at ``path``; a syntax error is a DataError with its line."""
    p = Path(path)
    try:
        return json.loads(read_text(p))
    except json.JSONDecodeError as exc:
        raise DataError(
            str(p), f"invalid JSON ({exc.msg})", "fix the JSON syntax", row=f"line {exc.lineno}"
        ) from None


def read_jsonl(
    path: str | Path, schema: dict | None = None, fix: str = "", *, file_fix: str = ""
) -> list[dict]:
    """One dict per non-blank line of a JSON Lines file (plain, ``.gz`` or ``.zst``); a bad line,
    a non-object or a line that does not fit ``schema`` (``fields.py``) is a DataError naming the
    file and the line, with ``fix`` (else a generic fix); a corrupt stream or invalid UTF-8 is one
    with ``file_fix`` (:func:`read_text`)."""
    p = Path(path)
    rows = []
    # lines end at "\n" only: U+2028/U+2029/U+0085 inside a value (JSON.stringify leaves them
    # raw) are not line ends, as str.splitlines would take them
    for i, line in enumerate(read_text(p, file_fix).split("\n")):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                str(p), f"invalid JSON ({exc.msg})", fix or "fix that line", row=f"line {i + 1}"
            ) from None
        if not isinstance(obj, dict):
            raise DataError(
                str(p),
                "expected a JSON object",
                fix or "write one object per line",
                row=f"line {i + 1}",
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


def no_queries() -> pl.DataFrame:
    """An empty queries table: a dataset read without a queries file."""
    return pl.DataFrame(schema={"query_id": pl.String, "text": pl.String})


def without_empty_columns(queries: pl.DataFrame) -> pl.DataFrame:
    """``queries`` without the optional columns no row of the file gave (all null)."""
    n = queries.height
    keep = [c for c in queries.columns if c in ("query_id", "text") or queries[c].null_count() < n]
    return queries.select(keep)


def finish(
    name: str,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    files: Iterable[str | Path | None],
    limit_queries: int | None,
    **rest: object,
) -> Dataset:
    """The Dataset an adapter's ``load`` returns: ``name``, its tables and the other
    :class:`Dataset` fields in ``rest`` (edges, qrels, skipped, notes, freshness, tables, settings) as
    given; ``fingerprints`` the sha256 of each of ``files`` it was read from (in order, each once;
    a None or empty entry, an option not set, is passed over); cut to the first
    ``limit_queries`` queries (:func:`slice_queries`)."""
    fingerprints = {str(f): sha256_file(f) for f in files if f}
    ds = Dataset(name=name, nodes=nodes, queries=queries, fingerprints=fingerprints, **rest)
    return slice_queries(ds, limit_queries)
