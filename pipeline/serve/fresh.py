"""Cheap change detection for the service's stores: a digest of (path, size, mtime) of every file
under the paths the ``data`` config names, re-taken at most every ``interval`` seconds."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def data_paths(cfg: DictConfig) -> list[Path]:
    """Every existing file or folder a value of the ``data`` config names (path, queries, …)."""
    conf = OmegaConf.to_container(cfg.data, resolve=True)
    found = []
    for v in conf.values():
        if isinstance(v, str) and v and os.path.exists(v):
            found.append(Path(v).resolve())
    return sorted(set(found))


def stat_digest(paths: list[Path]) -> str:
    """sha256 of (path, size, mtime_ns) of every file under ``paths``, in sorted order."""
    h = hashlib.sha256()
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            try:
                st = f.stat()
            except FileNotFoundError:  # removed while walking: the next check sees the change
                continue
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


class DataWatch:
    """Tells whether the store changed since :meth:`mark` (checked at most every ``interval`` s)."""

    def __init__(self, paths: list[Path], interval: float) -> None:
        self.paths, self.interval = paths, interval
        self._seen, self._checked = stat_digest(paths), time.monotonic()
        self._lock = threading.Lock()

    @property
    def seen(self) -> str:
        """The digest of the state last marked (at construction: the files as they were then)."""
        return self._seen

    def changed(self) -> str | None:
        """The new digest when the files changed since the last :meth:`mark`, else None."""
        if not self.paths or time.monotonic() - self._checked < self.interval:
            return None
        with self._lock:
            now = stat_digest(self.paths)
            self._checked = time.monotonic()
            return now if now != self._seen else None

    def recheck(self) -> None:
        """Make the next :meth:`changed` look at the files whatever the interval."""
        self._checked = -float("inf")

    def mark(self, digest: str) -> None:
        """Record ``digest`` as the state the service has loaded."""
        self._seen = digest
