"""Pod views: what the upgrade reads of a cached pod, and the shared pod informer's trim.

Pure functions of the cached JSON, like the node views (`_model`): the planner sees only
these frozen views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.api import (
    DRIVER_CONFIG_DIGEST_ANNOTATION,
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
)
from components.upgrade._model import DRIVER_CONTAINER
from components.upgrade._names import (
    DRIVER_KERNEL_ANNOTATION,
    DRIVER_POD_LABELS,
    GPU_RESOURCE_PREFIXES,
    MIRROR_ANNOTATION,
    REVISION_LABEL,
    VALIDATOR_APP,
)
from components.upgrade._times import parse_time
from reconciler import (
    Object,
    annotations_of,
    creation_timestamp_of,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    owner_references_of,
    resource_version_of,
    uid_of,
)

_FAILING_RESTARTS = 10
"""A driver container restarted more often than this and not ready is failing (the
reference's threshold)."""


# -- pods --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodView:
    """A pod, trimmed to what clearing a node and judging a driver need."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    """The version seen: a delete made from it is refused once the pod has changed, so a
    second reconcile from a cache still behind our first delete does not delete again."""
    node: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Running"
    terminating: bool = False
    created: float = 0.0
    ready: bool = False
    gpu: bool = False
    owner_kind: str = ""
    owner_name: str = ""
    owner_uid: str = ""
    mirror: bool = False
    local_storage: bool = False
    volumes_known: bool = True
    """False when the cache trimmed `spec.volumes`: `local_storage` must be read live."""
    failing: bool = False
    revision: str = ""
    kernel: str | None = None
    """The kernel a driver pod serves: recorded on it, the kernel its DaemonSet selects, or
    the kernel its node had before its kernel label changed under it (`_kernels`)."""
    kernel_recorded: bool = False
    kernel_learnt: bool = False
    """`kernel` comes from the node's kernel change and is not yet recorded on the pod."""
    pinned: bool = False
    """A precompiled driver pod: its DaemonSet selects on the node's kernel pin, so only
    moving the pin (not deleting the pod) gets the node another kernel's driver."""
    holds_unrequested: bool = False
    """Requests no GPU, yet the node agent lists a GPU process of it (`_holders`): `gpu`
    is set for it, so clearing takes it like a GPU pod."""
    config_digest: str | None = None
    """The `DRIVER_CONFIG_DIGEST` a driver pod was installed with (from its annotation
    twin; None when it has none: a pod of an older operator or of the reference's)."""
    image: str | None = None
    """A driver pod's driver image (its `nvidia-driver-ctr` container's): what
    the walk records as the node's last good driver (`components.api.LAST_GOOD_IMAGE`)."""

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        """Not finished: a Succeeded or Failed pod holds no GPU and blocks nothing."""
        return self.phase not in ("Succeeded", "Failed")

    @property
    def daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def managed(self) -> bool:
        """Has a controller that recreates it elsewhere (drain's notion)."""
        return bool(self.owner_kind)


def _uses_gpu(spec: Mapping[str, Any]) -> bool:
    return any(
        _requests_gpu(container)
        for key in ("containers", "initContainers")
        for container in spec.get(key) or []
    )


def _requests_gpu(container: Mapping[str, Any]) -> bool:
    resources = container.get("resources") or {}
    return any(
        str(name).startswith(GPU_RESOURCE_PREFIXES)
        for part in ("limits", "requests")
        for name in resources.get(part) or {}
    )


def pod_as_read(pod: Object) -> Object:
    """The shared pod informer's transform: a pod cut down to what the operator reads of
    it, on top of the informer's drop list. Of the conditions, `Ready` alone (the other
    four the kubelet reports are never read); of the containers, those that ask for a GPU,
    with their name and resources (`_uses_gpu` is all that reads them; every operand pod
    asks for none). About 1.7 KB less per cached pod, 40,000 operand pods at 5,000 nodes
    (bench/cache_memory.py). Runs on each freshly decoded pod; every user of the informer
    passes it."""
    status = pod.get("status")
    if isinstance(status, dict):
        conditions = status.get("conditions")
        if conditions:
            status["conditions"] = [c for c in conditions if c.get("type") == "Ready"]
    spec = pod.get("spec")
    if isinstance(spec, dict):
        # A driver pod keeps its driver container's image (a rollback needs the last good).
        driver = is_driver_pod(labels_of(pod))
        for key in ("containers", "initContainers"):
            containers = spec.get(key)
            if containers is None:
                continue
            gpu = [
                {"name": c.get("name"), "resources": c.get("resources")}
                if _requests_gpu(c)
                else {"name": DRIVER_CONTAINER, "image": c.get("image")}
                for c in containers
                if _requests_gpu(c) or (driver and c.get("name") == DRIVER_CONTAINER)
            ]
            if gpu:
                spec[key] = gpu
            else:
                del spec[key]
    return pod


def _ready(status: Mapping[str, Any]) -> bool:
    """Running, with at least one container, every container ready (the reference's test)."""
    if status.get("phase") != "Running":
        return False
    statuses = status.get("containerStatuses") or []
    if statuses:
        return all(bool(s.get("ready")) for s in statuses)
    # Without container statuses (kwok reports none for some stages) the Ready condition says.
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _failing(status: Mapping[str, Any]) -> bool:
    for key in ("initContainerStatuses", "containerStatuses"):
        for s in status.get(key) or []:
            if not s.get("ready") and int(s.get("restartCount") or 0) > _FAILING_RESTARTS:
                return True
    return False


def pod_view(obj: Object) -> PodView:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owner = next((r for r in owner_references_of(obj) if r.get("controller")), None)
    annotations = annotations_of(obj)
    labels = labels_of(obj)
    deleting = is_deleting(obj)
    selector = spec.get("nodeSelector") or {}
    pin = selector.get(DRIVER_KERNEL_PIN_LABEL)
    kernel = annotations.get(DRIVER_KERNEL_ANNOTATION)
    recorded = kernel is not None
    if kernel is None:
        kernel = pin if pin is not None else selector.get(KERNEL_LABEL)
    return PodView(
        namespace=namespace_of(obj),
        name=name_of(obj),
        uid=uid_of(obj),
        resource_version=resource_version_of(obj),
        node=str(spec.get("nodeName") or ""),
        labels=labels,
        phase=str(status.get("phase") or "Pending"),
        terminating=deleting,
        created=parse_time(creation_timestamp_of(obj)) or 0.0,
        ready=_ready(status) and not deleting,
        gpu=_uses_gpu(spec),
        owner_kind=str(owner.get("kind") or "") if owner else "",
        owner_name=str(owner.get("name") or "") if owner else "",
        owner_uid=str(owner.get("uid") or "") if owner else "",
        mirror=MIRROR_ANNOTATION in annotations,
        local_storage=any("emptyDir" in v for v in spec.get("volumes") or []),
        volumes_known="volumes" in spec,
        failing=_failing(status),
        revision=str(labels.get(REVISION_LABEL) or ""),
        kernel=str(kernel) if kernel is not None else None,
        kernel_recorded=recorded,
        pinned=pin is not None,
        config_digest=annotations.get(DRIVER_CONFIG_DIGEST_ANNOTATION) or None,
        image=_driver_image(spec) if is_driver_pod(labels) else None,
    )


def _driver_image(spec: Mapping[str, Any]) -> str | None:
    containers = spec.get("containers") or []
    chosen = next((c for c in containers if c.get("name") == DRIVER_CONTAINER), None)
    image = (chosen or {}).get("image")
    return str(image) if image else None


def is_driver_pod(labels: Mapping[str, str]) -> bool:
    return any(labels.get(k) == v for k, v in DRIVER_POD_LABELS)


def is_validator_pod(labels: Mapping[str, str]) -> bool:
    return labels.get("app") == VALIDATOR_APP


def pick_driver_pod(pods: Iterable[PodView]) -> PodView | None:
    """The driver pod that speaks for a node: a live one before a terminating one, then the
    newest (a kernel change can leave the old kernel's pod terminating beside the new)."""
    candidates = [p for p in pods if p.daemonset]
    if not candidates:
        return None
    return max(candidates, key=lambda p: (not p.terminating, p.created, p.name))
