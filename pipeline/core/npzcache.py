"""Corpus-side values on disk as numpy arrays: what ``channels.token_cache`` (the nodes' field
tokens) and ``ops.entity_cache`` (their entity mentions) share; :func:`digest` also keys the
memmapped node vectors (``channels.blocked.memmap_cached``).

- **Keys** are SHA-256 over the exact ordered bytes a value depends on: the caller's format tag
  and settings, ``version.code_version()`` (every pipeline source file and the versions of the
  libraries that shape a result), the Python version, and the texts (:func:`digest`: each text's
  UTF-8 length in row order, then all their bytes).
- **Files** are ``<folder>/<key>.npz``: numpy arrays only, read with ``allow_pickle=False``
  (strings as UTF-8 bytes and lengths, :func:`pack`); written atomically (``io.atomic_write``);
  each folder keeps the ``KEEP_FILES`` most recently used (a read touches its file). A file that
  does not read back whole is a miss: the caller recomputes and writes it again.
- Only a table of at least ``MIN_ROWS`` rows is cached: smaller ones compute in less time than a
  file costs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contract import io
from pipeline.core import version

MIN_ROWS = 50_000  # rows (nodes) of a table from which its corpus-side values are cached on disk
KEEP_FILES = 8  # files a cache folder keeps, the most recently used (1M nodes' tokens: ~220 MB)


def start(fmt: str, settings):
    """A SHA-256 fed the format tag, the code and Python versions and ``repr(settings)``."""
    return hashlib.sha256(repr((fmt, version.code_version(), sys.version, settings)).encode())


def digest(h, name: str, texts) -> None:
    """Feed ``h`` the exact bytes of ``texts`` (strings, None read as "") under ``name``: the
    count, each text's UTF-8 length in row order, then the texts end to end."""
    col = pl.Series(texts, dtype=pl.String).fill_null("")
    h.update(f"\0{name}\0{len(col)}\0".encode())
    h.update(col.str.len_bytes().to_numpy().astype(np.int64).tobytes())
    h.update(col.str.join("").item().encode())


def pack(words) -> tuple[np.ndarray, np.ndarray]:
    """Strings as (their UTF-8 bytes end to end, each one's byte length)."""
    b = [w.encode() for w in words]
    return np.frombuffer(b"".join(b), np.uint8), np.fromiter(map(len, b), np.int64, len(b))


def unpack(data: np.ndarray, lens: np.ndarray) -> list[str]:
    """The strings :func:`pack` packed."""
    raw, ends = data.tobytes(), np.cumsum(lens).tolist()
    return [raw[s:e].decode() for s, e in zip([0, *ends[:-1]], ends)]


def read(path: Path) -> dict[str, np.ndarray] | None:
    """Every array of ``path`` (touched: used now), or None when there is no such file or it
    does not read back whole."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    with contextlib.suppress(OSError):  # gone meanwhile: what was read stands
        os.utime(path)
    return out


def write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` to ``path`` atomically, then the folder cut to its ``KEEP_FILES`` most recently
    used files (a run reading one that goes meanwhile keeps what it opened, or finds none and
    recomputes)."""
    io.atomic_write(path, lambda fh: np.savez(fh, **arrays))
    files = sorted(path.parent.glob("*.npz"), key=lambda p: (_used(p), p.name), reverse=True)
    for p in files[KEEP_FILES:]:
        p.unlink(missing_ok=True)


def _used(p: Path) -> int:
    """When ``p`` was last written or read (ns); 0 when another process removed it meanwhile."""
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return 0
