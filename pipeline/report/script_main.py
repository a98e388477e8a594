"""The one error convention of the report scripts (scripts/ci_table.py, scripts/lodo.py): print what
``make_text`` returns; a user error prints one line on stderr and gives exit status 2."""
from __future__ import annotations

import sys
from collections.abc import Callable

from pipeline.errors import UserError


def print_or_exit_2(make_text: Callable[[], str]) -> int:
    try:
        print(make_text(), end="")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
