"""What NVIDIA's node software does to one node, as a pure function of the node and the
operand pods on it (`plan_node`); the controller in `gpusim.gpu_node_behaviour` only writes
the plan. Unit-tested without a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from gpusim._hardware import MigConfigError, mig_layout, mig_profile
from gpusim._node_software import (
    ANNOTATION_DRIVER_LOADED,
    ANNOTATION_MIG_APPLIED,
    ANNOTATION_MIG_FAILED,
    DRIVER_DIGEST_ENV,
    LABEL_MIG_CONFIG,
    LABEL_MIG_STATE,
    LABEL_MIG_STRATEGY,
    MIG_PAUSED_SOFTWARE,
    PAUSED_FOR_MIG,
    RESOURCE_PREFIX,
    Hardware,
    NodeInfo,
    NodeSoftware,
    PodInfo,
    is_gfd_label,
)
from gpusim._sickness import sick_gpus

DEFAULT_DRIVER_VERSION = "595.91.07"
DEFAULT_MIG_STRATEGY = "single"
_CUDA_BY_DRIVER = ((590, "13.1"), (580, "13.0"), (570, "12.8"), (550, "12.4"), (535, "12.2"))


@dataclass(frozen=True)
class MigProgress:
    """A MIG reconfiguration under way on one node: the config and when it began."""

    config: str
    started: float


@dataclass
class Plan:
    """The writes one node needs now, and what the loop must remember or schedule."""

    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    resources: dict[str, str | None] = field(default_factory=dict)
    offered: dict[str, str] = field(default_factory=dict)
    """The device resources the node's plugins serve once the plan is written (what the
    simulated device manager admits GPU pods against)."""
    mig: MigProgress | None = None  # reconfiguration under way after this plan
    recheck_after: float | None = None

    @property
    def empty(self) -> bool:
        return not (self.labels or self.annotations or self.resources)


@dataclass(frozen=True)
class Sharing:
    """How the device plugin's config shares each whole GPU: `mps` or `time-slicing`,
    `replicas` clients per GPU, advertised as `resource`."""

    strategy: str
    replicas: int
    resource: str = "nvidia.com/gpu"


def sharing_of(config_text: str | None) -> Sharing | None:
    """The sharing a device-plugin config (`version: v1`, `sharing.mps` or
    `sharing.timeSlicing`) asks for `nvidia.com/gpu`, or None (none, or unreadable: the
    real plugin then shares nothing)."""
    try:
        config = yaml.safe_load(config_text or "")
    except yaml.YAMLError:
        return None
    sharing = config.get("sharing") if isinstance(config, Mapping) else None
    if not isinstance(sharing, Mapping):
        return None
    for key, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):
        section: Any = sharing.get(key)
        if not isinstance(section, Mapping):
            continue
        resources = section.get("resources")
        for entry in resources if isinstance(resources, list) else []:
            if not isinstance(entry, Mapping) or entry.get("name") != "nvidia.com/gpu":
                continue
            replicas = entry.get("replicas")
            if not isinstance(replicas, int) or replicas < 1:
                return None
            default = "nvidia.com/gpu.shared" if section.get("renameByDefault") else ""
            resource = str(entry.get("rename") or default or "nvidia.com/gpu")
            if not resource.startswith("nvidia.com/"):
                resource = "nvidia.com/" + resource
            return Sharing(strategy, replicas, resource)
    return None


def driver_version(image: str) -> str:
    """`nvcr.io/nvidia/driver:595.91.07-ubuntu22.04` -> `595.91.07` (default if unknown)."""
    name = image.rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name and "@" not in name else ""
    match = re.match(r"^(\d+\.\d+(?:\.\d+)?)", tag)
    return match.group(1) if match else DEFAULT_DRIVER_VERSION


def mig_strategy(labels: Mapping[str, str], pods: Iterable[PodInfo]) -> str:
    ready = {p.software: p for p in pods if p.ready}
    for software in (NodeSoftware.DEVICE_PLUGIN, NodeSoftware.GPU_FEATURE_DISCOVERY):
        pod = ready.get(software)
        if pod is not None and pod.env.get("MIG_STRATEGY"):
            return pod.env["MIG_STRATEGY"]
    return labels.get(LABEL_MIG_STRATEGY) or DEFAULT_MIG_STRATEGY


def _applied_layout(hardware: Hardware, applied: str) -> dict[str, int] | None:
    """MIG instances per GPU for the applied config, or None when MIG is off."""
    if not hardware.mig_capable or applied == "all-disabled":
        return None
    try:
        return mig_layout(hardware.gpu, applied)
    except MigConfigError:
        return None


def gpu_resources(
    hardware: Hardware, applied: str, strategy: str, sharing: Sharing | None = None
) -> dict[str, str]:
    """What the device plugin advertises for this node's GPUs (whole GPUs shared by
    `sharing`: `replicas` clients each)."""
    layout = _applied_layout(hardware, applied)
    if layout is None or strategy == "none":
        if sharing is not None:
            return {sharing.resource: str(hardware.gpus * sharing.replicas)}
        return {"nvidia.com/gpu": str(hardware.gpus)}
    if strategy == "mixed":
        return {
            f"nvidia.com/mig-{profile}": str(hardware.gpus * count)
            for profile, count in sorted(layout.items())
        }
    # single: one profile on every GPU, else the plugin refuses to advertise anything.
    count = next(iter(layout.values())) if len(layout) == 1 else 0
    return {"nvidia.com/gpu": str(hardware.gpus * count)}


def cuda_version(driver: str) -> str:
    """The CUDA version a driver supports (`12.8`), as NVML and GFD report it."""
    major = int(driver.split(".", 1)[0] or 0)
    return next((v for floor, v in _CUDA_BY_DRIVER if major >= floor), "12.0")


def applied_layout(hardware: Hardware, applied: str) -> dict[str, int] | None:
    """MIG instances per GPU for the applied config, or None when MIG is off."""
    return _applied_layout(hardware, applied)


def passthrough_resource(hardware: Hardware) -> str:
    """The resource KubeVirt's GPU device plugin names a GPU bound to vfio-pci by: its
    model in upper case, other characters as `_` (`nvidia.com/NVIDIA_H100_80GB_HBM3`; the
    real plugin takes the PCI database's device name, which the simulation does not have).
    """
    model = re.sub(r"[^A-Z0-9]+", "_", hardware.product.name.upper()).strip("_")
    return RESOURCE_PREFIX + model


def passthrough_resources(
    hardware: Hardware, pods: Sequence[PodInfo], driver: bool
) -> dict[str, str]:
    """What the sandbox device plugin advertises: every GPU, once the VFIO manager has
    bound them to vfio-pci. A container driver still running holds the GPUs: nothing."""
    ready = {p.software for p in pods if p.ready}
    if driver or not {NodeSoftware.VFIO_MANAGER, NodeSoftware.SANDBOX_DEVICE_PLUGIN} <= ready:
        return {}
    return {passthrough_resource(hardware): str(hardware.gpus)}


def gfd_labels(
    hardware: Hardware, driver: str, applied: str, strategy: str, sharing: Sharing | None = None
) -> dict[str, str]:
    """The labels GPU feature discovery writes for this node."""
    gpu = hardware.product
    parts = [*driver.split("."), "0", "0"][:3]
    cuda = cuda_version(driver)
    cuda_major, cuda_minor = cuda.split(".")
    labels = {
        "nvidia.com/cuda.driver.major": parts[0],
        "nvidia.com/cuda.driver.minor": parts[1],
        "nvidia.com/cuda.driver.rev": parts[2],
        "nvidia.com/cuda.driver-version.major": parts[0],
        "nvidia.com/cuda.driver-version.minor": parts[1],
        "nvidia.com/cuda.driver-version.revision": parts[2],
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/gpu.compute.major": str(gpu.compute[0]),
        "nvidia.com/gpu.compute.minor": str(gpu.compute[1]),
        "nvidia.com/gpu.family": gpu.family,
        "nvidia.com/gpu.machine": "KWOK-Simulated-Server",
        "nvidia.com/gpu.product": gpu.name,
        "nvidia.com/gpu.count": str(hardware.gpus),
        "nvidia.com/gpu.memory": str(gpu.memory_mib),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true" if hardware.mig_capable else "false",
        "nvidia.com/mps.capable": "false",
        LABEL_MIG_STRATEGY: strategy,
    }
    layout = _applied_layout(hardware, applied)
    if layout is None or strategy == "none":
        if sharing is not None:
            labels["nvidia.com/gpu.product"] = f"{gpu.name}-SHARED"
            labels["nvidia.com/gpu.replicas"] = str(sharing.replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = sharing.strategy
            labels["nvidia.com/mps.capable"] = "true" if sharing.strategy == "mps" else "false"
        return labels
    if strategy == "single":
        if len(layout) == 1:
            name, count = next(iter(layout.items()))
            profile = mig_profile(hardware.gpu, name)
            labels["nvidia.com/gpu.product"] = f"{gpu.name}-MIG-{name}"
            labels["nvidia.com/gpu.count"] = str(hardware.gpus * count)
            labels["nvidia.com/gpu.memory"] = str(profile.memory_mib)
            labels["nvidia.com/gpu.slices.gi"] = str(profile.slices)
            labels["nvidia.com/gpu.slices.ci"] = str(profile.slices)
        return labels
    for name, count in layout.items():
        profile = mig_profile(hardware.gpu, name)
        prefix = f"nvidia.com/mig-{name}."
        labels[prefix + "count"] = str(hardware.gpus * count)
        labels[prefix + "memory"] = str(profile.memory_mib)
        labels[prefix + "product"] = f"{gpu.name}-MIG-{name}"
        labels[prefix + "replicas"] = "1"
        labels[prefix + "sharing-strategy"] = "none"
        labels[prefix + "slices.gi"] = str(profile.slices)
        labels[prefix + "slices.ci"] = str(profile.slices)
    return labels


def plan_node(
    node: NodeInfo,
    pods: Sequence[PodInfo],
    *,
    now: float,
    mig: MigProgress | None = None,
    mig_reconfigure_seconds: float = 1.0,
    gpu_workloads: int = 0,
    plugin_config: str | None = None,
) -> Plan:
    """Everything the node software would change on `node` now, given the pods on it
    (`gpu_workloads`: how many pods other than the node software hold its GPUs;
    `plugin_config`: the device-plugin config the node uses, as its YAML text)."""
    plan = Plan()
    hardware = node.hardware
    if hardware is None:
        return plan
    ready = {p.software: p for p in pods if p.ready}
    driver_pod = ready.get(NodeSoftware.DRIVER)
    driver = driver_version(driver_pod.image) if driver_pod else hardware.host_driver or None
    labels = dict(node.labels)
    annotations = dict(node.annotations)
    if not hardware.host_driver:
        loaded = loaded_driver(annotations, pods, driver_pod, gpu_workloads=gpu_workloads)
        driver = driver or loaded

    if driver and NodeSoftware.MIG_MANAGER in ready and labels.get(LABEL_MIG_CONFIG):
        _plan_mig(
            plan,
            hardware,
            labels,
            annotations,
            pods,
            now,
            mig,
            mig_reconfigure_seconds,
            gpu_workloads=gpu_workloads,
        )

    applied = annotations.get(ANNOTATION_MIG_APPLIED, "all-disabled")
    strategy = mig_strategy(labels, pods)

    sharing = sharing_of(plugin_config)
    # With MPS the plugin serves its clients through the node's MPS control daemon, and
    # advertises nothing until one runs there.
    serving = sharing is None or sharing.strategy != "mps"
    serving = serving or NodeSoftware.MPS_CONTROL_DAEMON in ready
    wanted: dict[str, str] = {}
    if driver and NodeSoftware.DEVICE_PLUGIN in ready and serving:
        # The plugin's health check stops advertising a GPU that raised a critical XID or
        # counts ECC errors (`_sickness`), until a reset clears them.
        healthy = replace(hardware, gpus=max(hardware.gpus - len(sick_gpus(annotations)), 0))
        wanted = gpu_resources(healthy, applied, strategy, sharing)
    wanted.update(passthrough_resources(hardware, pods, driver_pod is not None))
    plan.offered = wanted
    for key in sorted(set(wanted) | set(node.capacity) | set(node.allocatable)):
        value = wanted.get(key)
        if node.capacity.get(key) != value or node.allocatable.get(key) != value:
            plan.resources[key] = value

    if driver and NodeSoftware.GPU_FEATURE_DISCOVERY in ready:
        desired = gfd_labels(hardware, driver, applied, strategy, sharing)
        for key in [k for k in labels if is_gfd_label(k) and k not in desired]:
            labels.pop(key)
        labels.update(desired)

    plan.labels = _diff(node.labels, labels)
    plan.annotations = _diff(node.annotations, annotations)
    return plan


def loaded_driver(
    annotations: dict[str, str],
    pods: Sequence[PodInfo],
    ready: PodInfo | None,
    *,
    gpu_workloads: int,
) -> str | None:
    """The version of a driver whose kernel modules stay loaded while no driver pod is
    ready, or None; keeps `ANNOTATION_DRIVER_LOADED` (edited in place) up to date.

    Simulation of the reference's restart-only (26.7): a driver container that starts with
    the `DRIVER_CONFIG_DIGEST` the loaded driver was installed with keeps it (no unload,
    no rebuild), so the GPUs stay usable, and offered by a device plugin that still runs,
    while the driver pod is replaced: the kubelet's device admission keeps admitting GPU
    pods. The modules stay loaded while every driver pod on the node carries that digest,
    or, with no driver pod at all (between the old pod's end and the new one's creation),
    while GPU workloads hold the GPUs (the kernel refuses to unload modules in use). A
    driver pod with another digest, or none and nothing holding the GPUs, unloads them."""
    if ready is not None:
        digest = ready.env.get(DRIVER_DIGEST_ENV)
        if digest:
            annotations[ANNOTATION_DRIVER_LOADED] = f"{driver_version(ready.image)} {digest}"
        else:
            annotations.pop(ANNOTATION_DRIVER_LOADED, None)
        return None
    version, _, digest = annotations.get(ANNOTATION_DRIVER_LOADED, "").partition(" ")
    if not digest:
        return None
    drivers = [p for p in pods if p.software is NodeSoftware.DRIVER]
    if drivers and all(p.env.get(DRIVER_DIGEST_ENV) == digest for p in drivers):
        return version
    if not drivers and gpu_workloads:
        return version
    annotations.pop(ANNOTATION_DRIVER_LOADED, None)
    return None


def _plan_mig(
    plan: Plan,
    hardware: Hardware,
    labels: dict[str, str],
    annotations: dict[str, str],
    pods: Sequence[PodInfo],
    now: float,
    mig: MigProgress | None,
    delay: float,
    *,
    gpu_workloads: int,
) -> None:
    """The MIG manager's reconfiguration, one step per call; edits labels/annotations.

    As the real one does, it checks first whether the requested layout is in place and
    then says `success` without going `pending` or pausing anything: `pending` always
    means a change that needs the GPUs idle. And as on real hardware, where mig-parted
    refuses to repartition a GPU that a process holds, the change waits (still
    `pending`) while any workload pod holds the node's GPUs; clearing them is for
    someone else (the operator evicts them)."""
    requested = labels[LABEL_MIG_CONFIG]
    state = labels.get(LABEL_MIG_STATE)
    applied = annotations.get(ANNOTATION_MIG_APPLIED, "all-disabled")
    if state == "success" and requested == applied:
        return
    if state == "failed" and annotations.get(ANNOTATION_MIG_FAILED) == requested:
        return
    if requested == applied and (mig is None or mig.config != requested):
        labels[LABEL_MIG_STATE] = "success"
        annotations.pop(ANNOTATION_MIG_FAILED, None)
        _resume_clients(labels)
        plan.mig = None
        return
    if mig is None or mig.config != requested:
        labels[LABEL_MIG_STATE] = "pending"
        if requested != applied:
            for key in MIG_PAUSED_SOFTWARE:
                if labels.get(key) == "true":
                    labels[key] = PAUSED_FOR_MIG
        plan.mig = MigProgress(requested, now)
        plan.recheck_after = delay
        return
    plan.mig = mig
    paused = {op for key, op in MIG_PAUSED_SOFTWARE.items() if labels.get(key) == PAUSED_FOR_MIG}
    if any(p.software in paused for p in pods):
        return  # the paused clients' pods are still on the node; their deletion requeues
    if gpu_workloads:
        return  # a workload still holds the GPUs; its pod's deletion requeues
    remaining = mig.started + delay - now
    if remaining > 0:
        plan.recheck_after = remaining
        return
    try:
        mig_layout(hardware.gpu, requested)
    except MigConfigError:
        labels[LABEL_MIG_STATE] = "failed"
        annotations[ANNOTATION_MIG_FAILED] = requested
    else:
        labels[LABEL_MIG_STATE] = "success"
        annotations[ANNOTATION_MIG_APPLIED] = requested
        annotations.pop(ANNOTATION_MIG_FAILED, None)
    _resume_clients(labels)
    plan.mig = None


def _resume_clients(labels: dict[str, str]) -> None:
    for key in MIG_PAUSED_SOFTWARE:
        if labels.get(key) == PAUSED_FOR_MIG:
            labels[key] = "true"


def _diff(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
    changes.update({k: None for k in old if k not in new})
    return changes
