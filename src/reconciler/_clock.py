"""Time as a dependency.

The delaying queue and the rate limiters ask a clock rather than the event loop, so tests
can move time by hand and check *what* happens after a delay without ever waiting for it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` once, `delay` seconds from now, on the running event loop."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic` and the running loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


class _FakeTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to; `advance` fires whatever became due."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer()
        heapq.heappush(
            self._timers, (self._now + max(delay, 0.0), next(self._seq), timer, callback)
        )
        return timer

    def advance(self, seconds: float) -> None:
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer, callback = heapq.heappop(self._timers)
            self._now = max(self._now, when)
            if not timer.cancelled:
                callback()
        self._now = target

    @property
    def pending(self) -> int:
        return sum(1 for t in self._timers if not t[2].cancelled)
