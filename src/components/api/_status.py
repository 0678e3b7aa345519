"""Status of ClusterPolicy and NVIDIADriver.

The reference's fields (`state`, `namespace`, `conditions` of types `Ready` and `Error`)
keep their names and meaning. Beyond them, `components` says which operand is not ready
on which nodes, and `upgrade` summarises the driver upgrade node by node, so a stuck node
is one `kubectl get -o yaml` away instead of a hunt.

Write a status with `status.to_dict(defaults=True)` (every field, camelCase), e.g. as the
body of a status-subresource patch: `{"status": status.to_dict(defaults=True)}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field

from components.api._base import CRD_REQUIRED, ApiModel, Format, ListMap
from components.api._common import Int64

#: Lists of node names in status stop here; the counts stay exact.
MAX_LISTED_NODES = 50

ConditionStatus = Literal["True", "False", "Unknown"]
PolicyState = Literal["ready", "notReady", "ignored"]
DriverState = Literal["ready", "notReady", "ignored", "disabled"]
ComponentState = Literal["ready", "notReady", "disabled"]
DateTime = Annotated[str, Format("date-time")]


class ConditionType(StrEnum):
    """The condition types the reference writes."""

    READY = "Ready"
    ERROR = "Error"


class Reason(StrEnum):
    """Condition reasons (the reference's, so alerts and dashboards keep matching)."""

    RECONCILED = "Reconciled"
    RECONCILE_FAILED = "ReconcileFailed"
    READY = "Ready"
    ERROR = "Error"
    NFD_LABELS_MISSING = "NFDLabelsMissing"
    NO_GPU_NODES = "NoGPUNodes"
    OPERAND_NOT_READY = "OperandNotReady"
    OPERATOR_METRICS_NOT_READY = "OperatorMetricsNotReady"
    DRIVER_NOT_READY = "DriverNotReady"
    CONTAINER_TOOLKIT_NOT_READY = "ContainerToolkitNotReady"
    DEVICE_PLUGIN_NOT_READY = "DevicePluginNotReady"
    GPU_FEATURE_DISCOVERY_NOT_READY = "GPUFeatureDiscoveryNotReady"
    MIG_MANAGER_NOT_READY = "MIGManagerNotReady"
    OPERATOR_VALIDATOR_NOT_READY = "OperatorValidatorNotReady"
    DCGM_NOT_READY = "DCGMNotReady"
    DCGM_EXPORTER_NOT_READY = "DCGMExporterNotReady"
    NODE_STATUS_EXPORTER_NOT_READY = "NodeStatusExporterNotReady"


class UpgradeState(StrEnum):
    """Values of the node label `nvidia.com/gpu-driver-upgrade-state`."""

    UNKNOWN = ""
    UPGRADE_REQUIRED = "upgrade-required"
    CORDON_REQUIRED = "cordon-required"
    WAIT_FOR_JOBS_REQUIRED = "wait-for-jobs-required"
    POD_DELETION_REQUIRED = "pod-deletion-required"
    DRAIN_REQUIRED = "drain-required"
    POD_RESTART_REQUIRED = "pod-restart-required"
    VALIDATION_REQUIRED = "validation-required"
    UNCORDON_REQUIRED = "uncordon-required"
    UPGRADE_DONE = "upgrade-done"
    UPGRADE_FAILED = "upgrade-failed"


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


class Condition(ApiModel):
    """A `metav1.Condition`."""

    type: str = Field(
        max_length=316,
        pattern=(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
    )
    status: ConditionStatus
    observed_generation: Int64 | None = Field(default=None, ge=0)
    last_transition_time: DateTime
    reason: str = Field(
        min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    )
    message: str = Field(default="", max_length=32768, json_schema_extra=CRD_REQUIRED)


class ComponentStatus(ApiModel):
    """One operand (state name, e.g. `state-driver`) and the nodes where it is not ready."""

    name: str
    state: ComponentState
    message: str = ""
    nodes_desired: int = Field(default=0, ge=0, description="Nodes that should run it.")
    nodes_ready: int = Field(default=0, ge=0, description="Nodes where it is ready.")
    not_ready_nodes: list[str] = Field(
        default_factory=list,
        max_length=MAX_LISTED_NODES,
        description=f"Nodes where it is not ready (sorted, the first {MAX_LISTED_NODES}).",
    )

    @classmethod
    def build(
        cls,
        name: str,
        state: ComponentState,
        *,
        nodes_desired: int = 0,
        nodes_ready: int = 0,
        not_ready_nodes: Iterable[str] = (),
        message: str = "",
    ) -> Self:
        """A component status with the node list sorted and cut to `MAX_LISTED_NODES`."""
        return cls(
            name=name,
            state=state,
            message=message,
            nodes_desired=nodes_desired,
            nodes_ready=nodes_ready,
            not_ready_nodes=sorted(not_ready_nodes)[:MAX_LISTED_NODES],
        )


class NodeUpgradeStatus(ApiModel):
    """Where one node is in the driver upgrade."""

    name: str
    state: str = Field(description="The node's nvidia.com/gpu-driver-upgrade-state.")
    message: str = ""
    since: DateTime | None = Field(default=None, description="When the node entered the state.")


class UpgradeStatus(ApiModel):
    """The driver upgrade, summed up and node by node (nodes not done yet, first ones)."""

    auto_upgrade: bool = False
    managed: int = Field(default=0, ge=0, description="Nodes whose driver the upgrade manages.")
    pending: int = Field(default=0, ge=0, description="Nodes in upgrade-required.")
    in_progress: int = Field(default=0, ge=0, description="Nodes between cordon and uncordon.")
    done: int = Field(default=0, ge=0, description="Nodes in upgrade-done.")
    failed: int = Field(default=0, ge=0, description="Nodes in upgrade-failed.")
    available: int = Field(default=0, ge=0, description="Upgrades that may start now.")
    nodes: Annotated[list[NodeUpgradeStatus], ListMap("name")] = Field(
        default_factory=list,
        max_length=MAX_LISTED_NODES,
        description="Nodes not in upgrade-done: failed first, then by name.",
    )
    nodes_omitted: int = Field(default=0, ge=0, description="Nodes left out of `nodes`.")
    conditions: Annotated[list[Condition], ListMap("type")] = Field(
        default_factory=list,
        description=(
            "Ours: UpgradeHalted (with upgradePolicy.failureBudget): True while more nodes "
            "have failed than the budget allows, naming the version and each failing node. "
            "UpgradeWaitingForWindow (with upgradePolicy.maintenanceWindows): True while "
            "nodes wait outside every window, saying when the next one opens."
        ),
    )

    @classmethod
    def build(
        cls,
        nodes: Iterable[NodeUpgradeStatus],
        *,
        auto_upgrade: bool,
        available: int = 0,
        conditions: Iterable[Condition] = (),
    ) -> Self:
        """Counts from every managed node; lists the ones not done (failed first)."""
        every = list(nodes)
        states = [n.state for n in every]
        done = states.count(UpgradeState.UPGRADE_DONE)
        pending = states.count(UpgradeState.UPGRADE_REQUIRED)
        failed = states.count(UpgradeState.UPGRADE_FAILED)
        unknown = states.count(UpgradeState.UNKNOWN)
        open_ = sorted(
            (n for n in every if n.state != UpgradeState.UPGRADE_DONE),
            key=lambda n: (n.state != UpgradeState.UPGRADE_FAILED, n.name),
        )
        return cls(
            auto_upgrade=auto_upgrade,
            managed=len(every),
            pending=pending,
            in_progress=len(every) - (unknown + done + pending),
            done=done,
            failed=failed,
            available=available,
            nodes=open_[:MAX_LISTED_NODES],
            nodes_omitted=max(0, len(open_) - MAX_LISTED_NODES),
            conditions=list(conditions),
        )


class NodeConditionSummary(ApiModel):
    """How many GPU nodes report one of the node agent's conditions with each status."""

    type: str = Field(description="GPUDriverReady, GPUHealthy or GPUValidated.")
    true: int = Field(default=0, ge=0)
    false: int = Field(default=0, ge=0)
    unknown: int = Field(default=0, ge=0)
    not_true: list[str] = Field(
        default_factory=list,
        max_length=MAX_LISTED_NODES,
        description="Nodes where it is not True, by name, each with its reason.",
    )


class NodeAgentStatus(ApiModel):
    """What the node agents report, summed up over the GPU nodes (`nodeAgent.enabled`)."""

    nodes: int = Field(default=0, ge=0, description="GPU nodes whose agent has reported.")
    conditions: Annotated[list[NodeConditionSummary], ListMap("type")] = Field(default_factory=list)
    host_driver_nodes: list[str] = Field(
        default_factory=list,
        max_length=MAX_LISTED_NODES,
        description="Nodes served by a driver installed on the host (no driver pod there).",
    )
    host_driver_nodes_omitted: int = Field(default=0, ge=0)


class RemediationNodeStatus(ApiModel):
    """A node whose GPU remediation is under way or failed (ours: `remediation.enabled`)."""

    node: str
    step: str = Field(description="taint, drain, reset, validate, or failed.")
    gpu: str = Field(default="", description="The sick GPU's index.")
    reason: str = Field(default="", description="What the node agent reported.")
    since: str = Field(default="", description="When the step began (RFC 3339).")


class _StatusCore(ApiModel):
    """What every kind's status shares: namespace, the generation it speaks of, conditions."""

    namespace: str = Field(default="", description="Namespace the operator runs in.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation this status is about."
    )
    conditions: Annotated[list[Condition], ListMap("type")] = Field(default_factory=list)

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if any."""
        return next((c for c in self.conditions if c.type == type_), None)

    def set_condition(
        self,
        type_: str,
        status: bool | ConditionStatus,
        reason: str,
        message: str = "",
        *,
        now: str | None = None,
    ) -> bool:
        """Set a condition as `meta.SetStatusCondition` does: `lastTransitionTime` moves only
        when the status changes. Returns whether anything changed."""
        value: ConditionStatus = (
            ("True" if status else "False") if isinstance(status, bool) else status
        )
        old = self.condition(type_)
        if (
            old is not None
            and old.status == value
            and old.reason == reason
            and old.message == message
            and old.observed_generation == self.observed_generation
        ):
            return False
        new = Condition(
            type=type_,
            status=value,
            reason=reason,
            message=message,
            observed_generation=self.observed_generation,
            last_transition_time=(
                old.last_transition_time
                if old is not None and old.status == value
                else (now or _now())
            ),
        )
        self.conditions = [new if c.type == type_ else c for c in self.conditions]
        if old is None:
            self.conditions.append(new)
        return True

    def mark_ready(
        self, reason: str = Reason.RECONCILED, message: str = "", *, now: str | None = None
    ) -> None:
        """Ready=True (with `reason`), Error=False."""
        self.set_condition(ConditionType.READY, True, reason, message, now=now)
        self.set_condition(ConditionType.ERROR, False, Reason.READY, now=now)

    def mark_not_ready(self, reason: str, message: str = "", *, now: str | None = None) -> None:
        """Ready=False (with `reason`), Error=False: progressing, nothing wrong yet."""
        self.set_condition(ConditionType.READY, False, reason, message, now=now)
        self.set_condition(ConditionType.ERROR, False, Reason.READY, now=now)

    def mark_error(self, reason: str, message: str = "", *, now: str | None = None) -> None:
        """Ready=False and Error=True, both with `reason` and `message`: something is wrong
        that the user must fix (the controllers' status for a problem found)."""
        self.set_condition(ConditionType.READY, False, reason, message, now=now)
        self.set_condition(ConditionType.ERROR, True, reason, message, now=now)


class _Status(_StatusCore):
    """What the policies' status adds (ClusterPolicy, NVIDIADriver): each operand and the
    driver upgrade."""

    components: Annotated[list[ComponentStatus], ListMap("name")] = Field(
        default_factory=list, description="Each operand's state and the nodes it is not ready on."
    )
    upgrade: UpgradeStatus | None = Field(default=None, description="The driver upgrade.")


class ClusterPolicyStatus(_Status):
    """Observed state of a ClusterPolicy."""

    state: PolicyState = Field(
        description="ready, notReady, or ignored (another, older ClusterPolicy is active)."
    )
    node_agent: NodeAgentStatus | None = Field(
        default=None, description="The node agents' conditions, counted over the GPU nodes."
    )
    remediation: list[RemediationNodeStatus] | None = Field(
        default=None,
        max_length=MAX_LISTED_NODES,
        description="Nodes in GPU remediation, by name, with their step and reason (ours).",
    )


class NVIDIADriverStatus(_Status):
    """Observed state of an NVIDIADriver."""

    state: DriverState = Field(description="ready, notReady, ignored, or disabled.")
