"""GPU remediation as a pure state machine: one node's view in, the next move out.

Every bit of state is on the Node (`nvidia.com/gpu-remediation.state` and its
annotations), so `decide` needs no memory: a restarted operator reads the same node and
makes the same move. The steps, each a value of the state label:

    (sick) -> taint -> drain -> reset -> validate -> done
                 \\________\\_______\\________\\-> failed (stays fenced; never retried)

* `taint`: the node carries our NoSchedule taint; nothing new lands on the sick GPU.
* `drain`: its GPU pods leave through the Eviction API (PodDisruptionBudgets hold), by the
  driver upgrade's pod-deletion rules (`components.upgrade.deletion_plan`).
* `reset`: the node agent resets the GPU once no process holds it, and answers.
* `validate`: the agent reports the GPU healthy and validated again (the device plugin
  offers it again).
* `done`: the taint is gone; the label stays as the record of the last remediation.
* `failed`: the reset failed, a step timed out, or the node relapsed within the window
  (more than `maxPerNodePerWindow` remediations): the taint stays, the node gets the
  condition `GPURemediationFailed`, and (with `rebootOnFailure`) the agent writes the
  host's reboot sentinel. Removing the state label hands the node back to the admin.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.api import (
    GPU_HEALTHY,
    GPU_VALIDATED,
    REBOOT_RESULT_ANNOTATION,
    REMEDIATION_APPROVED_ANNOTATION,
    REMEDIATION_GPU_ANNOTATION,
    REMEDIATION_HISTORY_ANNOTATION,
    REMEDIATION_REASON_ANNOTATION,
    REMEDIATION_SINCE_ANNOTATION,
    REMEDIATION_STATE_LABEL,
    REMEDIATION_TAINT,
    REMEDIATION_XID_ANNOTATION,
    RESET_REQUEST_ANNOTATION,
    RESET_RESULT_ANNOTATION,
    RemediationSpec,
)
from components.upgrade import format_time, parse_time
from reconciler import annotations_of, labels_of, name_of


class State(enum.StrEnum):
    TAINT = "taint"
    DRAIN = "drain"
    RESET = "reset"
    VALIDATE = "validate"
    DONE = "done"
    FAILED = "failed"


IN_PROGRESS = frozenset({State.TAINT, State.DRAIN, State.RESET, State.VALIDATE})

# "GPU 1 (GPU-uuid) raised XID 79 (GPU has fallen off the bus)"
_XID_MESSAGE = re.compile(r"GPU (\d+) \(([^)]*)\) raised XID (\d+)")
_ECC_MESSAGE = re.compile(r"GPU (\d+) \(([^)]*)\)")


@dataclass(frozen=True, slots=True)
class Sickness:
    """What the node agent says is wrong: which GPU, and the XID (None for ECC)."""

    gpu: int
    xid: int | None
    message: str

    @property
    def reason(self) -> str:
        """The metric's `reason` label: `xid-79` or `ecc`."""
        return f"xid-{self.xid}" if self.xid is not None else "ecc"


def condition(node: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (node.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


def sickness(node: Mapping[str, Any], spec: RemediationSpec) -> Sickness | None:
    """The GPU problem the policy remediates, from the node's `GPUHealthy`; None when the
    node is healthy, unknown, or sick for a reason not on the list."""
    healthy = condition(node, GPU_HEALTHY)
    if healthy is None or healthy.get("status") != "False":
        return None
    message = str(healthy.get("message") or "")
    reason = healthy.get("reason")
    if reason == "XID" and (found := _XID_MESSAGE.search(message)):
        xid = int(found.group(3))
        return Sickness(int(found.group(1)), xid, message) if xid in spec.xids else None
    if reason == "ECCThreshold" and spec.ecc and (found := _ECC_MESSAGE.search(message)):
        return Sickness(int(found.group(1)), None, message)
    return None


def _true(node: Mapping[str, Any], kind: str) -> bool:
    c = condition(node, kind)
    return c is not None and c.get("status") == "True"


def has_taint(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == REMEDIATION_TAINT for t in _taints(node))


def _taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or ())


def taints_with(node: Mapping[str, Any], present: bool) -> list[Mapping[str, Any]]:
    """The node's taints with ours added (`present`) or removed."""
    others = [t for t in _taints(node) if t.get("key") != REMEDIATION_TAINT]
    if present:
        others.append({"key": REMEDIATION_TAINT, "value": "true", "effect": "NoSchedule"})
    return others


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the state machine reads of one node."""

    name: str
    state: State | None
    sickness: Sickness | None
    healthy: bool
    validated: bool
    tainted: bool
    approved: bool
    since: float | None
    history: tuple[float, ...]
    gpu: int | None
    xid: str
    reason: str
    reset_request: str
    reset_result: str
    reboot_result: str


def node_view(node: Mapping[str, Any], spec: RemediationSpec) -> NodeView:
    labels: Mapping[str, str] = labels_of(node)
    notes: Mapping[str, str] = annotations_of(node)
    try:
        state: State | None = State(labels.get(REMEDIATION_STATE_LABEL, ""))
    except ValueError:
        state = None
    gpu_text = notes.get(REMEDIATION_GPU_ANNOTATION, "")
    history = tuple(
        t
        for t in (parse_time(s) for s in notes.get(REMEDIATION_HISTORY_ANNOTATION, "").split(","))
        if t is not None
    )
    return NodeView(
        name=name_of(node),
        state=state,
        sickness=sickness(node, spec),
        healthy=_true(node, GPU_HEALTHY),
        validated=_true(node, GPU_VALIDATED),
        tainted=has_taint(node),
        approved=notes.get(REMEDIATION_APPROVED_ANNOTATION) == "true",
        since=parse_time(notes.get(REMEDIATION_SINCE_ANNOTATION, "")),
        history=history,
        gpu=int(gpu_text) if gpu_text.isdigit() else None,
        xid=notes.get(REMEDIATION_XID_ANNOTATION, ""),
        reason=notes.get(REMEDIATION_REASON_ANNOTATION, ""),
        reset_request=notes.get(RESET_REQUEST_ANNOTATION, ""),
        reset_result=notes.get(RESET_RESULT_ANNOTATION, ""),
        reboot_result=notes.get(REBOOT_RESULT_ANNOTATION, ""),
    )


class Act(enum.Enum):
    NOTHING = "nothing"
    WAIT = "wait"
    """Nothing to write now; look again later (or on the next event)."""
    START = "start"
    """Sick, and a slot is free: fence it (taint + state `taint`)."""
    HOLD_APPROVAL = "hold-approval"
    DRY_RUN = "dry-run"
    MOVE = "move"
    """Write `to` (and what it needs: the reset request, the taint's removal)."""
    DRAIN = "drain"
    """Evict the node's GPU pods; `to` DRAIN->RESET once none is left."""
    FAIL = "fail"
    CLEANUP = "cleanup"
    """No remediation (label removed by the admin, or policy off): our taint goes."""


@dataclass(frozen=True, slots=True)
class Move:
    act: Act
    to: State | None = None
    why: str = ""
    annotations: Mapping[str, str | None] = field(default_factory=dict)


def _age(view: NodeView, now: float) -> float:
    return now - view.since if view.since is not None else 0.0


def within_window(history: Sequence[float], spec: RemediationSpec, now: float) -> int:
    start = now - spec.window_minutes * 60
    return sum(1 for t in history if t >= start)


def _what(view: NodeView) -> str:
    xid = f"XID {view.xid}" if view.xid and view.xid != "ECC" else "ECC errors"
    return f"GPU {view.gpu} ({xid})"


def reset_id(view: NodeView) -> str:
    """The id of this remediation's reset request: its start time, unique per node."""
    return format_time(view.history[-1]) if view.history else "0"


def decide(view: NodeView, spec: RemediationSpec, now: float, *, slot_free: bool) -> Move:
    """The next move for one node (`slot_free`: the cluster-wide limit allows one more)."""
    state = view.state
    if state is None or state is State.DONE:
        sick = view.sickness
        if sick is None:
            if view.tainted and state is None:
                return Move(Act.CLEANUP, why="no remediation on the node any more")
            return Move(Act.NOTHING)
        if spec.dry_run:
            return Move(Act.DRY_RUN, why=f"would remediate: {sick.message}")
        if within_window(view.history, spec, now) >= spec.max_per_node_per_window:
            xid = str(sick.xid) if sick.xid is not None else "ECC"
            return Move(
                Act.FAIL,
                State.FAILED,
                why=f"GPU {sick.gpu} failed again within {spec.window_minutes} minutes "
                f"({sick.message}); remediated {len(view.history)} times",
                annotations=_started(sick, now, view.history, xid, record=False),
            )
        if spec.require_approval and not view.approved:
            return Move(
                Act.HOLD_APPROVAL,
                why=f"{sick.message}; waiting for {REMEDIATION_APPROVED_ANNOTATION}=true",
            )
        if not slot_free:
            return Move(Act.WAIT, why="another node's remediation uses the last slot")
        xid = str(sick.xid) if sick.xid is not None else "ECC"
        return Move(
            Act.START,
            State.TAINT,
            why=f"{sick.message}: fencing the node",
            annotations=_started(sick, now, view.history, xid, record=True),
        )
    if state is State.FAILED:
        return Move(Act.NOTHING)
    if state is State.TAINT:
        if not view.tainted:
            return Move(Act.START, State.TAINT, why="the taint is not on the node yet")
        return Move(Act.MOVE, State.DRAIN, why=f"{_what(view)}: evicting its GPU pods")
    if state is State.DRAIN:
        if spec.drain_timeout_seconds and _age(view, now) > spec.drain_timeout_seconds:
            return Move(
                Act.FAIL,
                State.FAILED,
                why=f"{_what(view)}: GPU pods did not leave within {spec.drain_timeout_seconds}s",
            )
        return Move(Act.DRAIN, State.RESET, why=f"{_what(view)}: no GPU pod left; resetting")
    if state is State.RESET:
        request_id = view.reset_request.partition("/")[2]
        got, _, rest = view.reset_result.partition("/")
        outcome, _, detail = rest.partition("/")
        if request_id and got == request_id and outcome == "succeeded":
            return Move(Act.MOVE, State.VALIDATE, why=f"{_what(view)} reset; re-validating")
        if request_id and got == request_id and outcome == "failed":
            return Move(Act.FAIL, State.FAILED, why=f"{_what(view)}: the reset failed: {detail}")
        if _age(view, now) > spec.reset_timeout_seconds:
            waiting = f" ({detail})" if got == request_id and detail else ""
            return Move(
                Act.FAIL,
                State.FAILED,
                why=f"{_what(view)}: no reset within {spec.reset_timeout_seconds}s{waiting}",
            )
        return Move(Act.WAIT, why="waiting for the node agent's reset")
    if state is State.VALIDATE:
        if view.healthy and view.validated:
            return Move(Act.MOVE, State.DONE, why=f"{_what(view)} healthy and validated; node back")
        if _age(view, now) > spec.validation_timeout_seconds:
            return Move(
                Act.FAIL,
                State.FAILED,
                why=f"{_what(view)}: not validated within {spec.validation_timeout_seconds}s "
                "of the reset",
            )
        return Move(Act.WAIT, why="waiting for the node agent's GPUValidated")
    return Move(Act.NOTHING)


def _started(
    sick: Sickness, now: float, history: Sequence[float], xid: str, *, record: bool
) -> dict[str, str | None]:
    kept = [*history, now] if record else list(history)
    return {
        REMEDIATION_REASON_ANNOTATION: sick.message,
        REMEDIATION_GPU_ANNOTATION: str(sick.gpu),
        REMEDIATION_XID_ANNOTATION: xid,
        REMEDIATION_HISTORY_ANNOTATION: ",".join(format_time(t) for t in kept[-10:]),
    }


def in_progress(state: State | None) -> bool:
    return state in IN_PROGRESS
