"""Progress of long work: a tqdm bar (count, rate, time left) on stderr when it is a terminal or
``RECALL_PROGRESS=1``; otherwise (a nightly job's log, a pipe) a log line at about every 10% with the
rate and the time left, for work of known length; nothing with ``RECALL_PROGRESS=0``."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)
STEPS = 10  # log lines per piece of work when there is no terminal
INNER_MIN = 2000  # queries from which one scope's solve or search runs (and reports) in parts


def enabled() -> bool:
    """A bar: read at call time so tests and callers can switch it by environment."""
    return mode() == "bar"


def mode() -> str:
    """``bar`` (a terminal, or RECALL_PROGRESS=1), ``log`` (RECALL_PROGRESS unset or ``auto`` and
    no terminal) or ``off`` (RECALL_PROGRESS=0)."""
    flag = os.environ.get("RECALL_PROGRESS", "auto")
    if flag == "1" or (flag == "auto" and sys.stderr.isatty()):
        return "bar"
    return "log" if flag == "auto" else "off"


def progress(
    items: Iterable[T],
    desc: str,
    *,
    total: int | None = None,
    unit: str = "it",
    size: Callable[[T], int] | None = None,
) -> Iterable[T]:
    """``items`` wrapped in a tqdm bar, or in log lines every ~10% (``logged``), or as is.
    ``size``: each item counts ``size(item)`` units (a batch of texts: its texts), and ``total`` is
    then the sum of the sizes (required)."""
    how = mode()
    if size is not None:
        if how == "bar":
            return _sized_bar(items, desc, total, unit, size)
        return logged(items, desc, total, unit, size=size) if how == "log" and total else items
    if how == "bar":
        from tqdm.auto import tqdm

        return tqdm(
            items,
            desc=desc,
            total=total,
            unit=unit,
            leave=False,
            file=sys.stderr,
            dynamic_ncols=True,
        )
    if how == "log":
        n = total if total is not None else (len(items) if hasattr(items, "__len__") else None)
        if n and n > 1:
            return logged(items, desc, n, unit)
    return items


def inner(items: Iterable[T], desc: str, total: int, unit: str, size: Callable[[T], int]):
    """:func:`progress` of the parts inside one scope's stage (``size`` units each, ``total`` in
    all), or ``items`` as is below ``INNER_MIN`` units: small runs and tests print nothing."""
    if total < INNER_MIN:
        return items
    return progress(items, desc, total=total, unit=unit, size=size)


def _sized_bar(items, desc: str, total: int, unit: str, size) -> Iterator:
    """A tqdm bar that advances by ``size(item)`` after each item is consumed."""
    from tqdm.auto import tqdm

    with tqdm(
        desc=desc, total=total, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True
    ) as bar:
        for item in items:
            yield item
            bar.update(size(item))


def logged(
    items: Iterable[T],
    desc: str,
    total: int,
    unit: str,
    clock=time.monotonic,
    size: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """Yield ``items``; after each of about ``STEPS`` equal shares of ``total`` (and at the end),
    log ``desc: done/total unit (p%), rate unit/s, ~s left``. An item counts ``size(item)`` units
    (1 without ``size``), counted after the caller is done with it."""
    start, done, mark = clock(), 0, 1
    for item in items:
        yield item
        done += 1 if size is None else size(item)
        if done * STEPS >= mark * total or done == total:
            mark = done * STEPS // total + 1
            spent = max(clock() - start, 1e-9)
            rate = done / spent
            left = (total - done) / rate if rate > 0 else float("inf")
            log.info(
                "%s: %d/%d %s (%d%%), %.1f %s/s, ~%.0f s left",
                desc,
                done,
                total,
                unit,
                100 * done // total,
                rate,
                unit,
                left,
            )
