"""The stage log of a run (seconds per stage and row counts: the manifest's ``timings_s`` and
``rows``) and the process's peak memory."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager

from pipeline.contract import io

log = logging.getLogger("pipeline.run.runner")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class StageLog:
    """Seconds per stage and row counts of a run (the manifest's ``timings_s`` and ``rows``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rows: dict[str, int] = {}

    @contextmanager
    def stage(self, name: str):
        """Time the body as stage ``name``; a stage that runs once per query group adds up."""
        io.fault_point(f"stage:{name}")
        t0 = time.perf_counter()
        log.info("stage %s ...", name)
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 4)

    def add(self, name: str, n: int) -> None:
        """A per-query count: summed over groups (and over Ray shards)."""
        self.rows[name] = self.rows.get(name, 0) + int(n)

    def most(self, name: str, n: int) -> None:
        """A per-group size (graph edges, hubs): the largest group's, whichever way queries were split."""
        self.rows[name] = max(self.rows.get(name, 0), int(n))
