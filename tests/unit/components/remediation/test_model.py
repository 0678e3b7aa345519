"""The remediation state machine: from a node as the cluster shows it to the next move."""

from __future__ import annotations

from typing import Any

import pytest

from components.api import (
    REMEDIATION_APPROVED_ANNOTATION,
    REMEDIATION_GPU_ANNOTATION,
    REMEDIATION_HISTORY_ANNOTATION,
    REMEDIATION_SINCE_ANNOTATION,
    REMEDIATION_STATE_LABEL,
    REMEDIATION_TAINT,
    REMEDIATION_XID_ANNOTATION,
    RESET_REQUEST_ANNOTATION,
    RESET_RESULT_ANNOTATION,
    RemediationSpec,
)
from components.remediation import Act, State, decide, node_view, remediation_status, taints_with
from components.upgrade import format_time

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
XID79 = "GPU 1 (GPU-abcd) raised XID 79 (GPU has fallen off the bus)"


def node(
    *,
    healthy: str = "True",
    message: str = "8 GPUs healthy",
    reason: str = "Healthy",
    validated: str = "True",
    state: str | None = None,
    annotations: dict[str, str] | None = None,
    tainted: bool = False,
) -> dict[str, Any]:
    labels = {REMEDIATION_STATE_LABEL: state} if state else {}
    taints = [{"key": REMEDIATION_TAINT, "effect": "NoSchedule"}] if tainted else []
    return {
        "metadata": {"name": "gpu-1", "labels": labels, "annotations": annotations or {}},
        "spec": {"taints": taints},
        "status": {
            "conditions": [
                {"type": "GPUHealthy", "status": healthy, "reason": reason, "message": message},
                {"type": "GPUValidated", "status": validated},
            ]
        },
    }


def sick(**kw: Any) -> dict[str, Any]:
    return node(healthy="False", reason="XID", message=XID79, validated="False", **kw)


def at(state: State, since: float = NOW - 1, **notes: str) -> dict[str, str]:
    return {
        REMEDIATION_SINCE_ANNOTATION: format_time(since),
        REMEDIATION_GPU_ANNOTATION: "1",
        REMEDIATION_XID_ANNOTATION: "79",
        REMEDIATION_HISTORY_ANNOTATION: format_time(NOW - 10),
        **notes,
    }


SPEC = RemediationSpec(enabled=True)


def move(obj: dict[str, Any], spec: RemediationSpec = SPEC, slot_free: bool = True) -> Any:
    return decide(node_view(obj, spec), spec, NOW, slot_free=slot_free)


def test_a_listed_xid_starts_by_fencing_the_node() -> None:
    m = move(sick())
    assert (m.act, m.to) == (Act.START, State.TAINT)
    assert m.annotations[REMEDIATION_GPU_ANNOTATION] == "1"
    assert m.annotations[REMEDIATION_XID_ANNOTATION] == "79"
    assert m.annotations[REMEDIATION_HISTORY_ANNOTATION] == format_time(NOW)


def test_a_healthy_node_or_an_unlisted_xid_is_left_alone() -> None:
    assert move(node()).act is Act.NOTHING
    spec = RemediationSpec(enabled=True, xids=[48])
    assert move(sick(), spec).act is Act.NOTHING


def test_no_free_slot_waits() -> None:
    assert move(sick(), slot_free=False).act is Act.WAIT


def test_the_steps_in_order() -> None:
    tainted = move(sick(state="taint", annotations=at(State.TAINT), tainted=True))
    assert (tainted.act, tainted.to) == (Act.MOVE, State.DRAIN)
    drain = move(sick(state="drain", annotations=at(State.DRAIN), tainted=True))
    assert (drain.act, drain.to) == (Act.DRAIN, State.RESET)
    asked = at(State.RESET, **{RESET_REQUEST_ANNOTATION: "1/abc"})
    assert move(sick(state="reset", annotations=asked, tainted=True)).act is Act.WAIT
    answered = {**asked, RESET_RESULT_ANNOTATION: "abc/succeeded"}
    reset = move(sick(state="reset", annotations=answered, tainted=True))
    assert (reset.act, reset.to) == (Act.MOVE, State.VALIDATE)
    waiting = move(sick(state="validate", annotations=at(State.VALIDATE), tainted=True))
    assert waiting.act is Act.WAIT
    back = move(node(state="validate", annotations=at(State.VALIDATE), tainted=True))
    assert (back.act, back.to) == (Act.MOVE, State.DONE)


def test_an_answer_to_an_older_request_does_not_count() -> None:
    notes = at(
        State.RESET, **{RESET_REQUEST_ANNOTATION: "1/new", RESET_RESULT_ANNOTATION: "old/succeeded"}
    )
    assert move(sick(state="reset", annotations=notes, tainted=True)).act is Act.WAIT


def test_a_failed_reset_fails_the_node() -> None:
    notes = at(
        State.RESET,
        **{RESET_REQUEST_ANNOTATION: "1/abc", RESET_RESULT_ANNOTATION: "abc/failed/no luck"},
    )
    m = move(sick(state="reset", annotations=notes, tainted=True))
    assert (m.act, m.to) == (Act.FAIL, State.FAILED)
    assert "GPU 1 (XID 79): the reset failed: no luck" in m.why


def test_a_step_that_takes_too_long_fails() -> None:
    spec = RemediationSpec(enabled=True, reset_timeout_seconds=30)
    notes = at(State.RESET, since=NOW - 31, **{RESET_REQUEST_ANNOTATION: "1/abc"})
    assert move(sick(state="reset", annotations=notes, tainted=True), spec).act is Act.FAIL


def test_a_relapse_within_the_window_fails_and_never_loops() -> None:
    done = at(State.DONE)
    m = move(sick(state="done", annotations=done))
    assert (m.act, m.to) == (Act.FAIL, State.FAILED)
    assert "failed again within 60 minutes" in m.why
    assert move(sick(state="failed", annotations=done, tainted=True)).act is Act.NOTHING
    old = at(State.DONE, **{REMEDIATION_HISTORY_ANNOTATION: format_time(NOW - 3700)})
    assert move(sick(state="done", annotations=old)).act is Act.START


def test_approval_and_dry_run_hold_the_start() -> None:
    spec = RemediationSpec(enabled=True, require_approval=True)
    assert move(sick(), spec).act is Act.HOLD_APPROVAL
    approved = sick(annotations={REMEDIATION_APPROVED_ANNOTATION: "true"})
    assert move(approved, spec).act is Act.START
    assert move(sick(), RemediationSpec(enabled=True, dry_run=True)).act is Act.DRY_RUN


def test_ecc_counts_unless_the_policy_says_no() -> None:
    ecc = node(
        healthy="False",
        reason="ECCThreshold",
        message="GPU 3 (GPU-x) has 2 uncorrected ECC errors since the driver loaded",
    )
    assert move(ecc).annotations[REMEDIATION_XID_ANNOTATION] == "ECC"
    assert move(ecc, RemediationSpec(enabled=True, ecc=False)).act is Act.NOTHING


def test_our_taint_goes_when_the_admin_removes_the_state() -> None:
    assert move(node(tainted=True)).act is Act.CLEANUP
    other = {"key": "x", "effect": "NoExecute"}
    obj = node(tainted=True)
    obj["spec"]["taints"].append(other)
    assert taints_with(obj, False) == [other]


def test_status_lists_the_nodes_under_way() -> None:
    nodes = [
        sick(
            state="drain",
            annotations={**at(State.DRAIN), "nvidia.com/gpu-remediation.reason": XID79},
        ),
        node(state="done"),
    ]
    assert [(e["node"], e["step"], e["reason"]) for e in remediation_status(nodes)] == [
        ("gpu-1", "drain", XID79)
    ]
