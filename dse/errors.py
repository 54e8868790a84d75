"""User-facing errors: one line naming the file, the key and what is valid; exit status 2."""

from __future__ import annotations

EXIT_USAGE = 2


class UserError(Exception):
    """A mistake in what the user gave us (a space, a table, a flag).

    The message is printed as one line, prefixed with ``where`` (a file, a row, a key path), and the
    process exits with status 2. Never raised for an infeasible design: that is data.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)
