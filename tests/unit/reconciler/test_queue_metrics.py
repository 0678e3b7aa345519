"""workqueue_* metrics, as a dashboard reads them."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from reconciler import metrics_for
from reconciler.lowlevel import FakeClock, PrometheusQueueMetrics, RateLimitingQueue

pytestmark = pytest.mark.unit


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    value = registry.get_sample_value(name, {"name": "q", "controller": "q", **labels})
    return value


def test_queue_reports_depth_adds_durations_and_retries() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusQueueMetrics(metrics_for(registry), "q")
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue("q", metrics=metrics, clock=clock)
    q.add("a")
    q.add("a")
    q.add("b")
    assert sample(registry, "workqueue_depth") == 2
    assert sample(registry, "workqueue_adds_total") == 2
    item = q.get_nowait()
    assert sample(registry, "workqueue_depth") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 1
    assert sample(registry, "workqueue_longest_running_processor_seconds") is not None
    assert (sample(registry, "workqueue_unfinished_work_seconds") or 0) >= 0
    q.done(item)
    assert sample(registry, "workqueue_work_duration_seconds_count") == 1
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0
    q.add_rate_limited("c")
    assert sample(registry, "workqueue_retries_total") == 1


def test_two_registries_do_not_collide() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    PrometheusQueueMetrics(metrics_for(a), "q")
    PrometheusQueueMetrics(metrics_for(b), "q")
    assert metrics_for(a) is metrics_for(a)
    assert metrics_for(a) is not metrics_for(b)
