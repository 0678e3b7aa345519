"""Prometheus collectors under controller-runtime's names, so existing dashboards work.

Collectors are created once per registry: two managers in one process (tests, or a
standby beside a leader) pass their own registries, or share one and share its collectors,
and never trip over "Duplicated timeseries".
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from reconciler._queue_metrics import WorkqueueCollector
from reconciler._transport import RequestObserver, resource_of

# controller-runtime's reconcile_time_seconds buckets.
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15,
    20, 25, 30, 40, 50, 60,
)  # fmt: skip

_M = TypeVar("_M", bound=MetricWrapperBase)


class Metrics:
    """All collectors the engine exports, registered on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def per_controller(kind: type[_M], name: str, documentation: str, *labels: str) -> _M:
            """controller-runtime's `controller_runtime_<name>`, by controller (and `labels`)."""
            more: dict[str, Any] = {"buckets": _RECONCILE_BUCKETS} if kind is Histogram else {}
            return kind(
                "controller_runtime_" + name,
                documentation,
                ("controller", *labels),
                registry=registry,
                **more,
            )

        self.reconcile_total = per_controller(
            Counter, "reconcile_total", "Total number of reconciliations per controller", "result"
        )
        self.reconcile_errors_total = per_controller(
            Counter,
            "reconcile_errors_total",
            "Total number of reconciliation errors per controller",
        )
        self.terminal_reconcile_errors_total = per_controller(
            Counter,
            "terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
        )
        self.reconcile_time_seconds = per_controller(
            Histogram,
            "reconcile_time_seconds",
            "Length of time per reconciliation per controller",
        )
        self.active_workers = per_controller(
            Gauge, "active_workers", "Number of currently used workers per controller"
        )
        self.max_concurrent_reconciles = per_controller(
            Gauge,
            "max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
        )
        self.workqueues = WorkqueueCollector()
        registry.register(self.workqueues)
        # client-go's name: what this process asked of the apiserver, by verb and answer.
        self.rest_client_requests_total = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=registry,
        )
        # Ours: which resources those requests were about (the benchmarks count writes by it).
        self.rest_client_requests_by_resource_total = Counter(
            "rest_client_requests_by_resource_total",
            "Number of HTTP requests, partitioned by method and resource[/subresource].",
            ("method", "resource"),
            registry=registry,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ("name",),
            registry=registry,
        )


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, Metrics] = weakref.WeakKeyDictionary()


def metrics_for(registry: CollectorRegistry) -> Metrics:
    """The one `Metrics` of a registry, created on first use."""
    found = _by_registry.get(registry)
    if found is None:
        found = _by_registry[registry] = Metrics(registry)
    return found


def request_observer(registry: CollectorRegistry, host: str) -> RequestObserver:
    """What a `Transport` calls per request to count it in `registry`, as client-go does
    (`rest_client_requests_total`) and by resource (ours)."""
    metrics = metrics_for(registry)
    requests = metrics.rest_client_requests_total
    by_resource = metrics.rest_client_requests_by_resource_total

    def observe(method: str, code: str, path: str) -> None:
        requests.labels(code, method, host).inc()
        by_resource.labels(method, resource_of(path)).inc()

    return observe
