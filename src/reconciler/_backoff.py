"""Exponential backoff with jitter that forgets old failures.

Used where a loop must keep trying forever (the reflector): many clients reconnecting to a
restarted API server should spread out, and one failure an hour ago should not make the
next retry slow.
"""

from __future__ import annotations

import random
import time


class Backoff:
    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._current = 0.0
        self._last = 0.0

    def next(self) -> float:
        """The next delay: `initial`, then growing by `factor`, jittered, at most `cap`."""
        now = time.monotonic()
        if self._current == 0.0 or now - self._last > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self._current * self.factor, self.cap)
        self._last = now
        return min(self._current * (1.0 + random.random() * self.jitter), self.cap)

    def reset(self) -> None:
        self._current = 0.0
