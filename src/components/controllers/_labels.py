"""Which labels a node should carry: pure functions of its labels and the policy.

The rules are the reference operator's, so node selectors and runbooks written for it
keep working:

* `nvidia.com/gpu.present=true` on a node NFD found an NVIDIA PCI device on; `false` on a
  node that had it and has no GPU any more (its `nvidia.com/gpu.deploy.*` labels go).
* Every GPU node gets the deploy labels of its workload: for containers (the default)
  `driver`, `gpu-feature-discovery`, `container-toolkit`, `device-plugin`, `dcgm`,
  `dcgm-exporter`, `node-status-exporter`, `operator-validator` and `client`, whether or
  not the policy enables the operand (a disabled operand simply has no DaemonSet). With
  `sandboxWorkloads.enabled` a node's `nvidia.com/gpu.workload.config` (or the policy's
  default) may pick the `vm-passthrough` or `vm-vgpu` set instead; labels of the other
  sets go.
* `nvidia.com/gpu.deploy.mig-manager=true` on a container node with MIG-capable GPUs:
  `nvidia.com/mig.capable=true`, or, before GPU feature discovery has said so, a product
  known to support MIG; never on a vGPU host.
* A label that is already there keeps its value (e.g. the MIG manager's
  `paused-for-mig-change`): only missing labels are added.
* While a GPUCluster is the cluster's stack (`LabelPolicy.dra`), every GPU node gets the
  DRA stack's deploy labels instead, as the reference's GPUCluster labels them: `driver`
  (an NVIDIADriver's DaemonSets select it), `dra-driver`, `dra-validator`, `dcgm-dra`
  and `dcgm-exporter-dra`; the device-plugin stack's go, and the other way round.
* `nvidia.com/gpu.deploy.operands=false` opts a node out: every deploy label above goes.
* Deploy labels outside these sets are left alone, except on a node with no GPU any more.
* A node whose node agent reports a driver installed on the host (`GPUDriverReady`, reason
  `HostDriver`) gets `nvidia.com/gpu.deploy.driver=pre-installed`, as the reference labels
  it: no driver pod goes there (nor is one restarted against it). Only from `true`, and
  never in the middle of a driver upgrade walk (whose restart briefly leaves a module
  loaded with no driver container). The label stays when the host driver goes: an admin
  who removes it sets the label back to `true`.
* While drivers upgrade automatically, a node that gets `nvidia.com/gpu.deploy.driver` and
  has no `nvidia.com/gpu-driver-upgrade-state` gets `upgrade-done` in the same patch: its
  driver pod will come from the DaemonSet's current revision, which is the state the
  upgrade walk would write on its own a moment later, in a second PATCH per node. The walk
  owns the label from then on (both writers use merge or JSON patches, never server-side
  apply, so no field manager takes the label away from the other).

The result is a merge patch (`None` removes a label), empty when nothing must change, so
a node that is already right costs no write. The node annotation
`nvidia.com/gpu-driver-upgrade-enabled` follows the same pattern (`annotation_patch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from components.api import (
    CLIENT_DEPLOY_LABEL,
    DEPLOY_LABEL_PREFIX,
    DRIVER_DEPLOY_LABEL,
    DRIVER_PRE_INSTALLED,
    DRIVER_UPGRADE_ENABLED_ANNOTATION,
    DRIVER_UPGRADE_STATE_LABEL,
    GPU_DRIVER_READY,
    GPU_PRESENT_LABEL,
    HOST_DRIVER_REASON,
    MIG_MANAGER_DEPLOY_LABEL,
    NFD_GPU_LABELS,
    NFD_PREFIX,
    OPERANDS_OPT_OUT_LABEL,
    WORKLOAD_CONFIG_LABEL,
    ClusterPolicy,
    UpgradeState,
    mig_capable,
    opted_out,
)
from components.operands import (
    CONTAINER,
    VM_PASSTHROUGH,
    deploy_labels_by_workload,
    dra_deploy_labels,
)

LabelPatch = dict[str, str | None]

_D = DEPLOY_LABEL_PREFIX
UPGRADE_DONE: Final = UpgradeState.UPGRADE_DONE.value
_KUBEVIRT_DEVICE_PLUGIN = _D + "sandbox-device-plugin"
_KATA_DEVICE_PLUGIN = _D + "kata-sandbox-device-plugin"

#: The deploy labels of each workload, as the reference writes them: each operand's
#: `deploy_label` on the workloads it says it serves (`components.operands`), and `client`.
WORKLOAD_LABELS: Final[Mapping[str, frozenset[str]]] = {
    workload: labels | {CLIENT_DEPLOY_LABEL}
    for workload, labels in deploy_labels_by_workload().items()
}

#: The deploy labels of a GPU node while a GPUCluster is the stack.
DRA_LABELS: Final = dra_deploy_labels()

#: Every deploy label these rules write (and so may take away).
STATE_LABELS: Final = (
    frozenset().union(*WORKLOAD_LABELS.values())
    | {_KATA_DEVICE_PLUGIN, MIG_MANAGER_DEPLOY_LABEL}
    | DRA_LABELS
)


@dataclass(frozen=True)
class LabelPolicy:
    """What of the active ClusterPolicy the node labels depend on."""

    sandbox_enabled: bool = False
    default_workload: str = CONTAINER
    sandbox_mode: str = "kubevirt"
    auto_upgrade: bool = False
    """Whether `nvidia.com/gpu-driver-upgrade-enabled=true` belongs on GPU nodes."""
    initial_upgrade_state: bool = False
    """Whether a node new to the driver starts at `upgrade-done`: the ClusterPolicy's own
    driver upgrades automatically (NVIDIADriver pools have upgrade policies of their own,
    so then the walk writes the first state itself)."""
    dra: bool = False
    """A GPUCluster is the cluster's stack: the DRA stack's deploy labels (`DRA_LABELS`)."""

    @classmethod
    def of(cls, policy: ClusterPolicy) -> LabelPolicy:
        spec = policy.spec
        sandbox = spec.sandbox_workloads
        driver = spec.driver
        automatic = driver.upgrade_policy.auto_upgrade and not sandbox.enabled
        return cls(
            sandbox_enabled=sandbox.enabled,
            default_workload=sandbox.default_workload,
            sandbox_mode=sandbox.mode,
            auto_upgrade=(driver.enabled or driver.use_nvidia_driver_crd) and automatic,
            initial_upgrade_state=(
                driver.enabled and not driver.use_nvidia_driver_crd and automatic
            ),
        )


def has_gpu(labels: Mapping[str, str]) -> bool:
    """NFD found an NVIDIA PCI device (display or 3D controller) on the node."""
    return any(labels.get(key) == "true" for key in NFD_GPU_LABELS)


def has_nfd_labels(labels: Mapping[str, str]) -> bool:
    return any(key.startswith(NFD_PREFIX) for key in labels)


def workload(labels: Mapping[str, str], policy: LabelPolicy) -> str:
    """The node's workload: always containers unless sandbox workloads are on."""
    if not policy.sandbox_enabled:
        return CONTAINER
    chosen = labels.get(WORKLOAD_CONFIG_LABEL, "")
    if chosen in WORKLOAD_LABELS:
        return chosen
    return policy.default_workload if policy.default_workload in WORKLOAD_LABELS else CONTAINER


def workload_labels(config: str, mode: str) -> frozenset[str]:
    """The deploy labels of a workload; a Kata passthrough node gets the Kata device
    plugin's instead of KubeVirt's."""
    labels = WORKLOAD_LABELS[config]
    if config == VM_PASSTHROUGH and mode == "kata":
        return (labels - {_KUBEVIRT_DEVICE_PLUGIN}) | {_KATA_DEVICE_PLUGIN}
    return labels


def host_driver(status: Mapping[str, Any]) -> bool:
    """The node agent says a driver installed on the host serves the node's GPUs."""
    return any(
        c.get("type") == GPU_DRIVER_READY
        and c.get("status") == "True"
        and c.get("reason") == HOST_DRIVER_REASON
        for c in status.get("conditions") or []
    )


def node_label_patch(
    labels: Mapping[str, str], policy: LabelPolicy | None, *, host_driver: bool = False
) -> LabelPatch:
    """The merge patch of `metadata.labels` that makes `labels` right.

    `policy` is what the active ClusterPolicy says (`LabelPolicy.of`); `None` means no
    active ClusterPolicy, and then only `nvidia.com/gpu.present` is kept right.
    `host_driver`: the node agent found a driver installed on the host (`host_driver`).
    """
    if not has_gpu(labels):
        return _no_gpu_patch(labels)
    patch: LabelPatch = {}
    if labels.get(GPU_PRESENT_LABEL) != "true":
        patch[GPU_PRESENT_LABEL] = "true"
    if policy is None:
        return patch
    if opted_out(labels):
        patch.update({key: None for key in sorted(STATE_LABELS) if key in labels})
        return patch
    config = workload(labels, policy)
    stack = DRA_LABELS if policy.dra else workload_labels(config, policy.sandbox_mode)
    wanted = set(stack)
    if config == CONTAINER and mig_capable(labels) and not policy.dra:
        wanted.add(MIG_MANAGER_DEPLOY_LABEL)
    for key in sorted(STATE_LABELS):
        if key in wanted and key not in labels:
            patch[key] = "true"
        elif key not in wanted and key in labels:
            # A container node that stopped looking MIG-capable keeps the label: only a
            # move to a VM workload (or an opt-out) takes it away, as in the reference.
            if key == MIG_MANAGER_DEPLOY_LABEL and config == CONTAINER and not policy.dra:
                continue
            patch[key] = None
    if (
        host_driver
        and DRIVER_DEPLOY_LABEL in wanted
        and {**labels, **patch}.get(DRIVER_DEPLOY_LABEL) == "true"
        and labels.get(DRIVER_UPGRADE_STATE_LABEL, UPGRADE_DONE) == UPGRADE_DONE
    ):
        patch[DRIVER_DEPLOY_LABEL] = DRIVER_PRE_INSTALLED
    if (
        policy.initial_upgrade_state
        and patch.get(DRIVER_DEPLOY_LABEL) == "true"
        and DRIVER_UPGRADE_STATE_LABEL not in labels
    ):
        patch[DRIVER_UPGRADE_STATE_LABEL] = UPGRADE_DONE
    return patch


def annotation_patch(
    labels: Mapping[str, str], annotations: Mapping[str, str], policy: LabelPolicy | None
) -> LabelPatch:
    """The merge patch of `metadata.annotations`: `nvidia.com/gpu-driver-upgrade-enabled`
    is `true` on a GPU node while drivers upgrade automatically, absent otherwise.

    `labels` are the node's labels after `node_label_patch`; nodes that are not GPU nodes
    are not written. Without an active ClusterPolicy nothing is changed.
    """
    if policy is None or labels.get(GPU_PRESENT_LABEL) != "true":
        return {}
    value = annotations.get(DRIVER_UPGRADE_ENABLED_ANNOTATION)
    if policy.auto_upgrade and value != "true":
        return {DRIVER_UPGRADE_ENABLED_ANNOTATION: "true"}
    if not policy.auto_upgrade and value is not None:
        return {DRIVER_UPGRADE_ENABLED_ANNOTATION: None}
    return {}


def _no_gpu_patch(labels: Mapping[str, str]) -> LabelPatch:
    """A node without a GPU: nothing of ours, and `gpu.present=false` if it said true."""
    if GPU_PRESENT_LABEL not in labels:
        return {}  # never was a GPU node (or already cleaned): CPU nodes are not written
    patch: LabelPatch = {
        key: None
        for key in labels
        if key.startswith(DEPLOY_LABEL_PREFIX) and key != OPERANDS_OPT_OUT_LABEL
    }
    if labels[GPU_PRESENT_LABEL] != "false":
        patch[GPU_PRESENT_LABEL] = "false"
    return patch
