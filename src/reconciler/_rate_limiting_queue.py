"""Retrying with backoff: `add_rate_limited`, `forget`, `num_requeues`."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from reconciler._clock import Clock
from reconciler._delaying_queue import DelayingQueue
from reconciler._queue_metrics import QueueMetrics
from reconciler._rate_limiters import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    def __init__(
        self,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name, metrics, clock)
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    def add_rate_limited(self, item: T, at_most: float | None = None) -> None:
        """Add `item` after the wait its failure count (and the overall rate) calls for.

        `at_most` caps that wait; the failure is still counted."""
        self._metrics.retry()
        delay = self.rate_limiter.when(item)
        self.add_after(item, delay if at_most is None else min(delay, at_most))

    def forget(self, item: T) -> None:
        """Reset `item`'s failures; it does not remove `item` from the queue."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
