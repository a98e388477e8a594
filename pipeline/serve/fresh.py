"""Cheap change detection for the service's store: a digest of the stat (size, mtime, mode, owner)
of exactly the files the dataset's adapter reads, re-taken at most every ``interval`` seconds.

Which files (:func:`input_files`): ``data=workspace`` its notes (``*.md``); ``data=oks`` the wiki
pages but ``INDEX.md``, the goal pages, ``.oks/access.json``, ``settings/recall.yaml`` and, when
the recipe reads the injection log (``precompute.uses_log``), ``records/inject.jsonl``;
``data=reme`` ReMe's index under ``metadata/`` (else the notes of ``daily/`` and ``digest/``) and
``meta/*.json``; every other adapter every file under the paths its config names; and every
dataset its ``queries``/``qrels`` files. Files a system writes beside the store that the recall
does not read (OKS's ``.oks/recall-state-*.json`` on every prompt, its ``records/inject.jsonl``)
are never an edit. A file that cannot be stat'ed counts by its error, so a permission change is
a change; an unreadable folder, a symbolic link or a note that is not a regular file (a FIFO) is
a ``DataError`` from the adapter's own listing (``workspace.list_notes``), never a hang.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from pipeline.adapters import reme, reme_index, reme_meta
from pipeline.adapters.workspace import list_notes
from pipeline.run.precompute import uses_log


def data_paths(cfg: DictConfig) -> list[Path]:
    """Every existing file or folder a value of the ``data`` config names (path, queries, …)."""
    conf = OmegaConf.to_container(cfg.data, resolve=True)
    found = []
    for v in conf.values():
        if isinstance(v, str) and v and os.path.exists(v):
            found.append(Path(v).resolve())
    return sorted(set(found))


def _named(conf: dict) -> list[Path]:
    """The ``queries``/``qrels`` files the data config names."""
    return [Path(conf[k]) for k in ("queries", "qrels") if conf.get(k)]


def _under(paths: list[Path]) -> list[Path]:
    """Every file under ``paths`` (a file is itself)."""
    out = []
    for root in paths:
        out += [root] if not root.is_dir() else [p for p in root.rglob("*") if not p.is_dir()]
    return out


def _workspace(cfg: DictConfig, conf: dict) -> list[Path]:
    return list_notes(Path(conf["path"]))


def _oks(cfg: DictConfig, conf: dict) -> list[Path]:
    root = Path(conf["path"])
    files = [f for f in list_notes(root / "wiki") if f.name != "INDEX.md"]
    if (root / "profiles" / "goals").is_dir():
        files += list_notes(root / "profiles" / "goals")
    files += [root / ".oks" / "access.json", root / "settings" / "recall.yaml"]
    return files + ([root / "records" / "inject.jsonl"] if uses_log(cfg) else [])


def _reme(cfg: DictConfig, conf: dict) -> list[Path]:
    root = Path(conf["path"])
    meta = root / "metadata"
    name, version = conf.get("index_name", "default"), conf.get("store_version", "v1")
    chunks = reme_index.chunks_file(meta, name, version)
    if conf.get("index", "auto") != "notes" and chunks.is_file():
        files = [chunks, *_under([meta])]
    else:
        files = [chunks] + [f for d in reme.NOTE_DIRS if (root / d).is_dir()
                            for f in list_notes(root / d)]  # fmt: skip
    return files + [root / "meta" / n for n in reme_meta.SIGNAL_FILES.values()]


# adapters whose inputs are chosen inside their folder; the others read what their config names
READS = {"workspace": _workspace, "oks": _oks, "reme": _reme}


def input_files(cfg: DictConfig) -> list[Path]:
    """The files the dataset's adapter reads (module docstring), sorted, duplicates once; a
    DataError when its listing cannot be taken (an unreadable folder, a non-regular note)."""
    conf = OmegaConf.to_container(cfg.data, resolve=True)
    target = str(conf.get("_target_", "")).rsplit(".", 1)[-1]
    adapter = READS.get(target) if conf.get("path") else None
    files = adapter(cfg, conf) if adapter else _under(data_paths(cfg))
    return sorted({Path(os.path.abspath(f)) for f in [*files, *_named(conf)]})


def stat_digest(files: list[Path]) -> str:
    """sha256 of (path, size, mtime_ns, mode, uid, gid) of every file, in order; a file that
    cannot be stat'ed counts by its error's name (missing, permission denied)."""
    h = hashlib.sha256()
    for f in files:
        try:
            st = os.stat(f)
            facts = f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\0{st.st_uid}\0{st.st_gid}"
        except OSError as exc:
            facts = type(exc).__name__
        h.update(os.fsencode(f) + f"\0{facts}\n".encode())  # a name need not be UTF-8
    return h.hexdigest()


class DataWatch:
    """Tells whether the store changed since :meth:`mark` (checked at most every ``interval`` s).
    ``files()`` lists the files to watch (:func:`input_files`); it may raise a UserError."""

    def __init__(self, files: Callable[[], list[Path]], interval: float) -> None:
        self.files, self.interval = files, interval
        self._seen, self._checked = self.digest(), time.monotonic()
        self._lock = threading.Lock()

    def digest(self) -> str:
        """The digest of the watched files as they are now."""
        return stat_digest(self.files())

    @property
    def seen(self) -> str:
        """The digest of the state last marked (at construction: the files as they were then)."""
        return self._seen

    def due(self) -> bool:
        """True when the next :meth:`changed` would look at the files."""
        return time.monotonic() - self._checked >= self.interval

    def changed(self) -> str | None:
        """The new digest when the files changed since the last :meth:`mark`, else None."""
        if not self.due():
            return None
        with self._lock:
            self._checked = time.monotonic()
            now = self.digest()
            return now if now != self._seen else None

    def recheck(self) -> None:
        """Make the next :meth:`changed` look at the files whatever the interval."""
        self._checked = -float("inf")

    def mark(self, digest: str) -> None:
        """Record ``digest`` as the state the service has loaded."""
        self._seen = digest
