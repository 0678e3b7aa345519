"""Adding a key later: `add_after`.

A key waiting for its time is not yet dirty, so it does not block an immediate `add`. If a
key is added after a delay twice, the earlier ready time wins: a reconcile asked for "in
1 s" is not postponed by a later "in 10 min". One timer, for the earliest key, runs at a
time; stale heap entries are skipped when popped rather than searched for and removed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import TypeVar

from reconciler._clock import Clock, MonotonicClock, Timer
from reconciler._queue import Queue
from reconciler._queue_metrics import QueueMetrics

T = TypeVar("T", bound=Hashable)


class DelayingQueue(Queue[T]):
    def __init__(
        self, name: str = "", metrics: QueueMetrics | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(name, metrics)
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self._heap: list[tuple[float, int, T]] = []
        self._ready_at: dict[T, float] = {}
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_at = float("inf")

    @property
    def waiting(self) -> int:
        """Keys waiting for their ready time."""
        return len(self._ready_at)

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` once `delay` seconds have passed; at once if `delay <= 0`."""
        if self.shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.now() + delay
        current = self._ready_at.get(item)
        if current is not None and current <= ready_at:
            return
        self._ready_at[item] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), item))
        if ready_at < self._timer_at:
            self._schedule(ready_at)

    def shut_down(self) -> None:
        """Drop keys still waiting for their time, then shut down as a plain queue."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = float("inf")
        self._heap.clear()
        self._ready_at.clear()
        super().shut_down()

    def _schedule(self, ready_at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = ready_at
        self._timer = self._clock.call_later(ready_at - self._clock.now(), self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        now = self._clock.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            ready_at, _, item = heapq.heappop(heap)
            if self._ready_at.get(item) == ready_at:
                del self._ready_at[item]
                self.add(item)
        # Skip entries superseded by an earlier ready time before arming the next timer.
        while heap and self._ready_at.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if heap:
            self._schedule(heap[0][0])
