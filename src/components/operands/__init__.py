"""The operands: what the ClusterPolicy controller deploys, each rendered from the typed spec.

`OPERANDS` is the registry: adding an operand is its spec model, its module and one line
there (docs/adding-an-operand.md); the node labeller's workload label sets
(`deploy_labels_by_workload`) and the controller follow it.

Every operand has the same small surface (`Operand`): its reference state name, the node
label that says where it runs, the node workloads it serves, whether the policy enables
it, and `render`, a pure function
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

An operand that decides on what a ConfigMap of the user's holds names it
(`config_maps_read`); the controller reads each key with `read_config` (bounded: a sentence,
never an exception, for what cannot be read) into `ClusterView.config_documents`.

`daemonset_ready` applies the reference's readiness rules. NFD is not deployed by the
operator (see `gfd`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from components.operands._contract import (
    CONTAINER,
    VM_PASSTHROUGH,
    VM_VGPU,
    ClusterView,
    ConfigDocument,
    GPUNode,
    Operand,
    Rendered,
)
from components.operands._declared import DeclaredOperand
from components.operands._names import deploy_label, safe_name
from components.operands._user_config import MAX_CONFIG_BYTES, read_config
from components.operands.cc_manager import CCManager
from components.operands.dcgm import DCGM
from components.operands.dcgm_exporter import DCGMExporter
from components.operands.device_plugin import DevicePlugin
from components.operands.dra_driver import DRADriver
from components.operands.dra_validation import DRAValidation
from components.operands.driver import Driver
from components.operands.gfd import GPUFeatureDiscovery
from components.operands.kata_manager import KataManager
from components.operands.mig_manager import MIGManager
from components.operands.mps_control_daemon import MPSControlDaemon
from components.operands.node_agent import NodeAgent
from components.operands.node_status_exporter import NodeStatusExporter
from components.operands.operator_metrics import OperatorServiceMonitor
from components.operands.prerequisites import Prerequisites
from components.operands.readiness import daemonset_ready
from components.operands.sandbox_device_plugin import SandboxDevicePlugin
from components.operands.sandbox_validator import SandboxValidator
from components.operands.toolkit import Toolkit
from components.operands.validator import Validator
from components.operands.vfio_manager import VFIOManager
from components.operands.vgpu_device_manager import VGPUDeviceManager
from components.operands.vgpu_manager import VGPUManager

#: The operands in the reference's order (its state names; `state-operator-metrics`
#: renders only the operator's ServiceMonitor, its Service ships with the operator).
#: The VM operands after the container ones, as the reference orders them; the node
#: labeller decides which of the two stacks a node runs.
OPERANDS: Sequence[Operand] = (
    Prerequisites(),
    OperatorServiceMonitor(),
    Driver(),
    Toolkit(),
    Validator(),
    DevicePlugin(),
    MPSControlDaemon(),
    DCGM(),
    DCGMExporter(),
    GPUFeatureDiscovery(),
    MIGManager(),
    NodeStatusExporter(),
    NodeAgent(),
    VGPUManager(),
    VGPUDeviceManager(),
    SandboxValidator(),
    VFIOManager(),
    SandboxDevicePlugin(),
    KataManager(),
    CCManager(),
)


def _on_dra_nodes(operand: DeclaredOperand, key: str) -> DeclaredOperand:
    """The operand as the GPUCluster deploys it: on nodes labelled with a deploy label of
    the DRA stack's own, so the two stacks never select each other's nodes."""
    dra = copy.copy(operand)
    dra.deploy_label = deploy_label(key)
    dra.workloads = frozenset()
    return dra


#: The GPUCluster's operands, in the reference's order: the DRA driver, DCGM and its
#: exporter (the ClusterPolicy's, under deploy labels of their own), the DRA validator.
#: They render from `components.api.dra_stack`; the DRA ones never for a ClusterPolicy.
DRA_OPERANDS: Sequence[Operand] = (
    DRADriver(),
    _on_dra_nodes(DCGM(), "dcgm-dra"),
    _on_dra_nodes(DCGMExporter(), "dcgm-exporter-dra"),
    DRAValidation(),
)


def dra_deploy_labels(operands: Sequence[Operand] = DRA_OPERANDS) -> frozenset[str]:
    """The deploy labels the node labeller gives a GPU node while a GPUCluster is the
    cluster's stack: its operands', and the driver's (an NVIDIADriver's DaemonSets select
    it, as under a ClusterPolicy)."""
    labels = {op.deploy_label for op in operands if op.deploy_label}
    return frozenset(labels | {deploy_label("driver")})


def deploy_labels_by_workload(
    operands: Sequence[Operand] = OPERANDS,
) -> Mapping[str, frozenset[str]]:
    """Each node workload's deploy labels, from what each operand says it serves: the
    node labeller's sets, so that an operand's DaemonSet never selects nodes no one
    labels."""
    return {
        workload: frozenset(
            op.deploy_label for op in operands if op.deploy_label and workload in op.workloads
        )
        for workload in (CONTAINER, VM_PASSTHROUGH, VM_VGPU)
    }


__all__ = [
    "CONTAINER",
    "DCGM",
    "DRA_OPERANDS",
    "MAX_CONFIG_BYTES",
    "OPERANDS",
    "VM_PASSTHROUGH",
    "VM_VGPU",
    "CCManager",
    "ClusterView",
    "ConfigDocument",
    "DCGMExporter",
    "DRADriver",
    "DRAValidation",
    "DevicePlugin",
    "Driver",
    "GPUFeatureDiscovery",
    "GPUNode",
    "KataManager",
    "MIGManager",
    "MPSControlDaemon",
    "NodeAgent",
    "NodeStatusExporter",
    "Operand",
    "OperatorServiceMonitor",
    "Prerequisites",
    "Rendered",
    "SandboxDevicePlugin",
    "SandboxValidator",
    "Toolkit",
    "VFIOManager",
    "VGPUDeviceManager",
    "VGPUManager",
    "Validator",
    "daemonset_ready",
    "deploy_labels_by_workload",
    "dra_deploy_labels",
    "read_config",
    "safe_name",
]
