"""Progress bars for long stages: tqdm on stderr, silent when stderr is not a terminal (logs, CI,
pipes) or when ``RECALL_PROGRESS=0``."""

from __future__ import annotations

import os
import sys
from typing import Iterable, TypeVar

T = TypeVar("T")


def enabled() -> bool:
    """Read at call time so tests and callers can switch it by environment."""
    flag = os.environ.get("RECALL_PROGRESS", "auto")
    return flag == "1" or (flag == "auto" and sys.stderr.isatty())


def progress(
    items: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it"
) -> Iterable[T]:
    """``items`` wrapped in a tqdm bar (or returned as is when bars are off)."""
    if not enabled():
        return items
    from tqdm.auto import tqdm

    return tqdm(
        items, desc=desc, total=total, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True
    )
