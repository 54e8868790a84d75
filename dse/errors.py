"""User-facing errors: one line naming the file, the key and what is valid; exit status 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

EXIT_USAGE = 2


def did_you_mean(name, names: Iterable[str], n: int = 3) -> str:
    """"did you mean 'x' or 'y'? " for the names closest to ``name`` (difflib's ratio, at least 0.6), or ""
    where none is close: the start of a hint in a one-line error or warning."""
    close = difflib.get_close_matches(name, list(names), n=n) if isinstance(name, str) else []
    return f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""


class UserError(Exception):
    """A mistake in what the user gave us (a space, a table, a flag).

    The message is printed as one line, prefixed with ``where`` (a file, a row, a key path), and the
    process exits with status 2. Never raised for an infeasible design: that is data.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)
