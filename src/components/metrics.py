"""The operator's own metrics, `gpu_operator_*`, with the reference's names and meanings.

They live on the manager's registry beside the controller-runtime ones, so one `/metrics`
serves both and existing dashboards keep working.
"""

from __future__ import annotations

import enum

from prometheus_client import CollectorRegistry, Counter, Gauge

PREFIX = "gpu_operator_"


class ReconciliationStatus(enum.IntEnum):
    """Values of `gpu_operator_reconciliation_status` (the reference's)."""

    READY = 1
    NOT_READY = 0
    NO_POLICY = -1
    ERROR = -2


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.gpu_nodes_total = Gauge(
            PREFIX + "gpu_nodes_total",
            "Number of nodes with GPUs",
            registry=registry,
        )
        self.reconciliation_status = Gauge(
            PREFIX + "reconciliation_status",
            "1 if the ClusterPolicy is ready, 0 if not ready, -1 if there is no ClusterPolicy, "
            "-2 if the last reconciliation failed",
            registry=registry,
        )
        self.reconciliation_total = Counter(
            PREFIX + "reconciliation_total",
            "Total number of ClusterPolicy reconciliations",
            registry=registry,
        )
        self.reconciliation_failed_total = Counter(
            PREFIX + "reconciliation_failed_total",
            "Number of ClusterPolicy reconciliations that failed or ended not ready",
            registry=registry,
        )
        self.reconciliation_last_success_ts_seconds = Gauge(
            PREFIX + "reconciliation_last_success_ts_seconds",
            "Unix time of the last reconciliation that ended ready",
            registry=registry,
        )
        self.reconciliation_has_nfd_labels = Gauge(
            PREFIX + "reconciliation_has_nfd_labels",
            "1 if NFD labels were found on at least one node, 0 otherwise",
            registry=registry,
        )
        self.driver_auto_upgrade_enabled = Gauge(
            PREFIX + "driver_auto_upgrade_enabled",
            "1 if driver auto-upgrade is enabled in the active ClusterPolicy, 0 otherwise",
            registry=registry,
        )
        self.reconciliation_status.set(ReconciliationStatus.NO_POLICY)

    def set_status(self, status: ReconciliationStatus) -> None:
        self.reconciliation_status.set(int(status))
