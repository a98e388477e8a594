"""Atomic, deterministic writes: temp file in the same folder, fsync, rename. Manifest last."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from pathlib import Path

import polars as pl


def fault_point(name: str) -> None:
    """Crash-safety tests set ``RECALL_FAULT_AT=<name>`` to SIGKILL the process exactly here."""
    if os.environ.get("RECALL_FAULT_AT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _open_temp(path: Path) -> tuple[int, Path]:
    """Create an empty temp file beside ``path`` with the mode a plain ``open(path, "w")`` would give:
    the existing file's mode when ``path`` is replaced, else 0666 less the umask (``mkstemp`` would
    make every output 0600, unreadable to another user)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o666)  # the kernel applies the umask
        except FileExistsError:
            continue
        break
    try:
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
    except FileNotFoundError:
        pass
    return fd, tmp


def atomic_write(path: str | Path, write) -> None:
    """``write(fh)`` fills a temp file beside ``path``; it is fsynced and renamed over ``path`` only
    when complete (a crash leaves the old file or none, never half of one). A new file gets the
    umask's mode; a replaced one keeps its mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _open_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, then rename), with a fault point halfway for tests."""

    def write(fh):
        fh.write(data[: len(data) // 2])
        fault_point(f"write:{Path(path).name}")  # half of the bytes are in the temp file here
        fh.write(data[len(data) // 2 :])

    atomic_write(path, write)


def write_json(path: str | Path, obj) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``path`` atomically."""
    atomic_write_bytes(
        path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()
    )


def write_parquet(path: str | Path, df: pl.DataFrame) -> None:
    """Parquet with fixed settings (zstd, statistics on) so the same frame gives the same bytes."""
    import io

    buf = io.BytesIO()
    df.write_parquet(
        buf, compression="zstd", compression_level=3, statistics=True, row_group_size=1 << 20
    )
    atomic_write_bytes(path, buf.getvalue())


def config_hash(obj) -> str:
    """First 16 hex digits of the sha256 of ``obj`` as key-sorted JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]
