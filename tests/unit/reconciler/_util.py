"""Waiting for a condition in tests without asserting on how long it takes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def wait_until(check: Callable[[], bool], *, within: float = 10.0, what: str = "") -> None:
    """Poll `check` until it holds; `within` only guards against a hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what or check}")
        await asyncio.sleep(0.001)
