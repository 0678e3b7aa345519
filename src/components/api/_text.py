"""Lists of names in messages: every status, event and log line shortens them the same way."""

from __future__ import annotations

from collections.abc import Sequence


def names_and_more(items: Sequence[str], limit: int) -> str:
    """`a, b, c` or, past `limit` items, `a, b, c and 7 more`; the caller picks the order.

    A condition or event naming every one of 5,000 nodes would be unreadable (and large);
    the count says how many were left out."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown
