"""The ClusterPolicy's status, computed from what the reconcile found: pure functions.

State and the `Ready` condition follow one order of precedence, so a person reading
`kubectl get clusterpolicy` sees the most useful reason first:

1. the policy asks for something that cannot be done (a renderer's condition): `notReady`,
   `Error=True` with that reason;
2. no node carries NFD labels (`NFDLabelsMissing`): GPU nodes cannot be found;
3. operands not ready (`OperandNotReady`), naming the operands and their nodes;
4. no GPU node (`NoGPUNodes`): `ready`, as in the reference, watching for nodes to join;
5. otherwise `ready` (`Reconciled`).

Only the fields this controller owns are compared and written (state, namespace,
observedGeneration, conditions, components); `upgrade` belongs to the upgrade controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from components.api import (
    GPU_DRIVER_READY,
    HOST_DRIVER_REASON,
    MAX_LISTED_NODES,
    NODE_AGENT_CONDITIONS,
    UNSUPPORTED_CONDITION,
    UNSUPPORTED_REASON,
    ClusterPolicy,
    ClusterPolicyStatus,
    ComponentState,
    ComponentStatus,
    ConditionType,
    GPUClusterStatus,
    NodeAgentStatus,
    NodeConditionSummary,
    NVIDIADriverStatus,
    Reason,
    RemediationNodeStatus,
    names_and_more,
    unsupported_message,
)
from components.controllers._mig_change import BLOCKED_REASON, policy_message
from reconciler import Object, generation_of, name_of

EVICTION_BLOCKED = "EvictionBlocked"
"""The `MIGChangeBlocked` condition's reason."""

IGNORED_REASON = "Ignored"
_MAX_NAMED = 5


@dataclass(frozen=True)
class OperandReadiness:
    """One operand as the reconcile found it."""

    name: str
    enabled: bool
    ready: bool = True
    nodes_desired: int = 0
    nodes_ready: int = 0
    not_ready_nodes: Sequence[str] = field(default_factory=tuple)
    message: str = ""

    def component(self) -> ComponentStatus:
        state: ComponentState = (
            "disabled" if not self.enabled else ("ready" if self.ready else "notReady")
        )
        return ComponentStatus.build(
            self.name,
            state,
            nodes_desired=self.nodes_desired,
            nodes_ready=self.nodes_ready,
            not_ready_nodes=self.not_ready_nodes,
            message=self.message,
        )


@dataclass(frozen=True)
class Findings:
    """Everything the status depends on."""

    namespace: str
    generation: int
    operands: Sequence[OperandReadiness] = ()
    problems: Sequence[tuple[str, str]] = ()
    """Renderers' conditions: (reason, message)."""
    has_nfd_labels: bool = True
    gpu_nodes: int = 0
    unsupported: Sequence[str] = ()
    """Fields set that nothing acts on yet (`spec.gds.enabled=true`)."""
    node_agent: NodeAgentStatus | None = None
    """The node agents' conditions summed up (`node_agent_summary`), with the agent on."""
    remediation: list[RemediationNodeStatus] | None = None
    """Nodes in GPU remediation (`components.remediation.remediation_status`), when on."""
    mig_blocked: Mapping[str, str] = field(default_factory=dict)
    """Nodes whose MIG change waits for GPU pods that cannot leave yet, and why."""
    takeover: TakeoverWait | None = None
    """Nodes still on NVIDIA's operator's driver, and what moves them."""


def agent_conditions(node: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The node agent's conditions on a node, by type."""
    return {
        str(c.get("type")): c
        for c in (node.get("status") or {}).get("conditions") or []
        if c.get("type") in NODE_AGENT_CONDITIONS
    }


def node_agent_summary(nodes: Iterable[Mapping[str, Any]]) -> NodeAgentStatus:
    """How many nodes report each of the agent's conditions True, False or Unknown, the
    first nodes (by name) where one is not True, and the nodes on a host-installed driver."""
    reported = sorted(
        ((name_of(n), agent_conditions(n)) for n in nodes),
        key=lambda pair: pair[0],
    )
    reported = [(name, found) for name, found in reported if found]
    summaries = []
    for kind in NODE_AGENT_CONDITIONS:
        counts = {"True": 0, "False": 0, "Unknown": 0}
        not_true: list[str] = []
        for name, found in reported:
            c = found.get(kind)
            if c is None:
                continue
            status = str(c.get("status"))
            counts[status if status in counts else "Unknown"] += 1
            if status != "True" and len(not_true) < MAX_LISTED_NODES:
                not_true.append(f"{name}: {c.get('reason') or status}")
        summaries.append(
            NodeConditionSummary(
                type=kind,
                true=counts["True"],
                false=counts["False"],
                unknown=counts["Unknown"],
                not_true=not_true,
            )
        )
    hosts = [
        name
        for name, found in reported
        if (c := found.get(GPU_DRIVER_READY)) is not None
        and c.get("status") == "True"
        and c.get("reason") == HOST_DRIVER_REASON
    ]
    return NodeAgentStatus(
        nodes=len(reported),
        conditions=summaries,
        host_driver_nodes=hosts[:MAX_LISTED_NODES],
        host_driver_nodes_omitted=max(0, len(hosts) - MAX_LISTED_NODES),
    )


_S = TypeVar("_S", ClusterPolicyStatus, NVIDIADriverStatus, GPUClusterStatus)


def stored_status(model: type[_S], raw: Mapping[str, Any] | None) -> _S:
    """The status as stored, or an empty one if there is none (or it cannot be read)."""
    if raw:
        try:
            return model.from_dict({"state": "notReady", **raw})
        except pydantic.ValidationError:
            pass
    return model(state="notReady")


def parse_status(raw: Mapping[str, Any] | None) -> ClusterPolicyStatus:
    return stored_status(ClusterPolicyStatus, raw)


def not_ready_message(operands: Sequence[OperandReadiness]) -> str:
    parts = []
    for op in operands:
        if not op.enabled or op.ready:
            continue
        if op.not_ready_nodes:
            parts.append(f"{op.name} on {names_and_more(sorted(op.not_ready_nodes), _MAX_NAMED)}")
        else:
            parts.append(f"{op.name} ({op.message})" if op.message else op.name)
    return "not ready: " + "; ".join(parts)


def policy_status(
    previous: Mapping[str, Any] | None, findings: Findings, *, now: str | None = None
) -> ClusterPolicyStatus:
    """The status the active policy should have (conditions keep their transition times)."""
    status = _policy_status(previous, findings, now=now)
    set_unsupported(status, findings.unsupported, now=now)
    set_mig_blocked(status, findings.mig_blocked, now=now)
    set_takeover(status, findings.takeover, now=now)
    return status


# -- a takeover from NVIDIA's operator, as the status says it (`clusterpolicy._takeover`) --


TAKEOVER_CONDITION = "DriverTakeover"
"""The policy's condition (and its Events' reason) while nodes run the reference's driver."""
TAKEOVER_WALKING = "UpgradeWalk"
"""`TAKEOVER_CONDITION`'s reason when the upgrade walk moves the nodes (auto upgrade is on)."""
TAKEOVER_AUTO_UPGRADE_OFF = "AutoUpgradeOff"
"""`TAKEOVER_CONDITION`'s reason when the nodes wait for the admin."""


@dataclass(frozen=True, slots=True)
class TakeoverWait:
    """The nodes still on the reference operator's driver, and what moves them to ours."""

    nodes: tuple[str, ...]
    """Sorted by name."""
    walks: bool
    """Driver auto upgrade is on: the upgrade walk moves them, within the limits."""
    can_walk: bool
    """Turning auto upgrade on would (the ClusterPolicy governs the drivers: no NVIDIADriver
    resources, no sandbox workloads)."""

    @classmethod
    def of(cls, nodes: Iterable[str], policy: ClusterPolicy) -> TakeoverWait | None:
        """What `policy`'s takeover waits for (None: no node is on the reference's driver).
        The same rule as the upgrade's pool for the reference's driver DaemonSet."""
        names = tuple(sorted(nodes))
        if not names:
            return None
        driver = policy.spec.driver
        sandbox = policy.spec.sandbox_workloads.enabled
        can_walk = driver.enabled and not driver.use_nvidia_driver_crd and not sandbox
        return cls(names, can_walk and driver.upgrade_policy.auto_upgrade, can_walk)

    @property
    def reason(self) -> str:
        return TAKEOVER_WALKING if self.walks else TAKEOVER_AUTO_UPGRADE_OFF

    @property
    def message(self) -> str:
        count = len(self.nodes)
        runs = "node still runs" if count == 1 else "nodes still run"
        head = (
            f"{count} {runs} NVIDIA's operator's driver ({names_and_more(self.nodes, _MAX_NAMED)})"
        )
        limits = "within maxParallelUpgrades and maxUnavailable"
        if self.walks:
            return f"{head}; the driver upgrade walk moves them to ours, {limits}"
        how = (
            "driver auto upgrade is off: drain a node and delete its driver pod "
            "(app.kubernetes.io/component=nvidia-driver) to move it to ours"
        )
        if self.can_walk:
            how += f", or set driver.upgradePolicy.autoUpgrade: true to walk them all {limits}"
        return f"{head}; {how}"


def set_takeover(
    status: ClusterPolicyStatus, wait: TakeoverWait | None, *, now: str | None = None
) -> None:
    """`DriverTakeover=True` while nodes run NVIDIA's operator's driver, saying which and
    what moves them (the upgrade walk, or the admin: `TakeoverWait.message`); no condition
    once every node runs ours."""
    if wait is not None:
        status.set_condition(TAKEOVER_CONDITION, True, wait.reason, wait.message, now=now)
    else:
        status.conditions = [c for c in status.conditions if c.type != TAKEOVER_CONDITION]


def set_mig_blocked(
    status: ClusterPolicyStatus, blocked: Mapping[str, str], *, now: str | None = None
) -> None:
    """`MIGChangeBlocked=True` naming each node whose MIG change waits and the pods that
    hold it (a budget, a DaemonSet's pod); no condition when none. Like `Unsupported`, it
    leaves the state alone: the operands are as ready as they were."""
    message = policy_message(blocked) if blocked else None
    _true_or_absent(status, BLOCKED_REASON, EVICTION_BLOCKED, message, now=now)


def set_unsupported(
    status: ClusterPolicyStatus, fields: Sequence[str], *, now: str | None = None
) -> None:
    """`Unsupported=True` naming every accepted field nothing acts on; no condition when none
    (it never changes the state: the rest of the policy is still carried out)."""
    message = unsupported_message(fields) if fields else None
    _true_or_absent(status, UNSUPPORTED_CONDITION, UNSUPPORTED_REASON, message, now=now)


def _true_or_absent(
    status: ClusterPolicyStatus,
    condition: str,
    reason: str,
    message: str | None,
    *,
    now: str | None,
) -> None:
    """The condition True with `message`, or gone when there is none to say."""
    if message is not None:
        status.set_condition(condition, True, reason, message, now=now)
    else:
        status.conditions = [c for c in status.conditions if c.type != condition]


def _policy_status(
    previous: Mapping[str, Any] | None, findings: Findings, *, now: str | None
) -> ClusterPolicyStatus:
    status = parse_status(previous)
    status.namespace = findings.namespace
    status.observed_generation = findings.generation
    status.components = [op.component() for op in findings.operands]
    status.node_agent = findings.node_agent
    status.remediation = findings.remediation
    not_ready = [op for op in findings.operands if op.enabled and not op.ready]
    if findings.problems:
        reason, _ = findings.problems[0]
        message = "; ".join(msg for _, msg in findings.problems)
        status.state = "notReady"
        status.set_condition(ConditionType.READY, False, reason, message, now=now)
        status.set_condition(ConditionType.ERROR, True, reason, message, now=now)
        return status
    if not findings.has_nfd_labels:
        status.state = "notReady"
        status.mark_not_ready(
            Reason.NFD_LABELS_MISSING,
            "no node has Node Feature Discovery labels (feature.node.kubernetes.io/...), so "
            "GPU nodes cannot be found: deploy NFD",
            now=now,
        )
    elif not_ready:
        status.state = "notReady"
        status.mark_not_ready(Reason.OPERAND_NOT_READY, not_ready_message(not_ready), now=now)
    elif findings.gpu_nodes == 0:
        status.state = "ready"
        status.mark_ready(
            Reason.NO_GPU_NODES, "no GPU node in the cluster; watching for nodes to join", now=now
        )
    else:
        status.state = "ready"
        status.mark_ready(
            Reason.RECONCILED,
            f"all enabled operands are ready on {findings.gpu_nodes} GPU nodes",
            now=now,
        )
    return status


def ignored_status(
    previous: Mapping[str, Any] | None,
    *,
    namespace: str,
    generation: int,
    active: str,
    now: str | None = None,
) -> ClusterPolicyStatus:
    """The status of a ClusterPolicy that is not the oldest one."""
    status = parse_status(previous)
    status.state = "ignored"
    status.namespace = namespace
    status.observed_generation = generation
    status.components = []
    status.set_condition(
        ConditionType.READY,
        False,
        IGNORED_REASON,
        f"ClusterPolicy {active} is active (the oldest one); only one ClusterPolicy is acted "
        "on, delete this one or that one",
        now=now,
    )
    status.set_condition(ConditionType.ERROR, False, Reason.READY, now=now)
    return status


# -- NVIDIADriver ---------------------------------------------------------------------------


def parse_driver_status(raw: Mapping[str, Any] | None) -> NVIDIADriverStatus:
    return stored_status(NVIDIADriverStatus, raw)


def driver_status(
    previous: Mapping[str, Any] | None,
    *,
    namespace: str,
    generation: int,
    readiness: OperandReadiness | None = None,
    problems: Sequence[tuple[str, str]] = (),
    ignored: str | None = None,
    now: str | None = None,
) -> NVIDIADriverStatus:
    """An NVIDIADriver's status: `ignored` (with why), a problem (`Error=True`), not ready
    on some nodes, or ready."""
    status = parse_driver_status(previous)
    status.namespace = namespace
    status.observed_generation = generation
    status.components = [readiness.component()] if readiness is not None else []
    if ignored is not None:
        status.state = "ignored"
        status.set_condition(ConditionType.READY, False, IGNORED_REASON, ignored, now=now)
        status.set_condition(ConditionType.ERROR, False, Reason.READY, now=now)
    elif problems:
        reason, _ = problems[0]
        message = "; ".join(msg for _, msg in problems)
        status.state = "notReady"
        status.set_condition(ConditionType.READY, False, reason, message, now=now)
        status.set_condition(ConditionType.ERROR, True, reason, message, now=now)
    elif readiness is not None and not readiness.ready:
        status.state = "notReady"
        status.mark_not_ready(Reason.DRIVER_NOT_READY, not_ready_message([readiness]), now=now)
    else:
        status.state = "ready"
        nodes = readiness.nodes_desired if readiness is not None else 0
        status.mark_ready(message=f"the driver is ready on {nodes} nodes", now=now)
    return status


INVALID_SPEC = "InvalidSpec"


def invalid_spec(namespace: str, obj: Object, exc: pydantic.ValidationError) -> Findings:
    """The findings of a spec that cannot be read: its first errors, named by field."""
    errors = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
    )
    return Findings(
        namespace=namespace,
        generation=generation_of(obj),
        problems=[(INVALID_SPEC, f"the spec cannot be read: {errors}")],
    )
