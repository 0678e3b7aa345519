"""The operands: what the ClusterPolicy controller deploys, each rendered from the typed spec.

Every operand has the same small surface (`Operand`): its reference state name, the node
label that says where it runs, whether the policy enables it, and `render`, a pure function
from the policy and what the controller knows of the cluster (`ClusterView`) to the
complete objects it wants (`Rendered.objects`, ready for server-side apply) and the
problems found on the way (`Rendered.conditions`)::

    view = ClusterView(namespace="gpu-operator", gpu_nodes=[GPUNode.from_node(n), ...],
                       has_service_monitor_crd=False, owner=owner_reference)
    for operand in OPERANDS:                      # in the reference's order
        if operand.enabled(policy):
            rendered = operand.render(policy, view)

Every object carries `app.kubernetes.io/managed-by: gpu-operator` and
`nvidia.com/gpu-operator.component: <state name>` (so the controller finds and prunes what
it owns) and the ClusterPolicy's owner reference; namespaced ones live in
`view.namespace`. DaemonSet pods keep the reference's `app` labels.

`daemonset_ready` applies the reference's readiness rules; `detect_runtime` picks the
container runtime the toolkit configures. NFD is not deployed by the operator (see `gfd`).
"""

from __future__ import annotations

from collections.abc import Sequence

from components.operands._common import (
    COMPONENT_LABEL,
    DEPLOY_LABEL_PREFIX,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ClusterView,
    GPUNode,
    Operand,
    Rendered,
    safe_name,
)
from components.operands.dcgm import DCGM
from components.operands.dcgm_exporter import DCGMExporter
from components.operands.device_plugin import DevicePlugin
from components.operands.driver import Driver, DriverPool, driver_pools, sanitize_kernel
from components.operands.gfd import GPUFeatureDiscovery
from components.operands.mig_manager import MIGManager, mig_parted_config
from components.operands.node_status_exporter import NodeStatusExporter
from components.operands.prerequisites import Prerequisites
from components.operands.readiness import daemonset_ready, pod_ready
from components.operands.toolkit import Toolkit, detect_runtime, node_runtime
from components.operands.validator import Validator

#: The operands in the reference's order (DESIGN "Operand order"; `operator-metrics` is the
#: operator's own Service, `mps-control-daemon` and the sandbox/vGPU states are not here yet).
OPERANDS: Sequence[Operand] = (
    Prerequisites(),
    Driver(),
    Toolkit(),
    Validator(),
    DevicePlugin(),
    DCGM(),
    DCGMExporter(),
    GPUFeatureDiscovery(),
    MIGManager(),
    NodeStatusExporter(),
)


def operand(name: str) -> Operand:
    """The operand with this state name (e.g. `state-driver`); KeyError if none."""
    for item in OPERANDS:
        if item.name == name:
            return item
    raise KeyError(name)


__all__ = [
    "COMPONENT_LABEL",
    "DCGM",
    "DEPLOY_LABEL_PREFIX",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "OPERANDS",
    "ClusterView",
    "DCGMExporter",
    "DevicePlugin",
    "Driver",
    "DriverPool",
    "GPUFeatureDiscovery",
    "GPUNode",
    "MIGManager",
    "NodeStatusExporter",
    "Operand",
    "Prerequisites",
    "Rendered",
    "Toolkit",
    "Validator",
    "daemonset_ready",
    "detect_runtime",
    "driver_pools",
    "mig_parted_config",
    "node_runtime",
    "operand",
    "pod_ready",
    "safe_name",
    "sanitize_kernel",
]
