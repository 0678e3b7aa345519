"""Status: the reference's state and conditions, plus per-component and per-node upgrade."""

from __future__ import annotations

import pytest

from components.api import (
    MAX_LISTED_NODES,
    ClusterPolicy,
    ClusterPolicyStatus,
    ComponentStatus,
    ConditionType,
    NodeUpgradeStatus,
    NVIDIADriverStatus,
    Reason,
    UpgradeState,
    UpgradeStatus,
)
from components.offline import CLUSTER_POLICY, NVIDIA_DRIVER, crd
from components.offline._validate._walk import SchemaChecker

pytestmark = pytest.mark.unit

T0 = "2026-08-01T10:00:00Z"
T1 = "2026-08-01T10:05:00Z"


def status_schema(kind: object) -> dict[str, object]:
    version = crd(kind)["spec"]["versions"][0]  # type: ignore[arg-type]
    schema: dict[str, object] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def test_mark_ready_sets_ready_true_and_error_false() -> None:
    status = ClusterPolicyStatus(state="ready", namespace="gpu-operator")
    status.mark_ready(message="all operands ready", now=T0)
    ready = status.condition(ConditionType.READY)
    error = status.condition(ConditionType.ERROR)
    assert ready is not None and error is not None
    assert (ready.status, ready.reason, ready.message) == (
        "True",
        "Reconciled",
        "all operands ready",
    )
    assert (error.status, error.reason) == ("False", "Ready")


def test_mark_error_and_not_ready() -> None:
    status = ClusterPolicyStatus(state="notReady")
    status.mark_error(Reason.RECONCILE_FAILED, "cannot create DaemonSet", now=T0)
    ready = status.condition("Ready")
    error = status.condition("Error")
    assert ready is not None and error is not None
    assert (ready.status, error.status, error.reason) == ("False", "True", "ReconcileFailed")
    status.mark_not_ready(Reason.DRIVER_NOT_READY, "driver not ready on node-1", now=T1)
    error = status.condition("Error")
    assert error is not None and error.status == "False"


def test_transition_time_moves_only_when_the_status_changes() -> None:
    status = ClusterPolicyStatus(state="notReady")
    assert status.set_condition("Ready", False, Reason.OPERAND_NOT_READY, "a", now=T0)
    assert not status.set_condition("Ready", False, Reason.OPERAND_NOT_READY, "a", now=T1)
    assert status.set_condition("Ready", False, Reason.DRIVER_NOT_READY, "b", now=T1)
    cond = status.condition("Ready")
    assert cond is not None and cond.last_transition_time == T0
    assert status.set_condition("Ready", True, Reason.RECONCILED, now=T1)
    cond = status.condition("Ready")
    assert cond is not None and cond.last_transition_time == T1
    assert [c.type for c in status.conditions] == ["Ready"]


def test_component_status_lists_the_first_nodes_sorted() -> None:
    nodes = [f"node-{i:04d}" for i in range(200, 0, -1)]
    component = ComponentStatus.build(
        "state-driver", "notReady", nodes_desired=300, nodes_ready=100, not_ready_nodes=nodes
    )
    assert len(component.not_ready_nodes) == MAX_LISTED_NODES
    assert component.not_ready_nodes[0] == "node-0001"
    assert component.to_dict(defaults=True)["nodesDesired"] == 300


def test_upgrade_summary_counts_every_node_and_lists_the_open_ones() -> None:
    states = (
        [UpgradeState.UPGRADE_DONE] * 5
        + [UpgradeState.UPGRADE_REQUIRED] * 3
        + [UpgradeState.DRAIN_REQUIRED, UpgradeState.POD_RESTART_REQUIRED]
        + [UpgradeState.UPGRADE_FAILED]
        + [UpgradeState.UNKNOWN]
    )
    nodes = [NodeUpgradeStatus(name=f"n{i:02d}", state=s) for i, s in enumerate(states)]
    summary = UpgradeStatus.build(nodes, auto_upgrade=True, available=1)
    assert (summary.managed, summary.done, summary.pending, summary.failed) == (12, 5, 3, 1)
    # in-progress = managed - (unknown + done + upgrade-required), as the reference counts
    assert summary.in_progress == 12 - (1 + 5 + 3)
    assert summary.nodes[0].state == "upgrade-failed"
    assert all(n.state != "upgrade-done" for n in summary.nodes)
    assert summary.nodes_omitted == 0


def test_upgrade_summary_is_bounded() -> None:
    nodes = [NodeUpgradeStatus(name=f"n{i}", state="upgrade-required") for i in range(5000)]
    summary = UpgradeStatus.build(nodes, auto_upgrade=True)
    assert len(summary.nodes) == MAX_LISTED_NODES
    assert summary.nodes_omitted == 5000 - MAX_LISTED_NODES
    assert summary.pending == 5000


def test_status_dump_is_what_the_crd_accepts() -> None:
    status = ClusterPolicyStatus(state="notReady", namespace="gpu-operator", observed_generation=3)
    status.components = [
        ComponentStatus.build("state-driver", "notReady", nodes_desired=2, not_ready_nodes=["b"]),
        ComponentStatus.build("state-device-plugin", "ready", nodes_desired=2, nodes_ready=2),
    ]
    status.upgrade = UpgradeStatus.build(
        [NodeUpgradeStatus(name="b", state="drain-required", since=T0)], auto_upgrade=True
    )
    status.mark_not_ready(Reason.DRIVER_NOT_READY, "driver not ready on b", now=T0)
    body = status.to_dict(defaults=True)
    assert body["state"] == "notReady"
    assert body["observedGeneration"] == 3
    assert body["components"][0]["notReadyNodes"] == ["b"]
    assert body["upgrade"]["inProgress"] == 1
    assert body["conditions"][0]["lastTransitionTime"] == T0
    checker = SchemaChecker()
    checker.check(body, status_schema(CLUSTER_POLICY), "status")
    assert checker.problems == []
    # ... and it reads back.
    policy = ClusterPolicy.from_dict(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "status": body}
    )
    assert policy.status is not None and policy.status.to_dict(defaults=True) == body


def test_nvidiadriver_status_has_disabled() -> None:
    status = NVIDIADriverStatus(state="disabled")
    checker = SchemaChecker()
    checker.check(status.to_dict(defaults=True), status_schema(NVIDIA_DRIVER), "status")
    assert checker.problems == []


def test_policy_state_is_the_references_enum() -> None:
    schema = status_schema(CLUSTER_POLICY)
    assert schema["properties"]["state"]["enum"] == ["ready", "notReady", "ignored"]  # type: ignore[index]
    assert schema["required"] == ["state"]
