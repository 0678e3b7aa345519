"""The ClusterPolicy and NVIDIADriver status the controllers write: state, conditions,
components, and when nothing changed, no write at all."""

from __future__ import annotations

import pytest

from components.controllers._status import (
    Findings,
    OperandReadiness,
    driver_status,
    ignored_status,
    node_agent_summary,
    policy_status,
)
from components.controllers._status_writer import status_patch

pytestmark = pytest.mark.unit

T0 = "2026-08-01T10:00:00Z"
T1 = "2026-08-01T10:05:00Z"
READY = [
    OperandReadiness("pre-requisites", enabled=True),
    OperandReadiness("state-driver", enabled=True, nodes_desired=2, nodes_ready=2),
    OperandReadiness("state-node-status-exporter", enabled=False),
]


def findings(**kwargs: object) -> Findings:
    base: dict[str, object] = {
        "namespace": "gpu-operator",
        "generation": 3,
        "operands": READY,
        "gpu_nodes": 2,
    }
    base.update(kwargs)
    return Findings(**base)  # type: ignore[arg-type]


def ready_condition(status: object) -> tuple[str, str, str]:
    cond = status.condition("Ready")  # type: ignore[attr-defined]
    assert cond is not None
    return cond.status, cond.reason, cond.message


def test_all_ready() -> None:
    status = policy_status(None, findings(), now=T0)
    assert status.state == "ready"
    assert ready_condition(status)[:2] == ("True", "Reconciled")
    assert status.observed_generation == 3
    assert [(c.name, c.state) for c in status.components] == [
        ("pre-requisites", "ready"),
        ("state-driver", "ready"),
        ("state-node-status-exporter", "disabled"),
    ]


def test_operands_not_ready_are_named_with_their_nodes() -> None:
    operands = [
        OperandReadiness("state-driver", enabled=True, ready=False, not_ready_nodes=["b", "a"]),
        OperandReadiness(
            "state-device-plugin",
            enabled=True,
            ready=False,
            message="DaemonSet nvidia-device-plugin-daemonset not created yet",
        ),
    ]
    status = policy_status(None, findings(operands=operands), now=T0)
    assert status.state == "notReady"
    _, reason, message = ready_condition(status)
    assert reason == "OperandNotReady"
    assert "state-driver on a, b" in message
    assert (
        "state-device-plugin (DaemonSet nvidia-device-plugin-daemonset not created yet)" in message
    )
    assert status.components[0].not_ready_nodes == ["a", "b"]


def test_no_gpu_nodes_is_ready_and_says_so() -> None:
    status = policy_status(None, findings(gpu_nodes=0), now=T0)
    assert status.state == "ready"
    assert ready_condition(status)[:2] == ("True", "NoGPUNodes")


def test_missing_nfd_labels_is_not_ready() -> None:
    status = policy_status(None, findings(has_nfd_labels=False, gpu_nodes=0), now=T0)
    assert status.state == "notReady"
    assert ready_condition(status)[1] == "NFDLabelsMissing"


def test_renderer_conditions_come_first_and_set_error() -> None:
    problems = [("KernelLabelMissing", "GPU nodes n1 have no kernel label"), ("X", "more")]
    status = policy_status(None, findings(problems=problems, has_nfd_labels=False), now=T0)
    assert status.state == "notReady"
    error = status.condition("Error")
    assert error is not None and error.status == "True" and error.reason == "KernelLabelMissing"
    assert error.message == "GPU nodes n1 have no kernel label; more"


def test_the_same_findings_give_no_patch_and_keep_transition_times() -> None:
    first = policy_status(None, findings(), now=T0)
    stored = first.to_dict(defaults=True)
    assert status_patch(None, first) is not None
    again = policy_status(stored, findings(), now=T1)
    assert status_patch(stored, again) is None
    cond = again.condition("Ready")
    assert cond is not None and cond.last_transition_time == T0


def test_a_change_gives_a_patch_of_only_our_fields() -> None:
    stored = {
        **policy_status(None, findings(), now=T0).to_dict(defaults=True),
        "upgrade": {"managed": 3},  # the upgrade controller's: never in our patch
    }
    changed = policy_status(stored, findings(gpu_nodes=0), now=T1)
    patch = status_patch(stored, changed)
    assert patch is not None
    assert set(patch["status"]) == {
        "state",
        "namespace",
        "observedGeneration",
        "conditions",
        "components",
    }


def test_ignored_names_the_active_policy() -> None:
    status = ignored_status(None, namespace="gpu-operator", generation=1, active="first", now=T0)
    assert status.state == "ignored"
    status_, reason, message = ready_condition(status)
    assert (status_, reason) == ("False", "Ignored")
    assert "ClusterPolicy first is active" in message
    assert status.components == []


def test_driver_status_states() -> None:
    ready = OperandReadiness("state-driver", enabled=True, nodes_desired=2, nodes_ready=2)
    status = driver_status(None, namespace="ns", generation=1, readiness=ready, now=T0)
    assert status.state == "ready"
    not_ready = OperandReadiness("state-driver", enabled=True, ready=False, not_ready_nodes=["a"])
    status = driver_status(None, namespace="ns", generation=1, readiness=not_ready, now=T0)
    assert (status.state, ready_condition(status)[1]) == ("notReady", "DriverNotReady")
    conflict = [("ConflictingNodeSelector", "overlaps")]
    status = driver_status(None, namespace="ns", generation=1, problems=conflict, now=T0)
    error = status.condition("Error")
    assert status.state == "notReady" and error is not None and error.status == "True"
    status = driver_status(None, namespace="ns", generation=1, ignored="not used", now=T0)
    assert status.state == "ignored"


def test_fields_accepted_but_not_acted_on_are_named_in_a_condition() -> None:
    unsupported = ["spec.gds.enabled=true", "spec.driver.hostNetwork=true"]
    status = policy_status(None, findings(unsupported=unsupported), now=T0)
    assert status.state == "ready"  # the rest of the policy is carried out
    cond = status.condition("Unsupported")
    assert cond is not None
    assert (cond.status, cond.reason) == ("True", "AcceptedNotActedOn")
    assert cond.message == (
        "spec.gds.enabled=true is accepted but not acted on; "
        "spec.driver.hostNetwork=true is accepted but not acted on"
    )
    # Also next to a renderer's error, and gone once the fields are unset again.
    failing = policy_status(
        None, findings(unsupported=unsupported, problems=[("Bad", "bad")]), now=T0
    )
    assert failing.condition("Unsupported") is not None
    cleared = policy_status(status.to_dict(defaults=True), findings(), now=T1)
    assert cleared.condition("Unsupported") is None
    assert status_patch(status.to_dict(defaults=True), cleared) is not None


def test_no_unsupported_condition_when_every_field_is_acted_on() -> None:
    status = policy_status(None, findings(), now=T0)
    assert [c.type for c in status.conditions] == ["Ready", "Error"]


def _node(name: str, **conditions: tuple[str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                *(
                    {"type": kind, "status": status, "reason": reason}
                    for kind, (status, reason) in conditions.items()
                ),
            ]
        },
    }


def test_the_policy_counts_what_the_node_agents_report() -> None:
    nodes = [
        _node(
            "gpu-b",
            GPUDriverReady=("True", "DriverContainer"),
            GPUHealthy=("False", "XID"),
            GPUValidated=("True", "Validated"),
        ),
        _node(
            "gpu-a",
            GPUDriverReady=("True", "HostDriver"),
            GPUHealthy=("True", "Healthy"),
            GPUValidated=("False", "ToolkitMissing"),
        ),
        _node("cpu-0"),  # no agent: not counted
    ]
    summary = node_agent_summary(nodes)
    assert summary.nodes == 2
    counts = {c.type: (c.true, c.false, c.unknown, c.not_true) for c in summary.conditions}
    assert counts == {
        "GPUDriverReady": (2, 0, 0, []),
        "GPUHealthy": (1, 1, 0, ["gpu-b: XID"]),
        "GPUValidated": (1, 1, 0, ["gpu-a: ToolkitMissing"]),
    }
    assert summary.host_driver_nodes == ["gpu-a"]
    status = policy_status(None, findings(node_agent=summary), now=T0)
    written = status.to_dict()
    assert written["nodeAgent"]["conditions"][1] == {
        "type": "GPUHealthy",
        "true": 1,
        "false": 1,
        "unknown": 0,
        "notTrue": ["gpu-b: XID"],
    }
    # Without the agent the status has no such part, and a stored one is removed.
    without = policy_status(written, findings(), now=T1)
    assert without.node_agent is None
    patch = status_patch(written, without)
    assert patch is not None and patch["status"]["nodeAgent"] is None
    settled = {k: v for k, v in patch["status"].items() if v is not None}
    assert status_patch(settled, without) is None
