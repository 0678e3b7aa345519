"""Waiting in tests for something to become true, without asserting on how long it takes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    what: str,
    seconds: float = ...,
    *,
    interval: float = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    what: str,
    seconds: float = ...,
    *,
    interval: float = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Any],
    what: str,
    seconds: float = 60.0,
    *,
    interval: float = 0.1,
) -> Any:
    """Poll `check` every `interval` seconds until it returns something truthy; return that.

    `check` may be a plain function, an async one, or one returning an awaitable. If nothing
    truthy comes within `seconds`, fail with an AssertionError naming `what` and the last
    value seen. `seconds` only guards against a hang: it is not a claim about how fast
    anything should be, and no test asserts on wall time. A check still running when the
    time is up is cancelled.
    """
    last: Any = None
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            while True:
                value = check()
                if inspect.isawaitable(value):
                    value = await value
                last = value
                if last:
                    return last
                await asyncio.sleep(interval)
    except TimeoutError:
        if not deadline.expired():
            raise  # the check's own timeout, not ours
        raise AssertionError(
            f"never happened within {seconds:.0f}s: {what} (last: {last!r})"
        ) from None
