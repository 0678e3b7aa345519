"""The contract with the controller: what it tells a renderer about the cluster
(`GPUNode`, `ClusterView`), what it gets back (`Rendered`) and the surface every operand
offers (`Operand`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    ClusterPolicy,
    mig_capable,
)
from reconciler import labels_of, name_of

#: The node workloads (`nvidia.com/gpu.workload.config`): which operand stack a GPU node
#: runs, containers or VMs.
CONTAINER: Final = "container"
VM_PASSTHROUGH: Final = "vm-passthrough"
VM_VGPU: Final = "vm-vgpu"


@dataclass(frozen=True)
class GPUNode:
    """What a renderer may know about one GPU node (from the controller's node cache)."""

    name: str
    labels: Mapping[str, str]
    os_id: str | None  # feature.node.kubernetes.io/system-os_release.ID
    os_version: str | None  # ...VERSION_ID
    kernel: str | None  # feature.node.kubernetes.io/kernel-version.full
    container_runtime: str  # node.status.nodeInfo.containerRuntimeVersion
    mig_capable: bool
    #: The kernel whose precompiled driver DaemonSet the node is in (DRIVER_KERNEL_PIN_LABEL).
    pinned_kernel: str | None = None

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> GPUNode:
        """Build one from a Node object (dict) as the API server returns it."""
        labels: Mapping[str, str] = labels_of(node)
        info = (node.get("status") or {}).get("nodeInfo") or {}
        return cls(
            name=name_of(node),
            labels=dict(labels),
            os_id=labels.get(OS_ID_LABEL) or None,
            os_version=labels.get(OS_VERSION_LABEL) or None,
            kernel=labels.get(KERNEL_LABEL) or None,
            pinned_kernel=labels.get(DRIVER_KERNEL_PIN_LABEL) or None,
            container_runtime=str(info.get("containerRuntimeVersion", "")),
            mig_capable=mig_capable(labels),
        )


@dataclass(frozen=True)
class ConfigDocument:
    """One key of a user's ConfigMap, read: its content (the YAML document; None when
    empty), or `problem`, why it cannot be read, in words."""

    content: Any = None
    problem: str | None = None


@dataclass(frozen=True)
class ClusterView:
    """What the renderers may know about the cluster."""

    namespace: str  # operator namespace where operands run
    gpu_nodes: Sequence[GPUNode]
    has_service_monitor_crd: bool
    #: ownerReference (controller=True) for the ClusterPolicy, added to every object.
    owner: Mapping[str, Any] | None
    #: Environment the default images are read from (`DRIVER_IMAGE`, ...; as OLM sets
    #: them on the operator). None: the operator process's own environment.
    image_env: Mapping[str, str] | None = None
    #: Keys of the ConfigMaps in `namespace` (name -> data keys), for the ConfigMaps a
    #: policy names whose files are mounted one by one (driver `kernelModuleConfig`,
    #: `repoConfig`, `certConfig`). A named ConfigMap missing here gives a condition.
    config_map_keys: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: The ConfigMaps in `namespace` whose content decides what is deployed (the device
    #: plugin's configs: MPS sharing), each key read (`read_config`): name -> key -> what it
    #: holds or why it cannot be read. Only those some operand reads
    #: (`Operand.config_maps_read`); the controller reads each once per version.
    config_documents: Mapping[str, Mapping[str, ConfigDocument]] = field(default_factory=dict)
    #: While a driver rollback holds (`components.api.rollback_images`): each GPU node's
    #: last good driver image, which the driver DaemonSets are pinned back to. Empty: none.
    last_good_images: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered:
    """Everything an operand wants to exist, and the problems found while rendering."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    #: (reason, message), e.g. ("KernelLabelMissing", "nodes a, b have no ... label")
    conditions: list[tuple[str, str]] = field(default_factory=list)


class Operand(Protocol):
    """One operand: a reference state name, its node deploy label, the node workloads it
    serves, and its renderer."""

    @property
    def name(self) -> str: ...

    @property
    def deploy_label(self) -> str | None:
        """The node label (`nvidia.com/gpu.deploy.<x>`) its pods select; None: no pods."""
        ...

    @property
    def workloads(self) -> frozenset[str]:
        """The node workloads (`container`, `vm-passthrough`, `vm-vgpu`) whose nodes the
        node labeller gives `deploy_label`; empty where another rule decides (the MIG
        manager's) or the label is another operand's."""
        ...

    def enabled(self, policy: ClusterPolicy) -> bool: ...

    def config_maps_read(self, policy: ClusterPolicy) -> Sequence[str]:
        """The ConfigMaps (in the operator's namespace) whose content `render` reads from
        `ClusterView.config_documents`."""
        ...

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Rendered: ...
