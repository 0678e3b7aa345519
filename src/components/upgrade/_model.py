"""Views: what the upgrade reads from cached Nodes, Pods, DaemonSets and PDBs.

Everything here is a pure function of the cached JSON. The planner only ever sees these
small frozen views, so it can be tested (and property-tested) without a cluster, and the
controller can rebuild them from the cache at any moment: after a restart there is nothing
to remember, because nothing lives anywhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    DRIVER_TAKEOVER_LABEL,
    GPU_VALIDATED,
    KERNEL_LABEL,
    UpgradeState,
)
from components.upgrade._names import (
    CORDONED_AT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    DRIVER_KERNEL_ANNOTATION,
    DRIVER_POD_LABELS,
    FAILED_STATE,
    GPU_RESOURCE_PREFIXES,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    MIRROR_ANNOTATION,
    NODE_ANNOTATIONS,
    REVISION_LABEL,
    SKIP_LABEL,
    STATE_LABEL,
    STATE_SINCE,
    UPGRADE_REQUESTED,
    VALIDATOR_APP,
    VALIDATOR_DEPLOY_LABEL,
    parse_state,
)
from reconciler import Object, annotations_of, labels_of

_FAILING_RESTARTS = 10
"""A driver container restarted more often than this and not ready is failing (the
reference's threshold)."""


def parse_time(value: Any) -> float | None:
    """RFC 3339 (`2026-11-30T16:20:01Z`, fractions allowed) or Unix seconds -> Unix seconds."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.isdigit():
        return float(text)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_time_ms(seconds: float) -> str:
    """RFC 3339 with milliseconds, for waits shorter than a second's rounding."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


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
    """The kernel a driver pod serves: recorded on it, or the kernel its DaemonSet selects."""
    kernel_recorded: bool = False
    pinned: bool = False
    """A precompiled driver pod: its DaemonSet selects on the node's kernel pin, so only
    moving the pin (not deleting the pod) gets the node another kernel's driver."""

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
        for key in ("containers", "initContainers"):
            containers = spec.get(key)
            if containers is None:
                continue
            gpu = [
                {"name": c.get("name"), "resources": c.get("resources")}
                for c in containers
                if _requests_gpu(c)
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
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owner = next(
        (r for r in meta.get("ownerReferences") or [] if r.get("controller")),
        None,
    )
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    selector = spec.get("nodeSelector") or {}
    pin = selector.get(DRIVER_KERNEL_PIN_LABEL)
    kernel = annotations.get(DRIVER_KERNEL_ANNOTATION)
    recorded = kernel is not None
    if kernel is None:
        kernel = pin if pin is not None else selector.get(KERNEL_LABEL)
    return PodView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        node=str(spec.get("nodeName") or ""),
        labels=labels,
        phase=str(status.get("phase") or "Pending"),
        terminating=bool(meta.get("deletionTimestamp")),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        ready=_ready(status) and not meta.get("deletionTimestamp"),
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
    )


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


# -- nodes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentVerdict:
    """The node agent's `GPUValidated` condition: its answer and since when it holds."""

    status: str
    reason: str = ""
    message: str = ""
    since: float = 0.0

    def passed_after(self, moment: float) -> bool:
        """True, and it turned True at or after `moment` (a driver pod's creation): the
        agent lets go of the GPU while the walk restarts the driver, so an answer given
        since is about the new driver."""
        return self.status == "True" and self.since >= moment


def agent_verdict(status: Mapping[str, Any]) -> AgentVerdict | None:
    for c in status.get("conditions") or []:
        if c.get("type") == GPU_VALIDATED:
            return AgentVerdict(
                status=str(c.get("status") or ""),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
                since=parse_time(c.get("lastTransitionTime")) or 0.0,
            )
    return None


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node, trimmed to what the upgrade reads."""

    name: str
    uid: str = ""
    state: UpgradeState = UpgradeState.UNKNOWN
    state_label: str | None = None
    """The label's value as it is (None when absent): what a compare-and-set tests."""
    unschedulable: bool = False
    ready: bool = True
    skip: bool = False
    kernel: str | None = None
    pinned_kernel: str | None = None
    """`DRIVER_KERNEL_PIN_LABEL`: the kernel whose precompiled driver the node gets."""
    taken_over: bool = False
    """`DRIVER_TAKEOVER_LABEL`: the node waits for the walk to hand it to our driver."""
    device_plugin: str | None = None
    """`DEVICE_PLUGIN_DEPLOY_LABEL` as it is (None when absent)."""
    validator: str | None = None
    """`VALIDATOR_DEPLOY_LABEL` as it is (None when absent)."""
    gpus_advertised: bool = False
    """Whether the node's allocatable offers any GPU resource (the device plugin's)."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    """Only the upgrade's own annotations."""
    has_labels: bool = True
    has_annotations: bool = False
    """Whether `metadata.labels`/`annotations` exist (a JSON patch must create them first)."""
    resource_version: str = ""
    validated: AgentVerdict | None = None
    """The node agent's GPUValidated condition (None: no agent has answered)."""

    @property
    def initially_unschedulable(self) -> bool:
        return INITIALLY_UNSCHEDULABLE in self.annotations

    @property
    def since(self) -> float | None:
        return parse_time(self.annotations.get(STATE_SINCE))

    @property
    def cordoned_at(self) -> float | None:
        return parse_time(self.annotations.get(CORDONED_AT))

    @property
    def failed_state(self) -> UpgradeState:
        return parse_state(self.annotations.get(FAILED_STATE))

    @property
    def upgrade_requested(self) -> bool:
        return self.annotations.get(UPGRADE_REQUESTED) == "true"

    @property
    def message(self) -> str:
        return self.annotations.get(MESSAGE, "")

    @property
    def clients(self) -> dict[str, str | None]:
        """The deploy labels of the operands a driver restart pauses, as they are."""
        return {
            DEVICE_PLUGIN_DEPLOY_LABEL: self.device_plugin,
            VALIDATOR_DEPLOY_LABEL: self.validator,
        }

    @property
    def clients_paused(self) -> bool:
        """Whether any of them carries the walk's pause."""
        return DEVICE_PLUGIN_PAUSED in (self.device_plugin, self.validator)

    @property
    def unavailable(self) -> bool:
        """Cordoned or NotReady: what maxUnavailable counts."""
        return self.unschedulable or not self.ready


def _node_ready(status: Mapping[str, Any]) -> bool:
    """The reference's test: a Ready condition that is not True makes a node not ready."""
    return all(
        c.get("status") == "True"
        for c in status.get("conditions") or []
        if c.get("type") == "Ready"
    )


def gpus_advertised(obj: Object) -> bool:
    """Whether `status.allocatable` offers a GPU resource: a quantity other than zero."""
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    return any(
        str(k).startswith(GPU_RESOURCE_PREFIXES) and str(v).strip() not in ("", "0")
        for k, v in allocatable.items()
    )


def node_view(obj: Object) -> NodeView:
    labels = labels_of(obj)
    all_annotations = annotations_of(obj)
    raw = labels.get(STATE_LABEL)
    return NodeView(
        name=str((obj.get("metadata") or {}).get("name") or ""),
        uid=str((obj.get("metadata") or {}).get("uid") or ""),
        state=parse_state(raw),
        state_label=raw,
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        ready=_node_ready(obj.get("status") or {}),
        skip=labels.get(SKIP_LABEL) == "true",
        kernel=labels.get(KERNEL_LABEL),
        pinned_kernel=labels.get(DRIVER_KERNEL_PIN_LABEL),
        taken_over=DRIVER_TAKEOVER_LABEL in labels,
        device_plugin=labels.get(DEVICE_PLUGIN_DEPLOY_LABEL),
        validator=labels.get(VALIDATOR_DEPLOY_LABEL),
        gpus_advertised=gpus_advertised(obj),
        annotations={k: all_annotations[k] for k in NODE_ANNOTATIONS if k in all_annotations},
        has_labels=bool(labels),
        has_annotations=bool(all_annotations),
        resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
        validated=agent_verdict(obj.get("status") or {}),
    )


# -- PodDisruptionBudgets ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdbView:
    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    disruptions_allowed: int


def pdb_view(obj: Object) -> PdbView:
    meta = obj.get("metadata") or {}
    return PdbView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        selector=(obj.get("spec") or {}).get("selector"),
        disruptions_allowed=int((obj.get("status") or {}).get("disruptionsAllowed") or 0),
    )


# -- a driver DaemonSet's newest revision ------------------------------------------------


def newest_revision(ds_name: str, revisions: Sequence[Object]) -> str | None:
    """The hash of a DaemonSet's newest ControllerRevision (highest `revision`)."""
    if not revisions:
        return None
    newest = max(revisions, key=lambda r: int(r.get("revision") or 0))
    labels = labels_of(newest)
    if labels.get(REVISION_LABEL):
        return str(labels[REVISION_LABEL])
    name = str((newest.get("metadata") or {}).get("name") or "")
    prefix = f"{ds_name}-"
    return name[len(prefix) :] if name.startswith(prefix) else name
