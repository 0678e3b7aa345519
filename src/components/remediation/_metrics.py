"""What people graph and alert on: `gpu_operator_remediations_total{reason,result}` (a
remediation that ended: succeeded, failed, or a dry run's report) and
`gpu_operator_remediations_in_progress` (nodes between taint and done).

Registered once per registry, as the upgrade's metrics are, so a second controller on the
same registry (tests, a restart in the same process) shares them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from components.metrics import Metrics, PerRegistry


class RemediationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        made = Metrics(registry)
        self.total = made.counter(
            "remediations",
            "GPU remediations that ended, by what started them (xid-N, ecc) and how they "
            "ended (succeeded, failed, dry-run)",
            ["reason", "result"],
        )
        self.in_progress = made.gauge(
            "remediations_in_progress",
            "Nodes whose GPU remediation is under way (fenced, not yet done or failed)",
        )
        self.failed_nodes = made.gauge(
            "remediations_failed_nodes",
            "Nodes left fenced because their GPU did not recover (GPURemediationFailed)",
        )


_by_registry: PerRegistry[RemediationMetrics] = PerRegistry()


def remediation_metrics_for(registry: CollectorRegistry) -> RemediationMetrics:
    return _by_registry.get(registry, lambda: RemediationMetrics(registry))
