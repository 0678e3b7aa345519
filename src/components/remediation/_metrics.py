"""What people graph and alert on: `gpu_operator_remediations_total{reason,result}` (a
remediation that ended: succeeded, failed, or a dry run's report) and
`gpu_operator_remediations_in_progress` (nodes between taint and done).

Registered once per registry, as the upgrade's metrics are, so a second controller on the
same registry (tests, a restart in the same process) shares them.
"""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge


class RemediationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "gpu_operator_remediations",
            "GPU remediations that ended, by what started them (xid-N, ecc) and how they "
            "ended (succeeded, failed, dry-run)",
            ["reason", "result"],
            registry=registry,
        )
        self.in_progress = Gauge(
            "gpu_operator_remediations_in_progress",
            "Nodes whose GPU remediation is under way (fenced, not yet done or failed)",
            registry=registry,
        )
        self.failed_nodes = Gauge(
            "gpu_operator_remediations_failed_nodes",
            "Nodes left fenced because their GPU did not recover (GPURemediationFailed)",
            registry=registry,
        )


_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, RemediationMetrics] = (
    weakref.WeakKeyDictionary()
)


def remediation_metrics_for(registry: CollectorRegistry) -> RemediationMetrics:
    found = _by_registry.get(registry)
    if found is None:
        found = _by_registry[registry] = RemediationMetrics(registry)
    return found
