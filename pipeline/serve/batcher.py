"""Micro-batching: misses that arrive within a few milliseconds run as one batch of the query path.

A single worker thread takes the first waiting item, collects more for up to ``window`` seconds
(at most ``max_batch``), then calls ``compute(items) -> results`` once and resolves each item's
future (a result that is an exception is raised to that item's caller alone; an exception from
``compute`` itself to every caller of the batch). ``window=0`` and ``max_batch=1`` run every item alone (the per-request loop).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future


class MicroBatcher:
    """Collects submitted items into batches for ``compute`` on one worker thread."""

    def __init__(self, compute: Callable[[list], list], window: float, max_batch: int) -> None:
        self.compute, self.window, self.max_batch = compute, window, max(1, int(max_batch))
        self._q: queue.Queue = queue.Queue()
        self.batches = 0  # batches run (health, the benchmark)
        self._thread = threading.Thread(target=self._loop, name="recall-batcher", daemon=True)
        self._thread.start()

    def submit(self, item) -> Future:
        """A future of ``item``'s result."""
        fut: Future = Future()
        self._q.put((item, fut))
        return fut

    def close(self) -> None:
        """Stop the worker after the items already queued."""
        self._q.put(None)
        self._thread.join(timeout=30)

    def _collect(self, first) -> list:
        batch, deadline = [first], time.monotonic() + self.window
        while len(batch) < self.max_batch:
            left = deadline - time.monotonic()
            try:
                got = self._q.get(timeout=left) if left > 0 else self._q.get_nowait()
            except queue.Empty:
                break
            if got is None:
                self._q.put(None)  # stop after this batch
                break
            batch.append(got)
        return batch

    def _loop(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch = self._collect(first)
            self.batches += 1
            try:
                results = self.compute([item for item, _f in batch])
            except BaseException as exc:  # every waiter gets the error, the worker lives on
                for _item, fut in batch:
                    fut.set_exception(exc)
                continue
            for (_item, fut), res in zip(batch, results, strict=True):
                if isinstance(res, BaseException):  # this item's own error, not the batch's
                    fut.set_exception(res)
                else:
                    fut.set_result(res)
