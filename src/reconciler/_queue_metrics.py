"""What a work queue reports about itself, and the Prometheus implementation of it.

The queue calls these hooks at the same points client-go does (`add` when a key becomes
dirty, `get` when a worker takes it, `done` when it is finished), so depth counts dirty keys
and the two duration histograms mean what dashboards expect.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reconciler._metrics import Metrics


class QueueMetrics(Protocol):
    def add(self, item: Hashable) -> None: ...
    def get(self, item: Hashable) -> None: ...
    def done(self, item: Hashable) -> None: ...
    def retry(self) -> None: ...


class NoQueueMetrics:
    """Reports nothing; the default, so a bare queue costs nothing extra."""

    def add(self, item: Hashable) -> None:
        pass

    def get(self, item: Hashable) -> None:
        pass

    def done(self, item: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass


class PrometheusQueueMetrics:
    """Feeds the `workqueue_*` collectors for one named queue.

    The two "stuck worker" gauges are computed when scraped rather than by a ticker, so an
    idle operator does no periodic work for them.
    """

    def __init__(self, metrics: Metrics, name: str) -> None:
        labels = {"name": name, "controller": name}
        self._depth = metrics.workqueue_depth.labels(**labels)
        self._adds = metrics.workqueue_adds_total.labels(**labels)
        self._latency = metrics.workqueue_queue_duration_seconds.labels(**labels)
        self._work = metrics.workqueue_work_duration_seconds.labels(**labels)
        self._retries = metrics.workqueue_retries_total.labels(**labels)
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        metrics.workqueue_unfinished_work_seconds.labels(**labels).set_function(self.unfinished)
        metrics.workqueue_longest_running_processor_seconds.labels(**labels).set_function(
            self.longest_running
        )

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(item, time.monotonic())

    def get(self, item: Hashable) -> None:
        now = time.monotonic()
        self._depth.dec()
        added = self._added_at.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)
        self._started_at[item] = now

    def done(self, item: Hashable) -> None:
        started = self._started_at.pop(item, None)
        if started is not None:
            self._work.observe(time.monotonic() - started)

    def retry(self) -> None:
        self._retries.inc()

    def unfinished(self) -> float:
        now = time.monotonic()
        return sum(now - t for t in self._started_at.values())

    def longest_running(self) -> float:
        if not self._started_at:
            return 0.0
        return time.monotonic() - min(self._started_at.values())
