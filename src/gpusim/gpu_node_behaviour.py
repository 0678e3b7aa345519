"""GPU node behaviour: what NVIDIA's software would do on a real GPU node, simulated.

This is the one place where the simulated cluster pretends to have GPUs. kwok makes pods
Running; this loop watches which NVIDIA operand pods run on which node and updates the node
the way the real node software would:

* **driver** pod Running and Ready (or a driver preinstalled on the host) is what every rule
  below needs: without a driver no GPU is usable, so the node has no GPU resources.
* **device plugin** pod Running -> the node's capacity and allocatable get `nvidia.com/gpu`
  = GPUs on the node; with MIG on, strategy `single` -> `nvidia.com/gpu` = MIG instances,
  strategy `mixed` -> `nvidia.com/mig-<profile>` counts. Device plugin gone -> resources gone.
* **GPU feature discovery** pod Running -> the GFD labels (`nvidia.com/gpu.product`,
  `gpu.count`, `gpu.memory`, `mig.capable`, `cuda.driver.major`, ...). Like labels NFD keeps
  from a feature file, they stay when GFD stops; while GFD runs they are kept exact.
* **MIG manager** pod Running and the node label `nvidia.com/mig.config` set ->
  `nvidia.com/mig.config.state` goes `pending`, GPU clients are paused (operand deploy labels
  `true` -> `paused-for-mig-change`) until their pods are gone, the layout is applied after
  `mig_reconfigure_seconds`, then `success` (or `failed` for a config the GPU cannot apply)
  and the paused labels go back to `true`.

The MIG strategy is read the way the real pods read it: the `MIG_STRATEGY` env of the device
plugin (then GFD) container, else the node label `nvidia.com/mig.strategy`, else `single`.
The driver version comes from the driver pod's image tag (`driver:595.91.07-ubuntu22.04`).

What hardware a node has is in its `sim.gpu-operator.io/*` annotations (written when the
node is created); the MIG mode the GPUs are in is kept there too (`.../mig-applied`), as it
survives pod restarts on real hardware. Decisions are a pure function (`plan_node`), the
loop only watches, queues nodes and writes the differences (merge patches, no-op writes
skipped).

Run alone: `python -m gpusim.gpu_node_behaviour --kubeconfig PATH`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import json
import re
import signal
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpusim._hardware import (
    PRODUCTS,
    GpuProduct,
    MigConfigError,
    mig_layout,
    mig_profile,
)
from gpusim._nodes import (
    ANNOTATION_GPUS,
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_CAPABLE,
    ANNOTATION_PRODUCT,
    SIM_PREFIX,
)

# -- which pods are which operand: the one table ---------------------------------------


class Operand(enum.Enum):
    DRIVER = "driver"
    DEVICE_PLUGIN = "device-plugin"
    GPU_FEATURE_DISCOVERY = "gpu-feature-discovery"
    MIG_MANAGER = "mig-manager"
    DCGM = "dcgm"
    DCGM_EXPORTER = "dcgm-exporter"


# Pod labels that identify each operand, as the reference operator sets them; a value
# ending in `*` matches a prefix (per-OS/per-kernel driver DaemonSets get their own names).
OPERAND_POD_LABELS: Mapping[Operand, tuple[tuple[str, str], ...]] = {
    Operand.DRIVER: (
        ("app", "nvidia-driver-daemonset*"),
        ("app", "nvidia-gpu-driver-*"),
        ("app.kubernetes.io/component", "nvidia-driver"),
    ),
    Operand.DEVICE_PLUGIN: (("app", "nvidia-device-plugin-daemonset"),),
    Operand.GPU_FEATURE_DISCOVERY: (("app", "gpu-feature-discovery"),),
    Operand.MIG_MANAGER: (("app", "nvidia-mig-manager"),),
    Operand.DCGM: (("app", "nvidia-dcgm"),),
    Operand.DCGM_EXPORTER: (("app", "nvidia-dcgm-exporter"),),
}

# GPU clients the MIG manager stops (through their deploy label) while it reconfigures.
MIG_PAUSED_OPERANDS: Mapping[str, Operand] = {
    "nvidia.com/gpu.deploy.device-plugin": Operand.DEVICE_PLUGIN,
    "nvidia.com/gpu.deploy.gpu-feature-discovery": Operand.GPU_FEATURE_DISCOVERY,
    "nvidia.com/gpu.deploy.dcgm-exporter": Operand.DCGM_EXPORTER,
    "nvidia.com/gpu.deploy.dcgm": Operand.DCGM,
}
PAUSED_FOR_MIG = "paused-for-mig-change"

LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
ANNOTATION_MIG_APPLIED = SIM_PREFIX + "mig-applied"
ANNOTATION_MIG_FAILED = SIM_PREFIX + "mig-failed"
RESOURCE_PREFIX = "nvidia.com/"
DEFAULT_DRIVER_VERSION = "595.91.07"
DEFAULT_MIG_STRATEGY = "single"

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
_CUDA_BY_DRIVER = ((590, "13.1"), (580, "13.0"), (570, "12.8"), (550, "12.4"), (535, "12.2"))


def operand_of(labels: Mapping[str, str]) -> Operand | None:
    """Which operand a pod with these labels is, by `OPERAND_POD_LABELS`."""
    for operand, matchers in OPERAND_POD_LABELS.items():
        for key, wanted in matchers:
            value = labels.get(key)
            if value is None:
                continue
            if wanted.endswith("*") and value.startswith(wanted[:-1]):
                return operand
            if value == wanted:
                return operand
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
    operand: Operand
    ready: bool
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)


def pod_info(pod: Mapping[str, Any]) -> PodInfo | None:
    """The operand pod `pod` is, or None for any other pod (or one not bound to a node)."""
    meta = pod.get("metadata") or {}
    operand = operand_of(meta.get("labels") or {})
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if operand is None or not node:
        return None
    status = pod.get("status") or {}
    ready = (
        not meta.get("deletionTimestamp")
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
    return PodInfo(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        node=node,
        operand=operand,
        ready=bool(ready),
        image=str(containers[0].get("image", "")) if containers else "",
        env=env,
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


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    meta = node.get("metadata") or {}
    status = node.get("status") or {}

    def gpu_part(resources: Mapping[str, str] | None) -> dict[str, str]:
        return {k: str(v) for k, v in (resources or {}).items() if k.startswith(RESOURCE_PREFIX)}

    try:
        version = int(meta.get("resourceVersion", "0"))
    except ValueError:
        version = 0
    return NodeInfo(
        name=meta.get("name", ""),
        labels=dict(meta.get("labels") or {}),
        annotations={
            k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(SIM_PREFIX)
        },
        capacity=gpu_part(status.get("capacity")),
        allocatable=gpu_part(status.get("allocatable")),
        resource_version=version,
    )


# -- decisions: a pure function of a node and the pods on it ----------------------------


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
    mig: MigProgress | None = None  # reconfiguration under way after this plan
    recheck_after: float | None = None

    @property
    def empty(self) -> bool:
        return not (self.labels or self.annotations or self.resources)


def driver_version(image: str) -> str:
    """`nvcr.io/nvidia/driver:595.91.07-ubuntu22.04` -> `595.91.07` (default if unknown)."""
    name = image.rsplit("/", 1)[-1]
    tag = name.split(":", 1)[1] if ":" in name and "@" not in name else ""
    match = re.match(r"^(\d+\.\d+(?:\.\d+)?)", tag)
    return match.group(1) if match else DEFAULT_DRIVER_VERSION


def mig_strategy(labels: Mapping[str, str], pods: Iterable[PodInfo]) -> str:
    ready = {p.operand: p for p in pods if p.ready}
    for operand in (Operand.DEVICE_PLUGIN, Operand.GPU_FEATURE_DISCOVERY):
        pod = ready.get(operand)
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


def gpu_resources(hardware: Hardware, applied: str, strategy: str) -> dict[str, str]:
    """What the device plugin advertises for this node's GPUs."""
    layout = _applied_layout(hardware, applied)
    if layout is None or strategy == "none":
        return {"nvidia.com/gpu": str(hardware.gpus)}
    if strategy == "mixed":
        return {
            f"nvidia.com/mig-{profile}": str(hardware.gpus * count)
            for profile, count in sorted(layout.items())
        }
    # single: one profile on every GPU, else the plugin refuses to advertise anything.
    count = next(iter(layout.values())) if len(layout) == 1 else 0
    return {"nvidia.com/gpu": str(hardware.gpus * count)}


def gfd_labels(hardware: Hardware, driver: str, applied: str, strategy: str) -> dict[str, str]:
    """The labels GPU feature discovery writes for this node."""
    gpu = hardware.product
    parts = [*driver.split("."), "0", "0"][:3]
    major = int(parts[0])
    cuda = next((v for floor, v in _CUDA_BY_DRIVER if major >= floor), "12.0")
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
) -> Plan:
    """Everything the node software would change on `node` now, given the pods on it."""
    plan = Plan()
    hardware = node.hardware
    if hardware is None:
        return plan
    ready = {p.operand: p for p in pods if p.ready}
    driver_pod = ready.get(Operand.DRIVER)
    driver = driver_version(driver_pod.image) if driver_pod else hardware.host_driver or None
    labels = dict(node.labels)
    annotations = dict(node.annotations)

    if driver and Operand.MIG_MANAGER in ready and labels.get(LABEL_MIG_CONFIG):
        _plan_mig(plan, hardware, labels, annotations, pods, now, mig, mig_reconfigure_seconds)

    applied = annotations.get(ANNOTATION_MIG_APPLIED, "all-disabled")
    strategy = mig_strategy(labels, pods)

    wanted: dict[str, str] = {}
    if driver and Operand.DEVICE_PLUGIN in ready:
        wanted = gpu_resources(hardware, applied, strategy)
    for key in sorted(set(wanted) | set(node.capacity) | set(node.allocatable)):
        value = wanted.get(key)
        if node.capacity.get(key) != value or node.allocatable.get(key) != value:
            plan.resources[key] = value

    if driver and Operand.GPU_FEATURE_DISCOVERY in ready:
        desired = gfd_labels(hardware, driver, applied, strategy)
        for key in [k for k in labels if is_gfd_label(k) and k not in desired]:
            labels.pop(key)
        labels.update(desired)

    plan.labels = _diff(node.labels, labels)
    plan.annotations = _diff(node.annotations, annotations)
    return plan


def _plan_mig(
    plan: Plan,
    hardware: Hardware,
    labels: dict[str, str],
    annotations: dict[str, str],
    pods: Sequence[PodInfo],
    now: float,
    mig: MigProgress | None,
    delay: float,
) -> None:
    """The MIG manager's reconfiguration, one step per call; edits labels/annotations."""
    requested = labels[LABEL_MIG_CONFIG]
    state = labels.get(LABEL_MIG_STATE)
    applied = annotations.get(ANNOTATION_MIG_APPLIED, "all-disabled")
    if state == "success" and requested == applied:
        return
    if state == "failed" and annotations.get(ANNOTATION_MIG_FAILED) == requested:
        return
    if mig is None or mig.config != requested:
        labels[LABEL_MIG_STATE] = "pending"
        if requested != applied:
            for key in MIG_PAUSED_OPERANDS:
                if labels.get(key) == "true":
                    labels[key] = PAUSED_FOR_MIG
        plan.mig = MigProgress(requested, now)
        plan.recheck_after = delay
        return
    plan.mig = mig
    paused = {op for key, op in MIG_PAUSED_OPERANDS.items() if labels.get(key) == PAUSED_FOR_MIG}
    if any(p.operand in paused for p in pods):
        return  # the paused clients' pods are still on the node; their deletion requeues
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
    for key in MIG_PAUSED_OPERANDS:
        if labels.get(key) == PAUSED_FOR_MIG:
            labels[key] = "true"
    plan.mig = None


def _diff(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
    changes.update({k: None for k in old if k not in new})
    return changes


# -- the loop ----------------------------------------------------------------------------

_WATCH_SECONDS = 300
_WATCH_INACTIVITY = 150.0
_LIST_PAGE = 500
_MERGE_PATCH = "application/merge-patch+json"


class GpuNodeBehaviour:
    """Watches nodes and operand pods, and writes what `plan_node` says, node by node."""

    def __init__(
        self,
        api: Any,
        *,
        mig_reconfigure_seconds: float = 1.0,
        workers: int = 8,
        log: Callable[[str], None] | None = None,
    ) -> None:
        from kubernetes_asyncio import client

        self._core: Any = client.CoreV1Api(api)
        self._mig_seconds = mig_reconfigure_seconds
        self._workers = workers
        self._log = log or (lambda line: print(line, flush=True))
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, PodInfo] = {}
        self._pods_by_node: dict[str, set[str]] = defaultdict(set)
        self._mig: dict[str, MigProgress] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._nodes_synced = asyncio.Event()
        self._pods_synced = asyncio.Event()
        self.synced = asyncio.Event()
        self.writes = 0

    async def run(self) -> None:
        """Run until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._follow_nodes())
            group.create_task(self._follow_pods())
            await self._nodes_synced.wait()
            await self._pods_synced.wait()
            for name in self._nodes:
                self._enqueue(name)
            for _ in range(self._workers):
                group.create_task(self._worker())
            self.synced.set()

    # queue: a key is never processed by two workers at once; bursts collapse into one.

    def _enqueue(self, name: str) -> None:
        if name in self._dirty:
            return
        self._dirty.add(name)
        if name not in self._processing:
            self._queue.put_nowait(name)

    def _enqueue_after(self, name: str, delay: float) -> None:
        if delay <= 0:
            self._enqueue(name)
            return
        loop = asyncio.get_running_loop()
        handle = self._timers.get(name)
        due = loop.time() + delay
        if handle is not None and not handle.cancelled() and handle.when() <= due:
            return
        if handle is not None:
            handle.cancel()
        self._timers[name] = loop.call_at(due, self._fire, name)

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        self._enqueue(name)

    async def _worker(self) -> None:
        while True:
            name = await self._queue.get()
            self._dirty.discard(name)
            self._processing.add(name)
            try:
                await self._reconcile(name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._log(f"{name}: {type(exc).__name__}: {exc}; retrying in 1s")
                self._enqueue_after(name, 1.0)
            finally:
                self._processing.discard(name)
                if name in self._dirty:
                    self._queue.put_nowait(name)

    async def _reconcile(self, name: str) -> None:
        node = self._nodes.get(name)
        if node is None:
            self._mig.pop(name, None)
            return
        pods = [self._pods[key] for key in self._pods_by_node.get(name, ()) if key in self._pods]
        plan = plan_node(
            node,
            pods,
            now=time.monotonic(),
            mig=self._mig.get(name),
            mig_reconfigure_seconds=self._mig_seconds,
        )
        # Resources first: whoever sees `mig.config.state=success` finds them in place.
        if plan.resources:
            body = {"status": {"capacity": plan.resources, "allocatable": plan.resources}}
            await self._patch(name, body, self._core.patch_node_status, plan.resources)
        if plan.labels or plan.annotations:
            meta: dict[str, Any] = {}
            if plan.labels:
                meta["labels"] = plan.labels
            if plan.annotations:
                meta["annotations"] = plan.annotations
            await self._patch(name, {"metadata": meta}, self._core.patch_node, plan.labels)
        # Remembered only once written: a failed write retries the same step.
        if plan.mig is None:
            self._mig.pop(name, None)
        else:
            self._mig[name] = plan.mig
        if plan.recheck_after is not None:
            self._enqueue_after(name, plan.recheck_after)

    async def _patch(
        self,
        name: str,
        body: dict[str, Any],
        call: Callable[..., Awaitable[Any]],
        shown: Mapping[str, str | None],
    ) -> None:
        response = await call(name, body, _content_type=_MERGE_PATCH, _preload_content=False)
        updated = node_info(await _json(response))
        self.writes += 1
        # Enqueued again: the answer may carry someone else's change made meanwhile, whose
        # (older) watch event the cache will then skip. The next plan is usually empty.
        self._store_node(updated)
        if shown:
            text = ", ".join(f"{k}={'-' if v is None else v}" for k, v in sorted(shown.items()))
            self._log(f"{name}: {text}")

    # informers: list, then watch from the list's resourceVersion; relist on any trouble.

    def _store_node(self, node: NodeInfo, *, enqueue: bool = True) -> None:
        old = self._nodes.get(node.name)
        if old is not None and old.resource_version > node.resource_version:
            return
        self._nodes[node.name] = node
        if enqueue and (
            old is None or replace(old, resource_version=0) != replace(node, resource_version=0)
        ):
            self._enqueue(node.name)

    def _forget_node(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._enqueue(name)

    def _store_pod(self, key: str, info: PodInfo | None) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            self._pods_by_node[old.node].discard(key)
            if not self._pods_by_node[old.node]:
                del self._pods_by_node[old.node]
        if info is not None:
            self._pods[key] = info
            self._pods_by_node[info.node].add(key)
        if old != info:
            for node in {p.node for p in (old, info) if p is not None}:
                self._enqueue(node)

    async def _follow_nodes(self) -> None:
        def relisted(items: list[dict[str, Any]]) -> None:
            fresh = {info.name: info for info in map(node_info, items)}
            for name in set(self._nodes) - set(fresh):
                self._forget_node(name)
            for info in fresh.values():
                self._store_node(info, enqueue=self._nodes_synced.is_set())
            self._nodes_synced.set()

        def changed(kind: str, obj: dict[str, Any]) -> None:
            if kind == "DELETED":
                self._forget_node(obj["metadata"]["name"])
            else:
                self._store_node(node_info(obj))

        await self._follow(self._core.list_node, relisted, changed)

    async def _follow_pods(self) -> None:
        def key(obj: Mapping[str, Any]) -> str:
            meta = obj.get("metadata") or {}
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

        def relisted(items: list[dict[str, Any]]) -> None:
            fresh = {key(item): pod_info(item) for item in items}
            for gone in set(self._pods) - {k for k, v in fresh.items() if v is not None}:
                self._store_pod(gone, None)
            for k, info in fresh.items():
                if info is not None:
                    self._store_pod(k, info)
            self._pods_synced.set()

        def changed(kind: str, obj: dict[str, Any]) -> None:
            self._store_pod(key(obj), None if kind == "DELETED" else pod_info(obj))

        await self._follow(self._core.list_pod_for_all_namespaces, relisted, changed)

    async def _follow(
        self,
        list_call: Callable[..., Awaitable[Any]],
        relisted: Callable[[list[dict[str, Any]]], None],
        changed: Callable[[str, dict[str, Any]], None],
    ) -> None:
        backoff = 0.5
        while True:
            try:
                items, version = await self._list(list_call)
                relisted(items)
                backoff = 0.5
                while version:
                    version = await self._watch(list_call, version, changed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._log(f"watch: {type(exc).__name__}: {exc}; relisting in {backoff:.1f}s")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _list(
        self, list_call: Callable[..., Awaitable[Any]]
    ) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": _LIST_PAGE, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            page = await _json(await list_call(**kwargs))
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, str(page["metadata"]["resourceVersion"])

    async def _watch(
        self,
        list_call: Callable[..., Awaitable[Any]],
        version: str,
        changed: Callable[[str, dict[str, Any]], None],
    ) -> str:
        """Follow one watch; returns the version to resume from ("" = relist)."""
        response = await list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=_WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(10.0, _WATCH_INACTIVITY),
        )
        try:
            if response.status == 410:
                return ""
            if response.status != 200:
                raise ApiError(
                    response.status, (await response.read())[:300].decode(errors="replace")
                )
            async for line in _lines(response.content):
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return ""  # 410 Gone or worse: start over from a fresh list
                new_version = (obj.get("metadata") or {}).get("resourceVersion")
                if kind != "BOOKMARK":
                    changed(kind, obj)
                if new_version:
                    version = new_version
        finally:
            response.release()
        return version


class ApiError(RuntimeError):
    """The apiserver answered a request with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status


async def _json(response: Any) -> dict[str, Any]:
    """The JSON body of a raw response; an error status raises `ApiError`."""
    try:
        body: bytes = await response.read()
    finally:
        response.release()
    if not 200 <= response.status < 300:
        raise ApiError(response.status, body[:300].decode(errors="replace"))
    result: dict[str, Any] = json.loads(body)
    return result


async def _lines(stream: Any) -> AsyncIterator[bytes]:
    """Newline-separated chunks of a response body, however long each line is."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


# -- as its own process --------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> None:
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(args.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = max(args.workers * 2, 16)
    async with client.ApiClient(configuration) as api:
        behaviour = GpuNodeBehaviour(
            api, mig_reconfigure_seconds=args.mig_reconfigure_seconds, workers=args.workers
        )
        task = asyncio.create_task(behaviour.run())
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        synced = asyncio.create_task(behaviour.synced.wait())
        await asyncio.wait({task, synced}, return_when=asyncio.FIRST_COMPLETED)
        if behaviour.synced.is_set():
            print("gpu node behaviour: watching nodes and operand pods", flush=True)
            if args.ready_file:
                await asyncio.to_thread(Path(args.ready_file).write_text, "ready\n")
        with contextlib.suppress(asyncio.CancelledError):
            await task


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpusim.gpu_node_behaviour",
        description="Simulate NVIDIA node software on kwok nodes (device plugin, GFD, MIG).",
    )
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--mig-reconfigure-seconds", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ready-file", type=Path, help="written once the first sync is done")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
