"""What a work queue reports about itself, and the Prometheus implementation of it.

The queue calls these hooks at the same points client-go does (`add` when a key becomes
dirty, `get` when a worker takes it, `done` when it is finished), so depth counts dirty keys
and the two duration histograms mean what dashboards expect.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

_as_go_float = cast(Callable[[float], str], floatToGoString)
"""A bucket bound as prometheus_client writes it (`1e-08`, `+Inf`)."""

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
    """Counts for the `workqueue_*` families of one named queue, kept as plain numbers.

    A queue hook runs for every key that becomes dirty, is taken and is finished: tens of
    thousands in a 1,000-node rollout. prometheus_client's own counters and histograms take
    a lock for every increment (the 90 samples of a 1,000-node profile that were theirs), so
    the numbers live here and `WorkqueueCollector` turns them into families when scraped.
    The two "stuck worker" gauges are computed then too, so an idle operator does no
    periodic work for them.
    """

    def __init__(self, metrics: Metrics, name: str) -> None:
        self.name = name
        self.depth = 0
        self.adds = 0
        self.retries = 0
        self.latency = Buckets(QUEUE_BUCKETS)
        self.work = Buckets(QUEUE_BUCKETS)
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        metrics.workqueues.track(self)

    def add(self, item: Hashable) -> None:
        self.adds += 1
        self.depth += 1
        self._added_at.setdefault(item, time.monotonic())

    def get(self, item: Hashable) -> None:
        now = time.monotonic()
        self.depth -= 1
        added = self._added_at.pop(item, None)
        if added is not None:
            self.latency.observe(now - added)
        self._started_at[item] = now

    def done(self, item: Hashable) -> None:
        started = self._started_at.pop(item, None)
        if started is not None:
            self.work.observe(time.monotonic() - started)

    def retry(self) -> None:
        self.retries += 1

    def unfinished(self) -> float:
        now = time.monotonic()
        return sum(now - t for t in self._started_at.values())

    def longest_running(self) -> float:
        if not self._started_at:
            return 0.0
        return time.monotonic() - min(self._started_at.values())


QUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))
"""client-go's workqueue buckets: 10 ns .. 1000 s, decades."""


class Buckets:
    """A histogram's counts without locks: one count per upper bound, then +Inf."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def add_to(self, other: Buckets) -> None:
        for i, count in enumerate(self.counts):
            other.counts[i] += count
        other.sum += self.sum

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, count of observations <= le) for each bound and +Inf, as exposed."""
        out, running = [], 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append((_as_go_float(bound), float(running)))
        return out


_QUEUE_LABELS = ["name", "controller"]


class WorkqueueCollector:
    """The `workqueue_*` families (client-go's names and help) of every queue tracked on one
    registry. Queues that share a name are summed into one series, as the labelled
    children they used to share were; and like those, a queue's counts stay for the
    registry's life (a counter that vanished would read as a reset)."""

    def __init__(self) -> None:
        self._queues: list[PrometheusQueueMetrics] = []

    def track(self, queue: PrometheusQueueMetrics) -> None:
        self._queues.append(queue)

    def describe(self) -> Iterable[Metric]:
        return self._families({})

    def collect(self) -> Iterable[Metric]:
        by_name: dict[str, list[PrometheusQueueMetrics]] = {}
        for queue in self._queues:
            by_name.setdefault(queue.name, []).append(queue)
        return self._families(by_name)

    @staticmethod
    def _families(by_name: dict[str, list[PrometheusQueueMetrics]]) -> list[Metric]:
        depth = GaugeMetricFamily(
            "workqueue_depth", "Current depth of workqueue", labels=_QUEUE_LABELS
        )
        adds = CounterMetricFamily(
            "workqueue_adds", "Total number of adds handled by workqueue", labels=_QUEUE_LABELS
        )
        latency = HistogramMetricFamily(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels=_QUEUE_LABELS,
        )
        work = HistogramMetricFamily(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels=_QUEUE_LABELS,
        )
        retries = CounterMetricFamily(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            labels=_QUEUE_LABELS,
        )
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            labels=_QUEUE_LABELS,
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            labels=_QUEUE_LABELS,
        )
        for name, queues in sorted(by_name.items()):
            labels = [name, name]
            depth.add_metric(labels, sum(q.depth for q in queues))
            adds.add_metric(labels, sum(q.adds for q in queues))
            retries.add_metric(labels, sum(q.retries for q in queues))
            for family, pick in ((latency, _latency), (work, _work)):
                total = Buckets(QUEUE_BUCKETS)
                for queue in queues:
                    pick(queue).add_to(total)
                family.add_metric(labels, total.cumulative(), total.sum)
            # The stuck-worker gauges are the newest queue's: an older one of its name that
            # stopped with work in hand would otherwise look stuck for good.
            unfinished.add_metric(labels, queues[-1].unfinished())
            longest.add_metric(labels, queues[-1].longest_running())
        return [depth, adds, latency, work, retries, unfinished, longest]


def _latency(queue: PrometheusQueueMetrics) -> Buckets:
    return queue.latency


def _work(queue: PrometheusQueueMetrics) -> Buckets:
    return queue.work
