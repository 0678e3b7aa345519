"""Listen addresses as a user writes them."""

from __future__ import annotations


def split_address(address: str) -> tuple[str, int]:
    """`host:port` or `:port` as (host, port); no host means every interface."""
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)
