"""Which NVIDIA node software a pod is, and the node and pod facts the simulation reads.

Pure data and functions (no I/O): the controller in `gpusim.gpu_node_behaviour` caches pods
and nodes trimmed by `trim_pod` / `trim_node` and reads them back as `PodInfo` / `NodeInfo`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from components.upgrade import pod_view
from gpusim._admission import ANNOTATION_ADMITTED, DEVICE_PREFIX, device_pod
from gpusim._hardware import PRODUCTS, GpuProduct
from gpusim._nodes import (
    ANNOTATION_GPUS,
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_CAPABLE,
    ANNOTATION_PRODUCT,
    SIM_PREFIX,
)
from reconciler import is_deleting, labels_of, metadata_of, name_of, namespace_of, uid_of

# -- which pods are which node software: the one table ---------------------------------


class NodeSoftware(enum.Enum):
    """The NVIDIA software an operand pod runs on its node, as the simulator tells pods
    apart. Not the ClusterPolicy's image names (`components.api.Operand`) nor the
    operator's operand renderers: this is what the simulated node sees running."""

    DRIVER = "driver"
    DEVICE_PLUGIN = "device-plugin"
    GPU_FEATURE_DISCOVERY = "gpu-feature-discovery"
    MIG_MANAGER = "mig-manager"
    DCGM = "dcgm"
    DCGM_EXPORTER = "dcgm-exporter"
    MPS_CONTROL_DAEMON = "mps-control-daemon"
    VFIO_MANAGER = "vfio-manager"
    SANDBOX_DEVICE_PLUGIN = "sandbox-device-plugin"
    CONTAINER_TOOLKIT = "container-toolkit"
    NODE_AGENT = "node-agent"
    DRA_KUBELET_PLUGIN = "dra-kubelet-plugin"
    VALIDATOR = "validator"


# Pod labels that identify each operand, as the reference operator sets them; a value
# ending in `*` matches a prefix (per-OS/per-kernel driver DaemonSets get their own names).
SOFTWARE_POD_LABELS: Mapping[NodeSoftware, tuple[tuple[str, str], ...]] = {
    NodeSoftware.DRIVER: (
        ("app", "nvidia-driver-daemonset*"),
        ("app", "nvidia-gpu-driver-*"),
        ("app.kubernetes.io/component", "nvidia-driver"),
    ),
    NodeSoftware.DEVICE_PLUGIN: (("app", "nvidia-device-plugin-daemonset"),),
    NodeSoftware.GPU_FEATURE_DISCOVERY: (("app", "gpu-feature-discovery"),),
    NodeSoftware.MIG_MANAGER: (("app", "nvidia-mig-manager"),),
    NodeSoftware.DCGM: (("app", "nvidia-dcgm"),),
    NodeSoftware.DCGM_EXPORTER: (("app", "nvidia-dcgm-exporter"),),
    NodeSoftware.MPS_CONTROL_DAEMON: (("app", "nvidia-device-plugin-mps-control-daemon"),),
    NodeSoftware.VFIO_MANAGER: (("app", "nvidia-vfio-manager"), ("name", "nvidia-vfio-manager")),
    NodeSoftware.SANDBOX_DEVICE_PLUGIN: (("app", "nvidia-sandbox-device-plugin-daemonset"),),
    NodeSoftware.CONTAINER_TOOLKIT: (("app", "nvidia-container-toolkit-daemonset"),),
    NodeSoftware.NODE_AGENT: (("app", "gpu-operator-node-agent"),),
    NodeSoftware.DRA_KUBELET_PLUGIN: (("app", "nvidia-dra-driver-kubelet-plugin"),),
    NodeSoftware.VALIDATOR: (("app", "nvidia-operator-validator"),),
}

# GPU clients the MIG manager stops (through their deploy label) while it reconfigures.
MIG_PAUSED_SOFTWARE: Mapping[str, NodeSoftware] = {
    "nvidia.com/gpu.deploy.device-plugin": NodeSoftware.DEVICE_PLUGIN,
    "nvidia.com/gpu.deploy.gpu-feature-discovery": NodeSoftware.GPU_FEATURE_DISCOVERY,
    "nvidia.com/gpu.deploy.dcgm-exporter": NodeSoftware.DCGM_EXPORTER,
    "nvidia.com/gpu.deploy.dcgm": NodeSoftware.DCGM,
}
PAUSED_FOR_MIG = "paused-for-mig-change"

LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
"""The device-plugin config (a key of its ConfigMap) a node uses; else `DEFAULT_CONFIG`."""
ANNOTATION_MIG_APPLIED = SIM_PREFIX + "mig-applied"
ANNOTATION_MIG_FAILED = SIM_PREFIX + "mig-failed"
ANNOTATION_DRIVER_LOADED = SIM_PREFIX + "driver-loaded"
"""`<version> <DRIVER_CONFIG_DIGEST>` of the driver whose kernel modules are loaded on the
node (written while a driver pod with a digest is ready; `_node_model.loaded_driver`)."""
DRIVER_DIGEST_ENV = "DRIVER_CONFIG_DIGEST"
RESOURCE_PREFIX = DEVICE_PREFIX
"""The resources the simulated device plugins advertise (`nvidia.com/`)."""

_GFD_GPU_KEYS = frozenset(
    "nvidia.com/gpu." + key
    for key in (
        "product",
        "count",
        "memory",
        "family",
        "machine",
        "replicas",
        "sharing-strategy",
        "mode",
        "compute.major",
        "compute.minor",
        "slices.gi",
        "slices.ci",
    )
)
_GFD_PREFIXES = ("nvidia.com/cuda.", "nvidia.com/gfd.", "nvidia.com/mig-", "nvidia.com/mps.")


def software_of(labels: Mapping[str, str]) -> NodeSoftware | None:
    """Which node software a pod with these labels runs, by `SOFTWARE_POD_LABELS`."""
    for software, matchers in SOFTWARE_POD_LABELS.items():
        for key, wanted in matchers:
            value = labels.get(key)
            if value is None:
                continue
            if wanted.endswith("*") and value.startswith(wanted[:-1]):
                return software
            if value == wanted:
                return software
    return None


def is_gfd_label(key: str) -> bool:
    """Whether GPU feature discovery owns this node label."""
    return (
        key.startswith(_GFD_PREFIXES)
        or key in _GFD_GPU_KEYS
        or key in ("nvidia.com/mig.capable", LABEL_MIG_STRATEGY)
    )


# -- what the loop knows about pods and nodes ------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """An operand pod, trimmed to what the node software cares about."""

    key: str
    node: str
    software: NodeSoftware
    ready: bool
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    config_maps: tuple[str, ...] = ()
    """`namespace/name` of each ConfigMap the pod mounts (the device plugin's configs)."""


def pod_info(pod: Mapping[str, Any]) -> PodInfo | None:
    """The operand pod `pod` is, or None for any other pod (or one not bound to a node)."""
    software = software_of(labels_of(pod))
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if software is None or not node:
        return None
    status = pod.get("status") or {}
    ready = (
        not is_deleting(pod)
        and status.get("phase") == "Running"
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
    )
    containers = spec.get("containers") or []
    env = {
        item["name"]: str(item["value"])
        for container in containers
        for item in container.get("env") or []
        if "value" in item and "name" in item
    }
    namespace = namespace_of(pod)
    return PodInfo(
        key=f"{namespace}/{name_of(pod)}",
        node=node,
        software=software,
        ready=bool(ready),
        image=str(containers[0].get("image", "")) if containers else "",
        env=env,
        config_maps=tuple(f"{namespace}/{name}" for name in _config_map_names(spec)),
    )


def _config_map_names(spec: Mapping[str, Any]) -> list[str]:
    return [
        str(v["configMap"]["name"])
        for v in spec.get("volumes") or []
        if isinstance(v.get("configMap"), Mapping) and v["configMap"].get("name")
    ]


def sees_gpus(spec: Mapping[str, Any]) -> bool:
    """A container asks the NVIDIA runtime for GPUs by environment alone
    (`NVIDIA_VISIBLE_DEVICES=all` or a list), with no device-plugin request: on a real node
    its processes use the GPUs all the same."""
    return any(
        e.get("name") == "NVIDIA_VISIBLE_DEVICES"
        and str(e.get("value") or "") not in ("", "void", "none")
        for container in spec.get("containers") or []
        for e in container.get("env") or []
    )


def gpu_workload_node(pod: dict[str, Any]) -> str | None:
    """The node whose GPU `pod` holds: a pod that is no node software, requests a GPU
    resource (or sees the GPUs through `NVIDIA_VISIBLE_DEVICES`), is bound and has not
    finished (a terminating one still holds it until it is gone, as its processes do on a
    real GPU). None for any other pod."""
    if software_of(labels_of(pod)) is not None:
        return None
    view = pod_view(pod)
    uses = view.gpu or sees_gpus(pod.get("spec") or {})
    return view.node if uses and view.active and view.node else None


def _gpu_limit(spec: Mapping[str, Any]) -> int:
    """How many `nvidia.com/` devices the pod's containers limit."""
    gpus = 0
    for container in spec.get("containers") or []:
        for key, value in ((container.get("resources") or {}).get("limits") or {}).items():
            if key.startswith(RESOURCE_PREFIX):
                try:
                    gpus += int(value)
                except (TypeError, ValueError):
                    continue
    return gpus


@dataclass(frozen=True)
class GpuWorkload:
    """A running pod that asked for GPUs: on a real node, its processes use them."""

    key: str
    uid: str
    node: str
    gpus: int


def gpu_workload(pod: Mapping[str, Any]) -> GpuWorkload | None:
    """The pod as a GPU workload: bound, Running, not being deleted, and limiting an
    `nvidia.com/` resource (or seeing the GPUs through its environment: one process);
    None for any other pod (and for the NVIDIA software itself)."""
    spec = pod.get("spec") or {}
    if software_of(labels_of(pod)) is not None or is_deleting(pod):
        return None
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") != "Running":
        return None
    gpus = _gpu_limit(spec) or (1 if sees_gpus(spec) else 0)
    if gpus <= 0:
        return None
    return GpuWorkload(
        key=f"{namespace_of(pod)}/{name_of(pod)}",
        uid=uid_of(pod),
        node=str(spec["nodeName"]),
        gpus=gpus,
    )


@dataclass(frozen=True)
class Hardware:
    """The simulated GPUs of a node, from its `sim.gpu-operator.io/*` annotations."""

    gpus: int
    product: GpuProduct
    mig_capable: bool
    host_driver: str = ""

    @property
    def gpu(self) -> GpuProduct:
        """The product as this node sees it: MIG only where the node is MIG-capable."""
        return self.product if self.mig_capable else replace(self.product, mig_family=None)


@dataclass(frozen=True)
class NodeInfo:
    """A node, trimmed to labels, annotations and the GPU part of its resources."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    resource_version: int = 0

    @property
    def hardware(self) -> Hardware | None:
        try:
            gpus = int(self.annotations.get(ANNOTATION_GPUS, "0"))
        except ValueError:
            return None
        gpu = PRODUCTS.get(self.annotations.get(ANNOTATION_PRODUCT, ""))
        if gpus <= 0 or gpu is None:
            return None
        return Hardware(
            gpus=gpus,
            product=gpu,
            mig_capable=self.annotations.get(ANNOTATION_MIG_CAPABLE) == "true",
            host_driver=self.annotations.get(ANNOTATION_HOST_DRIVER, ""),
        )


def _gpu_resources(resources: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: str(v) for k, v in (resources or {}).items() if k.startswith(RESOURCE_PREFIX)}


def _sim_annotations(meta: Mapping[str, Any]) -> dict[str, str]:
    annotations = meta.get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith(SIM_PREFIX)}


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    meta = metadata_of(node)
    status = node.get("status") or {}
    try:
        version = int(meta.get("resourceVersion", "0"))
    except ValueError:
        version = 0
    return NodeInfo(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        annotations=_sim_annotations(meta),
        capacity=_gpu_resources(status.get("capacity")),
        allocatable=_gpu_resources(status.get("allocatable")),
        resource_version=version,
    )


# -- what the cache keeps: only what the two functions above read ------------------------


def trim_node(node: dict[str, Any]) -> dict[str, Any]:
    """A Node cut down to what `node_info` reads (a node's images and conditions are most
    of it, and change on every heartbeat)."""
    meta = metadata_of(node)
    status = node.get("status") or {}
    return {
        "metadata": {
            "name": meta.get("name", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
            "labels": dict(meta.get("labels") or {}),
            "annotations": _sim_annotations(meta),
        },
        "status": {
            "capacity": _gpu_resources(status.get("capacity")),
            "allocatable": _gpu_resources(status.get("allocatable")),
        },
    }


def _device_resources(container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's `resources`, cut down to the device resources."""
    resources = container.get("resources") or {}
    kept: dict[str, Any] = {}
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        if devices := {k: v for k, v in values.items() if k.startswith(RESOURCE_PREFIX)}:
            kept[part] = devices
    return kept


def _device_containers(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What admission reads of the containers: each one's device resources (the app
    containers keep their `NVIDIA_VISIBLE_DEVICES` too, which `sees_gpus` reads) and
    whether an init container restarts."""
    containers = []
    for container in spec.get("containers") or []:
        kept: dict[str, Any] = {}
        if resources := _device_resources(container):
            kept["resources"] = resources
        env = [e for e in container.get("env") or [] if e.get("name") == "NVIDIA_VISIBLE_DEVICES"]
        if env:
            kept["env"] = env
        containers.append(kept)
    out: dict[str, Any] = {"containers": containers}
    if init := _device_init_containers(spec):
        out["initContainers"] = init
    return out


def _device_init_containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    init = []
    for container in spec.get("initContainers") or []:
        kept: dict[str, Any] = {"resources": _device_resources(container)}
        if "restartPolicy" in container:
            kept["restartPolicy"] = container["restartPolicy"]
        init.append(kept)
    return init if any(c["resources"] for c in init) else []


def _keep_admission(meta: Mapping[str, Any], kept: dict[str, Any]) -> None:
    """Keep what admission reads of the metadata: the uid, the creation time and the
    admission annotation."""
    for key in ("uid", "creationTimestamp"):
        if key in meta:
            kept[key] = meta[key]
    admitted = (meta.get("annotations") or {}).get(ANNOTATION_ADMITTED)
    if admitted is not None:
        kept["annotations"] = {ANNOTATION_ADMITTED: admitted}


def trim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A Pod cut down to what `pod_info`, `gpu_workload_node`, `gpu_workload` and
    `device_pod` (admission) read; any other pod keeps its name alone."""
    meta = metadata_of(pod)
    kept: dict[str, Any] = {
        key: meta[key] for key in ("name", "namespace", "resourceVersion") if key in meta
    }
    if meta.get("deletionTimestamp"):
        kept["deletionTimestamp"] = meta["deletionTimestamp"]
    labels = meta.get("labels") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if software_of(labels) is None:
        if gpu_workload_node(pod) is None and device_pod(pod) is None:
            return {"metadata": {k: v for k, v in kept.items() if k != "deletionTimestamp"}}
        # A GPU workload: its node, its phase, its uid (the simulated processes' cgroup),
        # the devices it asks for (how many GPUs its processes use; admission) and whether
        # and when it was admitted are all the model, the node agents and admission read.
        _keep_admission(meta, kept)
        return {
            "metadata": kept,
            "spec": {"nodeName": spec.get("nodeName"), **_device_containers(spec)},
            "status": {"phase": status.get("phase")},
        }
    kept["labels"] = dict(labels)
    if device_pod(pod) is not None or software_of(labels) is NodeSoftware.VALIDATOR:
        _keep_admission(meta, kept)
    containers = []
    for container in spec.get("containers") or []:
        trimmed: dict[str, Any] = {
            "image": container.get("image", ""),
            "env": [e for e in container.get("env") or [] if "name" in e and "value" in e],
        }
        if resources := _device_resources(container):
            trimmed["resources"] = resources
        containers.append(trimmed)
    kept_spec: dict[str, Any] = {"nodeName": spec.get("nodeName"), "containers": containers}
    if init := _device_init_containers(spec):
        kept_spec["initContainers"] = init
    if names := _config_map_names(spec):
        kept_spec["volumes"] = [{"configMap": {"name": name}} for name in names]
    return {
        "metadata": kept,
        "spec": kept_spec,
        "status": {
            "phase": status.get("phase"),
            "conditions": [c for c in status.get("conditions") or [] if c.get("type") == "Ready"],
        },
    }
