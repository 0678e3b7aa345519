"""Times as the walk writes them on nodes (RFC 3339) and reads them back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_time(value: Any) -> float | None:
    """RFC 3339 (`2026-11-30T16:20:01Z`, fractions allowed) or Unix seconds -> Unix seconds."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.isdigit():
        return float(text)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_time_ms(seconds: float) -> str:
    """RFC 3339 with milliseconds, for waits shorter than a second's rounding."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
