"""The upgrade's metrics, under the reference's names (`gpu_operator_nodes_upgrades_*`).

Registered once per registry, as the engine's metrics are: a second controller on the same
registry (tests, a restart in the same process) shares the gauges instead of failing.
`gpu_operator_driver_auto_upgrade_enabled` may already be owned by the operator's metrics
(`components.metrics.OperatorMetrics`); pass that gauge in and it is shared.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from components.metrics import Metrics, PerRegistry


class UpgradeMetrics:
    def __init__(self, registry: CollectorRegistry, *, auto_upgrade_enabled: Any = None) -> None:
        gauge = Metrics(registry).gauge
        self.in_progress = gauge(
            "nodes_upgrades_in_progress",
            "Total number of nodes on which the driver upgrade is in progress",
        )
        self.done = gauge(
            "nodes_upgrades_done", "Total number of nodes on which the driver upgrade is done"
        )
        self.failed = gauge(
            "nodes_upgrades_failed", "Total number of nodes on which the driver upgrade failed"
        )
        self.available = gauge(
            "nodes_upgrades_available", "Total number of nodes on which a driver upgrade may start"
        )
        self.pending = gauge(
            "nodes_upgrades_pending", "Total number of nodes on which the driver upgrade is pending"
        )
        self.halted = gauge(
            "driver_upgrade_halted",
            "Number of upgrade policies whose driver upgrade the failure budget has halted",
        )
        self.rolling_back = gauge(
            "driver_upgrade_rolling_back",
            "Number of upgrade policies whose rollback is walking nodes back to their last "
            "good driver",
        )
        self.auto_upgrade_enabled = (
            auto_upgrade_enabled
            if auto_upgrade_enabled is not None
            else gauge(
                "driver_auto_upgrade_enabled",
                "1 if driver auto upgrade is enabled, 0 otherwise",
            )
        )

    def set(
        self,
        *,
        enabled: bool,
        in_progress: int,
        done: int,
        failed: int,
        available: int,
        pending: int,
    ) -> None:
        self.auto_upgrade_enabled.set(1 if enabled else 0)
        self.in_progress.set(in_progress)
        self.done.set(done)
        self.failed.set(failed)
        self.available.set(available)
        self.pending.set(pending)


_by_registry: PerRegistry[UpgradeMetrics] = PerRegistry()


def upgrade_metrics_for(
    registry: CollectorRegistry, *, auto_upgrade_enabled: Any = None
) -> UpgradeMetrics:
    """The one `UpgradeMetrics` of a registry, created on first use."""
    return _by_registry.get(
        registry, lambda: UpgradeMetrics(registry, auto_upgrade_enabled=auto_upgrade_enabled)
    )
