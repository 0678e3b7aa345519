"""The one error type the command line turns into a sentence for the user.

It lives below every layer so that the API's offline commands, the operator's start-up and
the simulator can all raise it without importing the command line that catches it.
"""

from __future__ import annotations


class CommandError(Exception):
    """An error meant for the user: printed as one sentence, exit status 1 (or `status`)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status
