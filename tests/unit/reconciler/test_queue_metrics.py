"""workqueue_* metrics, as a dashboard reads them."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

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


def test_two_queues_of_one_name_report_one_series() -> None:
    """As the labelled children they shared used to: summed, never a duplicate sample that
    would make the whole scrape invalid."""
    registry = CollectorRegistry()
    metrics = metrics_for(registry)
    first = RateLimitingQueue("q", metrics=PrometheusQueueMetrics(metrics, "q"))
    second = RateLimitingQueue("q", metrics=PrometheusQueueMetrics(metrics, "q"))
    first.add("a")
    second.add("a")
    second.add("b")
    assert sample(registry, "workqueue_adds_total") == 3
    assert sample(registry, "workqueue_depth") == 3
    text = generate_latest(registry).decode()
    assert text.count('workqueue_depth{controller="q",name="q"}') == 1


def test_durations_fall_in_client_go_buckets() -> None:
    registry = CollectorRegistry()
    metrics = PrometheusQueueMetrics(metrics_for(registry), "q")
    metrics.latency.observe(0.001)  # on a bound: counted in that bucket (le is <=)
    metrics.latency.observe(0.5)
    metrics.latency.observe(5000.0)  # beyond the last bound: +Inf only
    buckets = {
        le: sample(registry, "workqueue_queue_duration_seconds_bucket", le=le)
        for le in ("0.0001", "0.001", "1.0", "1000.0", "+Inf")
    }
    assert buckets == {"0.0001": 0, "0.001": 1, "1.0": 2, "1000.0": 2, "+Inf": 3}
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 3
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == 5000.501
