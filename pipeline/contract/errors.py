"""User-facing errors: each names the file, the row or field, and the fix."""

from __future__ import annotations

import sys
from collections.abc import Callable


class UserError(Exception):
    """An error caused by the user's input or config; the CLI prints it on one line and exits 2."""

    exit_code = 2


class DataError(UserError):
    """Bad input data. ``where`` is a file path; ``row`` and ``field`` locate the problem."""

    def __init__(
        self,
        where: str,
        problem: str,
        fix: str,
        *,
        row: int | str | None = None,
        field: str | None = None,
    ) -> None:
        self.where, self.problem, self.fix, self.row, self.field = where, problem, fix, row, field
        loc = str(where)
        if row is not None:
            loc += f", row {row}"
        if field is not None:
            loc += f", field '{field}'"
        super().__init__(f"{loc}: {problem}; fix: {fix}")


class ConfigError(UserError):
    """A bad config value or option name."""


def require_one_of(name: str, value: str, options) -> None:
    """Raise a ConfigError listing ``options`` (and the closest one) if ``value`` is not among them."""
    import difflib

    opts = sorted(options)
    if value in opts:
        return
    close = difflib.get_close_matches(str(value), opts, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"{name}={value!r} is not valid{hint}; choose from {opts}")


def require_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as an int, or a ConfigError naming ``name`` and the fix (a bool, a float or a
    string is not a whole number, nor is one below ``minimum``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={value!r} is not a whole number; give {name}=<an integer>")
    if minimum is not None and value < minimum:
        raise ConfigError(
            f"{name}={value} is below {minimum}; give {name}=<an integer ≥ {minimum}>"
        )
    return value


def reported(call: Callable[[], int | None]) -> int:
    """Run ``call`` (a command's body) and return its exit status: a UserError prints one line
    ``error: …`` on stderr and gives its ``exit_code`` (2), never a traceback. The one error handler
    of the CLI's commands and the report scripts."""
    try:
        return call() or 0
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
