"""The operator's own metrics, `gpu_operator_*`, with the reference's names and meanings.

They live on the manager's registry beside the controller-runtime ones, so one `/metrics`
serves both and existing dashboards keep working.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

PREFIX = "gpu_operator_"
_M = TypeVar("_M")


class Metrics:
    """Makes the `gpu_operator_*` metrics on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def gauge(self, name: str, documentation: str) -> Gauge:
        return Gauge(PREFIX + name, documentation, registry=self.registry)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """`_total` is added to the name on exposition."""
        return Counter(PREFIX + name, documentation, labels, registry=self.registry)


class PerRegistry(Generic[_M]):
    """One set of metrics per registry, made on first use, as the engine's metrics are: a
    second controller on the same registry (tests, a restart in the same process) shares
    them instead of failing on names already registered."""

    def __init__(self) -> None:
        self._by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _M] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, registry: CollectorRegistry, make: Callable[[], _M]) -> _M:
        found = self._by_registry.get(registry)
        if found is None:
            found = self._by_registry[registry] = make()
        return found


class ReconciliationStatus(enum.IntEnum):
    """Values of `gpu_operator_reconciliation_status` (the reference's)."""

    READY = 1
    NOT_READY = 0
    NO_POLICY = -1
    ERROR = -2


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        made = Metrics(registry)
        gauge, counter = made.gauge, made.counter
        self.gpu_nodes_total = gauge("gpu_nodes_total", "Number of nodes with GPUs")
        self.reconciliation_status = gauge(
            "reconciliation_status",
            "1 if the ClusterPolicy is ready, 0 if not ready, -1 if there is no ClusterPolicy, "
            "-2 if the last reconciliation failed",
        )
        self.reconciliation_total = counter(
            "reconciliation_total", "Total number of ClusterPolicy reconciliations"
        )
        self.reconciliation_failed_total = counter(
            "reconciliation_failed_total",
            "Number of ClusterPolicy reconciliations that failed or ended not ready",
        )
        self.reconciliation_last_success_ts_seconds = gauge(
            "reconciliation_last_success_ts_seconds",
            "Unix time of the last reconciliation that ended ready",
        )
        self.reconciliation_has_nfd_labels = gauge(
            "reconciliation_has_nfd_labels",
            "1 if NFD labels were found on at least one node, 0 otherwise",
        )
        self.driver_auto_upgrade_enabled = gauge(
            "driver_auto_upgrade_enabled",
            "1 if driver auto-upgrade is enabled in the active ClusterPolicy, 0 otherwise",
        )
        self.reconciliation_status.set(ReconciliationStatus.NO_POLICY)

    def set_status(self, status: ReconciliationStatus) -> None:
        self.reconciliation_status.set(int(status))
