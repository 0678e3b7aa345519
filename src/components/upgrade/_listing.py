"""How a condition's message names the nodes it is about: the first `LISTED`, then how
many more (the status lists every node; a message naming thousands would be unreadable)."""

from __future__ import annotations

from collections.abc import Sequence

LISTED = 10


def listed(items: Sequence[str], sep: str) -> str:
    """The first `LISTED` of `items` joined by `sep`, then `<sep>and N more`."""
    more = f"{sep}and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return sep.join(items[:LISTED]) + more
