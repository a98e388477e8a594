"""The on-disk layout of the recall cache: namespaces, generations, the pointer and the lock.

::

    <cache_dir>/recall/<namespace>/
        CURRENT                 the live generation's folder name (replaced atomically)
        LOCK                    flock()ed by a precompute for its whole run
        g-000007/               one finished build (never changed once published)
            scope=<scope id>/data.parquet   entries of one scope: key columns, query_text, injection, rows
            _keys.arrow                     every entry's key (what the next build compares)
            _manifest.json                  recipe, partitions (bytes, sha256), hits (last)

A precompute takes ``LOCK`` (a second one waits), builds ``g-<n+1>.tmp-<pid>`` beside the live
generation (a partition whose entries did not change is a hard link to the live one's file),
renames it to ``g-<n+1>`` and then replaces ``CURRENT``: a reader sees the old build or the new
one, never half of one nor a mix. The two newest generations are kept (a reader still loading
the previous one finishes); older ones, unfinished ``*.tmp-*`` folders and ``.CURRENT.<hex>.tmp`` files of a pointer write
that was killed are removed under the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from pipeline.contract import io

POINTER, LOCK = "CURRENT", "LOCK"
GEN = re.compile(r"^g-(\d{6,})$")
KEEP = 2


def recall_root(cache_dir: str | Path) -> Path:
    """``<cache_dir>/recall``: the folder of every namespace."""
    return Path(cache_dir) / "recall"


def namespace_dir(cache_dir: str | Path, namespace: str) -> Path:
    """The folder of one namespace."""
    return recall_root(cache_dir) / namespace


def namespaces(cache_dir: str | Path) -> list[str]:
    """The namespaces with a published generation, sorted."""
    root = recall_root(cache_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / POINTER).is_file())


def current(ns_dir: Path) -> str | None:
    """The live generation's folder name, or None before the first build (and when ``CURRENT``
    is missing, unreadable or does not name a generation)."""
    try:
        name = (ns_dir / POINTER).read_bytes().decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if GEN.match(name) else None


@contextlib.contextmanager
def locked(ns_dir: Path) -> Iterator[None]:
    """Hold the namespace's lock (``flock`` on ``LOCK``, exclusive, waiting for another holder)."""
    ns_dir.mkdir(parents=True, exist_ok=True)
    with open(ns_dir / LOCK, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def begin(ns_dir: Path) -> tuple[Path, str]:
    """(a new, empty temporary folder for the next generation, that generation's name); call
    under :func:`locked`."""
    live = current(ns_dir)
    n = int(GEN.match(live).group(1)) + 1 if live else 1
    name = f"g-{n:06d}"
    tmp = ns_dir / f"{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp, name


def publish(ns_dir: Path, tmp: Path, name: str) -> Path:
    """Rename the finished ``tmp`` to ``name``, point ``CURRENT`` at it, prune old generations;
    returns the published folder."""
    final = ns_dir / name
    shutil.rmtree(final, ignore_errors=True)  # a crashed run's leftover of the same number
    os.replace(tmp, final)
    io.atomic_write_bytes(ns_dir / POINTER, (name + "\n").encode())
    gens = sorted(p.name for p in ns_dir.iterdir() if GEN.match(p.name))
    for old in gens[:-KEEP]:
        shutil.rmtree(ns_dir / old, ignore_errors=True)
    for p in ns_dir.glob("g-*.tmp-*"):
        shutil.rmtree(p, ignore_errors=True)
    for p in ns_dir.glob(f".{POINTER}.*.tmp"):  # a pointer write killed halfway (io.atomic_write)
        p.unlink(missing_ok=True)
    return final


def link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (a copy where links are refused)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
