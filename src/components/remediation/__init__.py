"""GPU remediation: a node whose GPU the node agent finds sick is fenced, drained, its GPU
reset and re-validated, and let back in, within limits (`ClusterPolicy.spec.remediation`,
ours; off by default).

Wiring (in the manager builder)::

    from components.remediation import RemediationController
    RemediationController(manager, recorder=recorder).setup()

Pure parts, for tests and tools::

    decide(node_view(node, spec), spec, now, slot_free=True)   # -> Move (act, to, why)
    remediation_status(nodes)                                   # -> nodes in remediation

The driver upgrade's pod-deletion rules (`components.upgrade.deletion_plan`) decide which
GPU pods leave and which block; the node agent (`components.nodeagent`) resets the GPU.
"""

from components.remediation._controller import (
    NAME,
    RemediationController,
    pod_deletion,
    remediation_spec,
)
from components.remediation._metrics import RemediationMetrics, remediation_metrics_for
from components.remediation._model import (
    IN_PROGRESS,
    Act,
    Move,
    NodeView,
    Sickness,
    State,
    decide,
    node_view,
    sickness,
    taints_with,
)
from components.remediation._status import remediation_status

__all__ = [
    "IN_PROGRESS",
    "NAME",
    "Act",
    "Move",
    "NodeView",
    "RemediationController",
    "RemediationMetrics",
    "Sickness",
    "State",
    "decide",
    "node_view",
    "pod_deletion",
    "remediation_metrics_for",
    "remediation_spec",
    "remediation_status",
    "sickness",
    "taints_with",
]
