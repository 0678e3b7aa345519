"""A transition is one compare-and-set JSON patch; decisions wait for our own writes."""

from __future__ import annotations

from dataclasses import replace

from components.api import DRIVER_KERNEL_PIN_LABEL, UpgradeState
from components.upgrade import (
    CORDONED_AT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    FAILED_STATE,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    STATE_SINCE,
    Transition,
    WriteTracker,
    format_time,
    transition_patch,
)
from components.upgrade._tracker import DeleteTracker

from .builders import NOW, node

S = UpgradeState
LABEL = "/metadata/labels/nvidia.com~1gpu-driver-upgrade-state"


def test_cordon_state_and_time_go_in_one_patch_guarded_by_the_old_state() -> None:
    n = node(state=S.CORDON_REQUIRED)
    ops = transition_patch(
        n, Transition(S.WAIT_FOR_JOBS_REQUIRED, "cordoned", unschedulable=True), NOW
    )
    assert ops[0] == {"op": "test", "path": LABEL, "value": "cordon-required"}
    assert {"op": "add", "path": LABEL, "value": "wait-for-jobs-required"} in ops
    assert {"op": "add", "path": "/spec/unschedulable", "value": True} in ops
    # No annotations yet on the node: the map is created whole.
    assert {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {STATE_SINCE: format_time(NOW)},
    } in ops


def test_the_cordon_time_goes_when_the_node_leaves_the_cordoned_states() -> None:
    n = node(state=S.UNCORDON_REQUIRED, **{CORDONED_AT: "2026-11-30T10:00:00.250Z"})
    ops = transition_patch(n, Transition(S.UPGRADE_DONE, unschedulable=False), NOW)
    assert {
        "op": "remove",
        "path": "/metadata/annotations/" + CORDONED_AT.replace("/", "~1"),
    } in ops
    kept = transition_patch(n, Transition(S.UPGRADE_FAILED, "x", warning=True), NOW)
    assert not any(CORDONED_AT.replace("/", "~1") in op["path"] for op in kept)


def test_a_pin_move_is_one_patch_guarded_by_the_state() -> None:
    n = node(state=S.POD_RESTART_REQUIRED, kernel="6.8.0-50", pinned_kernel="5.15.0-1")
    t = Transition(S.POD_RESTART_REQUIRED, "moved", pin_kernel="6.8.0-50")
    ops = transition_patch(n, t, NOW)
    assert ops[0] == {"op": "test", "path": LABEL, "value": "pod-restart-required"}
    pin = "/metadata/labels/" + DRIVER_KERNEL_PIN_LABEL.replace("/", "~1")
    assert {"op": "add", "path": pin, "value": "6.8.0-50"} in ops
    assert not any(op["path"] == LABEL and op["op"] == "add" for op in ops)  # same state
    moved = node(state=S.POD_RESTART_REQUIRED, kernel="6.8.0-50", pinned_kernel="6.8.0-50")
    assert transition_patch(moved, t, NOW) == []
    unpin = transition_patch(moved, Transition(S.POD_RESTART_REQUIRED, pin_kernel=""), NOW)
    assert {"op": "remove", "path": pin} in unpin


def test_a_node_without_a_state_is_not_tested_and_a_failure_keeps_its_reason() -> None:
    ops = transition_patch(node(), Transition(S.UPGRADE_DONE), NOW)
    assert ops[0]["op"] == "add" and ops[0]["path"] == LABEL
    failed = transition_patch(
        node(state=S.DRAIN_REQUIRED, since=NOW - 5),
        Transition(S.UPGRADE_FAILED, "drain timed out", warning=True,
                   annotations={FAILED_STATE: "drain-required"}),
        NOW,
    )  # fmt: skip
    paths = {op["path"]: op.get("value") for op in failed}
    assert paths["/metadata/annotations/nvidia.com~1gpu-driver-upgrade-message"] == (
        "drain timed out"
    )
    assert paths["/metadata/annotations/nvidia.com~1gpu-driver-upgrade-failed-state"] == (
        "drain-required"
    )


def test_leaving_failure_clears_the_failure_annotations() -> None:
    n = node(
        state=S.UPGRADE_FAILED, since=NOW - 5, **{FAILED_STATE: "drain-required", MESSAGE: "x"}
    )
    ops = transition_patch(n, Transition(S.DRAIN_REQUIRED, "retrying"), NOW)
    removed = {op["path"] for op in ops if op["op"] == "remove"}
    assert removed == {
        "/metadata/annotations/nvidia.com~1gpu-driver-upgrade-failed-state",
        "/metadata/annotations/nvidia.com~1gpu-driver-upgrade-message",
    }


def test_an_unchanged_state_writes_only_what_changes_and_nothing_is_nothing() -> None:
    n = node(state=S.UPGRADE_DONE, since=NOW - 5)
    assert transition_patch(n, Transition(S.UPGRADE_DONE), NOW) == []


def test_clearing_removes_the_label_and_every_bookkeeping_annotation() -> None:
    n = node(state=S.DRAIN_REQUIRED, since=NOW, unschedulable=True,
             **{INITIALLY_UNSCHEDULABLE: "true"})  # fmt: skip
    ops = transition_patch(n, Transition(None), NOW)
    assert {"op": "remove", "path": LABEL} in ops
    assert {op["path"] for op in ops if op["op"] == "remove"} >= {
        LABEL,
        "/metadata/annotations/nvidia.com~1gpu-driver-upgrade-state-since",
        "/metadata/annotations/nvidia.com~1gpu-driver-upgrade.node-initial-state.unschedulable",
    }


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _obj(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def test_tracker_waits_until_the_cache_shows_our_write() -> None:
    clock = Clock()
    tracker = WriteTracker(timeout=30, clock=clock)
    tracker.record(_obj("a", "120"))
    assert tracker.behind("a", _obj("a", "119"))
    assert tracker.pending(lambda n: _obj(n, "119")) == ["a"]
    assert not tracker.behind("a", _obj("a", "121"))  # caught up (or newer): forgotten
    assert not tracker.behind("a", _obj("a", "119"))


def test_tracker_gives_up_after_the_timeout_and_on_deletion() -> None:
    clock = Clock()
    tracker = WriteTracker(timeout=30, clock=clock)
    tracker.record(_obj("a", "120"))
    tracker.record(_obj("b", "7"))
    assert tracker.seconds_left() == 30
    clock.t += 31
    assert not tracker.behind("a", _obj("a", "1"))
    assert not tracker.behind("b", None)


def test_the_device_plugin_pause_is_guarded_and_never_overwrites_another_value() -> None:
    path = "/metadata/labels/" + DEVICE_PLUGIN_DEPLOY_LABEL.replace("/", "~1")
    n = replace(node(state=S.POD_RESTART_REQUIRED), device_plugin="true")
    ops = transition_patch(n, Transition(S.POD_RESTART_REQUIRED, "paused", clients=False), NOW)
    assert ops[0] == {"op": "test", "path": LABEL, "value": "pod-restart-required"}
    assert {"op": "test", "path": path, "value": "true"} in ops
    assert {"op": "replace", "path": path, "value": DEVICE_PLUGIN_PAUSED} in ops
    paused = replace(n, device_plugin=DEVICE_PLUGIN_PAUSED)
    ops = transition_patch(paused, Transition(S.VALIDATION_REQUIRED, clients=True), NOW)
    assert {"op": "test", "path": path, "value": DEVICE_PLUGIN_PAUSED} in ops
    assert {"op": "replace", "path": path, "value": "true"} in ops
    for other in ("false", "paused-for-mig-change", None):
        theirs = replace(n, device_plugin=other)
        for resume in (True, False):
            t = Transition(S.VALIDATION_REQUIRED, clients=resume)
            assert not any(op["path"] == path for op in transition_patch(theirs, t, NOW))


def test_a_deleted_pod_is_waited_for_until_the_cache_shows_it_going() -> None:
    clock = Clock()
    deletes = DeleteTracker(timeout=30, clock=clock)
    deletes.record("uid-1", "50")
    # The cache still shows the pod as it was when we deleted it: do not decide from it.
    assert deletes.behind("uid-1", "50", terminating=False)
    assert not deletes.behind("uid-2", "50", terminating=False)  # another pod
    # Its deletion arrived (terminating, newer): caught up, and forgotten.
    assert not deletes.behind("uid-1", "51", terminating=True)
    assert not deletes.behind("uid-1", "50", terminating=False)


def test_a_deleted_pod_whose_event_never_comes_is_not_waited_for_forever() -> None:
    clock = Clock()
    deletes = DeleteTracker(timeout=30, clock=clock)
    deletes.record("uid-1", "50")
    clock.t += 31
    assert not deletes.behind("uid-1", "50", terminating=False)
