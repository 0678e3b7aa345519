"""How long to wait before retrying a key: client-go's rate limiters.

A failing key backs off on its own (exponential per key), and all keys together are held
to an overall rate (token bucket), so a thousand keys failing at once cannot hammer the API
server. The default combines both and takes the longer wait.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from reconciler._clock import Clock, MonotonicClock


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds to wait before `item` may be retried; records one more failure."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item`: it succeeded, its next failure starts from scratch."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """Failures recorded for `item` since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """`base * 2**failures`, capped at `max_delay`; per key."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1024:  # 2**exp would overflow a float long before this; it is capped anyway.
            return self.max_delay
        return min(self.base_delay * 2.0**exp, self.max_delay)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket over all keys: `qps` tokens a second, at most `burst` saved up.

    Each `when` reserves a token and returns how long until it exists, like
    `golang.org/x/time/rate`'s `Reserve().Delay()`.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    def when(self, item: Hashable) -> float:
        now = self._clock.now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest wait any of its limiters asks for."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> RateLimiter:
    """Per key 5 ms doubling up to 1000 s, overall 10 qps with a burst of 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock),
    )
