"""Views: what the upgrade reads from cached Nodes, DaemonSets and PDBs (pods: `_pods`).

Everything here is a pure function of the cached JSON. The planner only ever sees these
small frozen views, so it can be tested (and property-tested) without a cluster, and the
controller can rebuild them from the cache at any moment: after a restart there is nothing
to remember, because nothing lives anywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.api import (
    DRIVER_CONFIG_DIGEST_ENV,
    DRIVER_KERNEL_PIN_LABEL,
    DRIVER_TAKEOVER_LABEL,
    GPU_PROCESSES_ANNOTATION,
    GPU_VALIDATED,
    KERNEL_LABEL,
    LAST_GOOD_IMAGE,
    UpgradeState,
)
from components.upgrade._names import (
    CLIENT_DEPLOY_LABELS,
    CORDONED_AT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    FAILED_STATE,
    GPU_RESOURCE_PREFIXES,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    NODE_ANNOTATIONS,
    RESTART_ONLY,
    REVISION_LABEL,
    SKIP_LABEL,
    STATE_LABEL,
    STATE_SINCE,
    UPGRADE_REQUESTED,
    VALIDATOR_DEPLOY_LABEL,
    parse_state,
)
from components.upgrade._times import parse_time
from reconciler import (
    Object,
    annotations_of,
    labels_of,
    name_of,
    namespace_of,
    resource_version_of,
    uid_of,
)

# -- nodes -------------------------------------------------------------------------------

VIEWED_ANNOTATIONS = (*NODE_ANNOTATIONS, LAST_GOOD_IMAGE)
"""The node annotations a view keeps: the walk's, and its record of the last good driver
(which outlives a walk: `components.api.LAST_GOOD_IMAGE`)."""


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
    ready_since: float = 0.0
    """When the Ready condition last changed (0: unknown): a canary's soak counts from it."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """All the node's labels (a canary selector matches them)."""
    processes: str = ""
    """The node agent's list of GPU compute processes as it is (`GPU_PROCESSES_ANNOTATION`;
    read only where a wait names what holds the GPU: `_holders`)."""

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
    def restart_only(self) -> bool:
        """The walk restarts this node's driver in place (`RESTART_ONLY`)."""
        return self.annotations.get(RESTART_ONLY) == "true"

    @property
    def message(self) -> str:
        return self.annotations.get(MESSAGE, "")

    @property
    def clients(self) -> dict[str, str | None]:
        """The deploy labels of the operands a driver restart pauses, as they are."""
        return dict(zip(CLIENT_DEPLOY_LABELS, (self.device_plugin, self.validator), strict=True))

    @property
    def clients_paused(self) -> bool:
        """Whether any of them carries the walk's pause."""
        return DEVICE_PLUGIN_PAUSED in (self.device_plugin, self.validator)

    @property
    def unavailable(self) -> bool:
        """Cordoned or NotReady: what maxUnavailable counts."""
        return self.unschedulable or not self.ready


def _ready_since(status: Mapping[str, Any]) -> float:
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            return parse_time(c.get("lastTransitionTime")) or 0.0
    return 0.0


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
        name=name_of(obj),
        uid=uid_of(obj),
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
        annotations={k: all_annotations[k] for k in VIEWED_ANNOTATIONS if k in all_annotations},
        has_labels=bool(labels),
        has_annotations=bool(all_annotations),
        resource_version=resource_version_of(obj),
        validated=agent_verdict(obj.get("status") or {}),
        ready_since=_ready_since(obj.get("status") or {}),
        labels=labels,
        processes=all_annotations.get(GPU_PROCESSES_ANNOTATION, ""),
    )


# -- PodDisruptionBudgets ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdbView:
    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    disruptions_allowed: int


def pdb_view(obj: Object) -> PdbView:
    return PdbView(
        namespace=namespace_of(obj),
        name=name_of(obj),
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
    name = name_of(newest)
    prefix = f"{ds_name}-"
    return name[len(prefix) :] if name.startswith(prefix) else name


def template_digest(ds: Object | None) -> str | None:
    """The `DRIVER_CONFIG_DIGEST` env of a driver DaemonSet's template (None when it has
    none: a DaemonSet of an older operator, say)."""
    return spec_digest((((ds or {}).get("spec") or {}).get("template") or {}).get("spec") or {})


DRIVER_CONTAINER = "nvidia-driver-ctr"


def template_image(ds: Object | None) -> str | None:
    """The driver image a driver DaemonSet's template runs (its driver container's, or its
    first container's where none has that name): what a rollback's nodes were walked to."""
    spec = (((ds or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    chosen = next((c for c in containers if c.get("name") == DRIVER_CONTAINER), None)
    if chosen is None and containers:
        chosen = containers[0]
    image = (chosen or {}).get("image")
    return str(image) if image else None


def spec_digest(spec: Mapping[str, Any]) -> str | None:
    """The `DRIVER_CONFIG_DIGEST` env of the first container of a pod spec carrying it."""
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for item in container.get("env") or []:
            if item.get("name") == DRIVER_CONFIG_DIGEST_ENV and item.get("value"):
                return str(item["value"])
    return None
