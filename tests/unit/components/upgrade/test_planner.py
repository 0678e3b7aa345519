"""The state machine, one node at a time: what each state waits for and where it goes."""

from __future__ import annotations

from dataclasses import replace

from components.api import UpgradeState
from components.upgrade import (
    CORDONED_AT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    FAILED_STATE,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    UPGRADE_REQUESTED,
    VALIDATOR_DEPLOY_LABEL,
    AgentVerdict,
    NodeContext,
    NodeView,
    PdbView,
    Step,
    cleanup,
    format_time_ms,
    plan_node,
    transition_patch,
)

from .builders import NOW, driver, gpu_pod, node, policy, validator

S = UpgradeState


def step(ctx: NodeContext, **policy_fields: object) -> Step:
    return plan_node(ctx, policy(**policy_fields), NOW)


def to(ctx: NodeContext, **policy_fields: object) -> UpgradeState | None:
    s = step(ctx, **policy_fields)
    return s.transition.to if s.transition else None


# -- detection ---------------------------------------------------------------------------


def test_an_unknown_node_in_sync_is_done_and_an_outdated_one_requires_an_upgrade() -> None:
    assert to(NodeContext(node(), driver("new"), "new")) is S.UPGRADE_DONE
    assert to(NodeContext(node(), driver("old"), "new")) is S.UPGRADE_REQUIRED
    assert to(NodeContext(node(state=S.UPGRADE_DONE), driver("old"), "new")) is S.UPGRADE_REQUIRED
    assert step(NodeContext(node(state=S.UPGRADE_DONE), driver("new"), "new")).empty


def test_no_driver_pod_means_nothing_to_decide() -> None:
    assert step(NodeContext(node(), None, "new")).empty
    assert step(NodeContext(node(), driver("old", terminating=True), "new")).empty


def test_a_kernel_change_under_a_running_driver_requires_the_same_safe_path() -> None:
    ctx = NodeContext(node(kernel="6.8.0-50"), driver("new", kernel="6.8.0-45"), "new")
    s = step(ctx)
    assert s.transition is not None and s.transition.to is S.UPGRADE_REQUIRED
    assert "kernel" in s.transition.reason


def test_an_upgrade_request_annotation_requires_an_upgrade() -> None:
    ctx = NodeContext(node(state=S.UPGRADE_DONE, **{UPGRADE_REQUESTED: "true"}), driver(), "new")
    assert to(ctx) is S.UPGRADE_REQUIRED


def test_a_node_cordoned_before_its_upgrade_is_remembered() -> None:
    s = step(NodeContext(node(unschedulable=True), driver("old"), "new"))
    assert s.transition is not None
    assert s.transition.annotations.get(INITIALLY_UNSCHEDULABLE) == "true"


def test_a_kernel_learnt_from_a_change_is_recorded_with_the_walk_it_starts() -> None:
    # No write for a driver that merely runs: its kernel matters only once it changes.
    unknown = NodeContext(node(kernel="6.8.0"), driver("new", kernel=None), "new")
    assert step(unknown).record_kernel is None
    assert step(NodeContext(node(kernel="6.8.0"), driver("new"), "new")).record_kernel is None
    # The node's kernel moved from 6.5.0 under the pod: the record and upgrade-required go
    # out together.
    learnt = replace(driver("new", kernel=None), kernel="6.5.0", kernel_learnt=True)
    s = step(NodeContext(node(state=S.UPGRADE_DONE, kernel="6.8.0"), learnt, "new"))
    assert s.record_kernel == "6.5.0"
    assert s.transition is not None and s.transition.to is S.UPGRADE_REQUIRED
    assert "serves kernel 6.5.0, the node runs 6.8.0" in s.transition.reason


# -- upgrade-required and cordon ---------------------------------------------------------


def test_upgrade_required_waits_for_admission_or_goes_back_to_done_when_in_sync() -> None:
    waiting = step(NodeContext(node(state=S.UPGRADE_REQUIRED), driver("old"), "new"))
    assert waiting.transition is None and "slot" in waiting.wait
    back = NodeContext(node(state=S.UPGRADE_REQUIRED), driver("new"), "new")
    assert to(back) is S.UPGRADE_DONE


def test_cordon_is_one_write_with_the_next_state() -> None:
    s = step(NodeContext(node(state=S.CORDON_REQUIRED), driver("old"), "new"))
    assert s.transition is not None
    assert s.transition.to is S.WAIT_FOR_JOBS_REQUIRED and s.transition.unschedulable is True
    assert s.transition.annotations.get(INITIALLY_UNSCHEDULABLE) is None
    already = step(NodeContext(node(state=S.CORDON_REQUIRED, unschedulable=True), driver(), "x"))
    assert already.transition is not None
    assert already.transition.annotations.get(INITIALLY_UNSCHEDULABLE) == "true"


# -- wait for jobs -----------------------------------------------------------------------


def test_without_a_selector_there_are_no_jobs_to_wait_for() -> None:
    ctx = NodeContext(node(state=S.WAIT_FOR_JOBS_REQUIRED), driver("old"), "new")
    assert to(ctx) is S.POD_DELETION_REQUIRED


def test_jobs_are_waited_for_until_they_finish_or_the_timeout() -> None:
    job = gpu_pod("train", labels={"kind": "batch"})
    wait = {"waitForCompletion": {"podSelector": "kind=batch", "timeoutSeconds": 60}}
    running = NodeContext(node(state=S.WAIT_FOR_JOBS_REQUIRED, since=NOW - 10), pods=[job])
    s = step(running, **wait)
    assert s.transition is None and s.requeue_after == 50
    expired = NodeContext(node(state=S.WAIT_FOR_JOBS_REQUIRED, since=NOW - 61), pods=[job])
    assert to(expired, **wait) is S.POD_DELETION_REQUIRED
    done = NodeContext(
        node(state=S.WAIT_FOR_JOBS_REQUIRED, since=NOW - 10),
        pods=[gpu_pod("train", labels={"kind": "batch"}, phase="Succeeded")],
    )
    assert to(done, **wait) is S.POD_DELETION_REQUIRED
    forever = {"waitForCompletion": {"podSelector": "kind=batch", "timeoutSeconds": 0}}
    long_ago = NodeContext(node(state=S.WAIT_FOR_JOBS_REQUIRED, since=NOW - 10**6), pods=[job])
    s = step(long_ago, **forever)
    assert s.transition is None and s.requeue_after is None


# -- pod deletion ------------------------------------------------------------------------


def test_gpu_pods_are_deleted_and_waited_for_then_the_driver_restarts() -> None:
    job, cpu = gpu_pod("job"), gpu_pod("web", gpu=False)
    s = step(NodeContext(node(state=S.POD_DELETION_REQUIRED, since=NOW), pods=[job, cpu]))
    assert s.delete == (job,) and s.transition is None
    going = NodeContext(
        node(state=S.POD_DELETION_REQUIRED, since=NOW), pods=[gpu_pod("job", terminating=True)]
    )
    s = step(going)
    assert s.delete == () and s.transition is None and s.requeue_after == 300
    gone = NodeContext(node(state=S.POD_DELETION_REQUIRED, since=NOW), pods=[cpu])
    assert to(gone) is S.POD_RESTART_REQUIRED


def test_pods_that_cannot_be_deleted_fail_the_node_or_send_it_to_drain() -> None:
    bare = gpu_pod("bare", owner="")
    scratch = gpu_pod("scratch", local_storage=True)
    ds = gpu_pod("ds", owner="DaemonSet")
    for pod in (bare, scratch, ds):
        ctx = NodeContext(node(state=S.POD_DELETION_REQUIRED, since=NOW), pods=[pod])
        s = step(ctx)
        assert s.transition is not None and s.transition.to is S.UPGRADE_FAILED
        assert s.transition.warning and pod.key in s.transition.reason
        assert s.transition.annotations[FAILED_STATE] == S.POD_DELETION_REQUIRED.value
        assert to(ctx, drain={"enable": True}) is S.DRAIN_REQUIRED
    forced = NodeContext(node(state=S.POD_DELETION_REQUIRED, since=NOW), pods=[bare, scratch])
    s = step(forced, podDeletion={"force": True, "deleteEmptyDir": True})
    assert set(s.delete) == {bare, scratch}


def test_pod_deletion_times_out() -> None:
    stuck = gpu_pod("job", terminating=True)
    ctx = NodeContext(node(state=S.POD_DELETION_REQUIRED, since=NOW - 301), pods=[stuck])
    assert to(ctx) is S.UPGRADE_FAILED
    assert to(ctx, drain={"enable": True}) is S.DRAIN_REQUIRED
    assert to(ctx, podDeletion={"timeoutSeconds": 0}) is None  # 0 waits forever


# -- drain -------------------------------------------------------------------------------


def test_drain_evicts_what_it_selects_and_skips_what_it_must() -> None:
    web = gpu_pod("web", gpu=False)
    skip = gpu_pod("infra", gpu=False, labels={"nvidia.com/gpu-driver-upgrade-drain.skip": "true"})
    operator = gpu_pod("gpu-operator-abc", namespace="gpu-operator", gpu=False)
    daemon = gpu_pod("exporter", owner="DaemonSet", gpu=False)
    done = gpu_pod("old-job", phase="Succeeded", gpu=False)
    ctx = NodeContext(
        node(state=S.DRAIN_REQUIRED, since=NOW),
        pods=[web, skip, operator, daemon, done],
        operator_pod=("gpu-operator", "gpu-operator-abc"),
    )
    s = step(ctx, drain={"enable": True})
    assert s.evict == (web,) and s.transition is None


def test_drain_pod_selector_narrows_the_drain() -> None:
    a = gpu_pod("a", gpu=False, labels={"team": "ml"})
    b = gpu_pod("b", gpu=False, labels={"team": "web"})
    ctx = NodeContext(node(state=S.DRAIN_REQUIRED, since=NOW), pods=[a, b])
    assert step(ctx, drain={"enable": True, "podSelector": "team=ml"}).evict == (a,)


def test_drain_finishes_when_the_node_is_empty_and_times_out_naming_the_budget() -> None:
    ctx = NodeContext(node(state=S.DRAIN_REQUIRED, since=NOW), pods=[])
    assert to(ctx, drain={"enable": True}) is S.POD_RESTART_REQUIRED
    held = gpu_pod("db", gpu=False, labels={"app": "db"})
    pdb = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)
    late = NodeContext(node(state=S.DRAIN_REQUIRED, since=NOW - 301), pods=[held], pdbs=[pdb])
    s = step(late, drain={"enable": True})
    assert s.transition is not None and s.transition.to is S.UPGRADE_FAILED
    assert "work/db-pdb" in s.transition.reason and "timed out" in s.transition.reason


def test_drain_refuses_unmanaged_pods_without_force() -> None:
    bare = gpu_pod("bare", owner="", gpu=False)
    ctx = NodeContext(node(state=S.DRAIN_REQUIRED, since=NOW), pods=[bare])
    assert to(ctx, drain={"enable": True}) is S.UPGRADE_FAILED
    assert step(ctx, drain={"enable": True, "force": True}).evict == (bare,)


def test_gpu_pods_the_drain_skips_never_stay_under_a_driver_restart() -> None:
    skip = gpu_pod("gpu", labels={"nvidia.com/gpu-driver-upgrade-drain.skip": "true"})
    ctx = NodeContext(node(state=S.DRAIN_REQUIRED, since=NOW), pods=[skip])
    assert to(ctx, drain={"enable": True}) is S.UPGRADE_FAILED
    # With drain switched off, the GPU pods go back to pod deletion instead.
    assert to(ctx) is S.POD_DELETION_REQUIRED


# -- driver restart ----------------------------------------------------------------------


def test_the_outdated_driver_pod_is_deleted_then_its_replacement_awaited() -> None:
    old = driver("old")
    s = step(NodeContext(node(state=S.POD_RESTART_REQUIRED), old, "new"))
    assert s.delete == (old,) and s.transition is None
    terminating = step(
        NodeContext(node(state=S.POD_RESTART_REQUIRED), driver("old", terminating=True), "new")
    )
    assert terminating.empty and "terminate" in terminating.wait
    assert step(NodeContext(node(state=S.POD_RESTART_REQUIRED), None, "new")).empty
    starting = NodeContext(node(state=S.POD_RESTART_REQUIRED), driver("new", ready=False), "new")
    assert step(starting).empty
    ready = NodeContext(node(state=S.POD_RESTART_REQUIRED), driver("new"), "new")
    assert to(ready) is S.VALIDATION_REQUIRED
    failing = NodeContext(
        node(state=S.POD_RESTART_REQUIRED), driver("new", ready=False, failing=True), "new"
    )
    assert to(failing) is S.UPGRADE_FAILED


def test_the_driver_waits_until_the_cordon_has_reached_the_scheduler() -> None:
    # Cordoned a moment ago, on a node that still offers GPUs (a device plugin not ours):
    # a pod the scheduler placed from an older view may still be bound to the node, so the
    # driver stays until the cordon has settled.
    cordoned = format_time_ms(NOW - 0.5)
    offering = replace(
        node(state=S.POD_RESTART_REQUIRED, **{CORDONED_AT: cordoned}), gpus_advertised=True
    )
    s = step(NodeContext(offering, driver("old"), "new"))
    assert s.delete == () and s.transition is None
    assert s.requeue_after is not None and 1.4 < s.requeue_after <= 1.5
    settled = node(state=S.POD_RESTART_REQUIRED, **{CORDONED_AT: format_time_ms(NOW - 2.5)})
    settled = replace(settled, gpus_advertised=True)
    assert step(NodeContext(settled, driver("old"), "new")).delete == (driver("old"),)
    # A node that offers no GPU needs no settling: a GPU pod bound from a stale view fails
    # the kubelet's device admission, and one bound before is seen by the live re-check.
    cleared = node(state=S.POD_RESTART_REQUIRED, **{CORDONED_AT: cordoned})
    assert step(NodeContext(cleared, driver("old"), "new")).delete == (driver("old"),)
    # The cordon records its time; leaving the walk forgets it.
    s = step(NodeContext(node(state=S.CORDON_REQUIRED), driver("old"), "new"))
    assert s.transition is not None and s.transition.annotations[CORDONED_AT] == format_time_ms(NOW)


def test_the_driver_never_restarts_under_a_gpu_pod() -> None:
    ctx = NodeContext(node(state=S.POD_RESTART_REQUIRED), driver("old"), "new", pods=[gpu_pod()])
    s = step(ctx)
    assert s.delete == () and s.transition is not None
    assert s.transition.to is S.POD_DELETION_REQUIRED
    going = NodeContext(
        node(state=S.POD_RESTART_REQUIRED),
        driver("old"),
        "new",
        pods=[gpu_pod(terminating=True)],
    )
    assert step(going).empty


def test_a_requested_restart_deletes_an_in_sync_driver_and_clears_the_request() -> None:
    d = driver("new")
    ctx = NodeContext(node(state=S.POD_RESTART_REQUIRED, **{UPGRADE_REQUESTED: "true"}), d, "new")
    s = step(ctx)
    assert s.delete == (d,)
    assert s.transition is not None and s.transition.annotations == {UPGRADE_REQUESTED: None}


def test_a_precompiled_driver_changes_kernel_by_moving_the_pin_not_by_deleting_the_pod() -> None:
    # Deleting the pod would only bring the old kernel's driver back: its DaemonSet still
    # selects the node. Moving the pin hands the node to the new kernel's DaemonSet.
    old = driver("new", kernel="5.15.0-1", pinned=True)
    moving = node(state=S.POD_RESTART_REQUIRED, kernel="6.8.0-50", pinned_kernel="5.15.0-1")
    s = step(NodeContext(moving, old, "new"))
    assert s.delete == ()
    assert s.transition is not None and s.transition.pin_kernel == "6.8.0-50"
    assert s.transition.to is S.POD_RESTART_REQUIRED
    # Pinned: the old pod goes (its DaemonSet would remove it too), the new one is awaited.
    moved = node(state=S.POD_RESTART_REQUIRED, kernel="6.8.0-50", pinned_kernel="6.8.0-50")
    assert step(NodeContext(moved, old, "new")).delete == (old,)
    new = driver("new", name="driver-new", kernel="6.8.0-50", pinned=True)
    assert to(NodeContext(moved, new, "new")) is S.VALIDATION_REQUIRED


def test_a_precompiled_pin_move_serves_an_upgrade_request_too() -> None:
    requested = node(
        state=S.POD_RESTART_REQUIRED,
        kernel="6.8.0-50",
        pinned_kernel="5.15.0-1",
        **{UPGRADE_REQUESTED: "true"},
    )
    s = step(NodeContext(requested, driver("new", kernel="5.15.0-1", pinned=True), "new"))
    assert s.transition is not None and s.transition.pin_kernel == "6.8.0-50"
    assert s.transition.annotations == {UPGRADE_REQUESTED: None}


def test_a_precompiled_node_on_a_new_kernel_walks_the_safe_path_first() -> None:
    ctx = NodeContext(
        node(state=S.UPGRADE_DONE, kernel="6.8.0-50", pinned_kernel="5.15.0-1"),
        driver("new", kernel="5.15.0-1", pinned=True),
        "new",
    )
    s = step(ctx)
    assert s.transition is not None and s.transition.to is S.UPGRADE_REQUIRED
    assert s.transition.pin_kernel is None  # not before the node is cordoned and cleared


def test_turning_precompiled_on_or_off_walks_each_node_and_moves_its_pin() -> None:
    per_os = driver("new", kernel="5.15.0-1")
    on = NodeContext(node(state=S.UPGRADE_DONE, kernel="5.15.0-1"), per_os, "new", precompiled=True)
    s = step(on)
    assert s.transition is not None and s.transition.to is S.UPGRADE_REQUIRED
    assert "now uses precompiled" in s.transition.reason
    restart = replace(on, node=node(state=S.POD_RESTART_REQUIRED, kernel="5.15.0-1"))
    s = step(restart)
    assert s.transition is not None and s.transition.pin_kernel == "5.15.0-1"

    pinned = driver("new", kernel="5.15.0-1", pinned=True)
    off_node = node(state=S.POD_RESTART_REQUIRED, kernel="5.15.0-1", pinned_kernel="5.15.0-1")
    s = step(NodeContext(off_node, pinned, "new", precompiled=False))
    assert s.transition is not None and s.transition.pin_kernel == ""  # unpinned: per-OS
    unpinned = node(state=S.POD_RESTART_REQUIRED, kernel="5.15.0-1")
    # Unpinned but the precompiled pod still there: it goes (its DaemonSet lets it go too).
    assert step(NodeContext(unpinned, pinned, "new", precompiled=False)).delete == (pinned,)


# -- validation --------------------------------------------------------------------------


def test_validation_restarts_stale_validators_then_waits_for_fresh_ready_ones() -> None:
    d = driver("new", created=NOW - 50)
    n = node(state=S.VALIDATION_REQUIRED, since=NOW - 40)
    stale = validator(created=NOW - 1000)
    s = step(NodeContext(n, d, "new", pods=[d, stale]))
    assert s.delete == (stale,) and s.transition is None and s.requeue_after == 560
    fresh = validator(created=NOW - 10, ready=False, name="validator-y")
    s = step(NodeContext(n, d, "new", pods=[d, fresh]))
    assert s.empty and "validator" in s.wait
    ready = validator(created=NOW - 10, name="validator-y")
    assert to(NodeContext(n, d, "new", pods=[d, ready])) is S.UNCORDON_REQUIRED


def test_validation_times_out_into_failure() -> None:
    d = driver("new", created=NOW - 700)
    n = node(state=S.VALIDATION_REQUIRED, since=NOW - 601)
    s = step(NodeContext(n, d, "new", pods=[d]))
    assert s.transition is not None and s.transition.to is S.UPGRADE_FAILED
    assert s.transition.annotations[FAILED_STATE] == S.VALIDATION_REQUIRED.value


def test_a_driver_changed_again_during_validation_is_restarted_again() -> None:
    n = node(state=S.VALIDATION_REQUIRED, since=NOW)
    assert to(NodeContext(n, driver("new"), "newer")) is S.POD_RESTART_REQUIRED


def test_a_gpu_pod_scheduled_back_while_the_driver_restarts_sends_the_node_to_clearing() -> None:
    # A pod tolerating every taint ignores the cordon; on a driver not yet ready it must go.
    n = node(state=S.VALIDATION_REQUIRED, since=NOW)
    back = gpu_pod("tolerant-1")
    assert to(NodeContext(n, driver("new", ready=False), "new", pods=[back])) is (
        S.POD_DELETION_REQUIRED
    )
    # On the new driver, ready, it runs on what it will keep: validation carries on.
    d = driver("new", created=NOW - 50)
    s = step(NodeContext(n, d, "new", pods=[d, back, validator(created=NOW - 10)]))
    assert s.transition is not None and s.transition.to is S.UNCORDON_REQUIRED


def test_a_node_cordoned_before_the_upgrade_is_done_without_an_uncordon() -> None:
    d = driver("new", created=NOW - 50)
    n = node(state=S.VALIDATION_REQUIRED, since=NOW, **{INITIALLY_UNSCHEDULABLE: "true"})
    s = step(NodeContext(n, d, "new", pods=[validator(created=NOW - 10)]))
    assert s.transition is not None and s.transition.to is S.UPGRADE_DONE
    assert s.transition.unschedulable is None
    assert s.transition.annotations[INITIALLY_UNSCHEDULABLE] is None


def test_uncordon_then_done() -> None:
    s = step(NodeContext(node(state=S.UNCORDON_REQUIRED, unschedulable=True), driver(), "new"))
    assert s.transition is not None
    assert s.transition.to is S.UPGRADE_DONE and s.transition.unschedulable is False


# -- failure and recovery ----------------------------------------------------------------


def test_a_failed_node_recovers_once_its_driver_is_in_sync_ready_and_validated() -> None:
    d = driver("new", created=NOW - 50)
    n = node(state=S.UPGRADE_FAILED, **{FAILED_STATE: "validation-required", MESSAGE: "x"})
    waiting = step(NodeContext(n, d, "new", pods=[validator(created=NOW - 10, ready=False)]))
    assert waiting.transition is None
    ok = NodeContext(n, d, "new", pods=[validator(created=NOW - 10)])
    assert to(ok) is S.UNCORDON_REQUIRED
    assert step(NodeContext(n, driver("old"), "new")).transition is None


def test_a_failed_drain_retries_when_the_budget_allows_again() -> None:
    held = gpu_pod("db", gpu=False, labels={"app": "db"})
    n = node(state=S.UPGRADE_FAILED, **{FAILED_STATE: "drain-required"})
    closed = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)
    open_ = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 1)
    drain = {"drain": {"enable": True}}
    assert to(NodeContext(n, driver("old"), "new", pods=[held], pdbs=[closed]), **drain) is None
    retry = step(NodeContext(n, driver("old"), "new", pods=[held], pdbs=[open_]), **drain)
    assert retry.transition is not None and retry.transition.to is S.DRAIN_REQUIRED
    assert "retrying" in retry.transition.reason
    assert to(NodeContext(n, driver("old"), "new", pods=[], pdbs=[closed]), **drain) is (
        S.DRAIN_REQUIRED
    )


def test_a_failed_pod_deletion_retries_when_nothing_blocks_it() -> None:
    n = node(state=S.UPGRADE_FAILED, **{FAILED_STATE: "pod-deletion-required"})
    bare = gpu_pod("bare", owner="")
    assert to(NodeContext(n, driver("old"), "new", pods=[bare])) is None
    assert to(NodeContext(n, driver("old"), "new", pods=[])) is S.POD_DELETION_REQUIRED
    assert (
        to(NodeContext(n, driver("old"), "new", pods=[bare]), podDeletion={"force": True})
        is S.POD_DELETION_REQUIRED
    )


# -- auto upgrade off --------------------------------------------------------------------


def test_cleanup_removes_our_marks_and_uncordons_only_what_we_cordoned() -> None:
    assert cleanup(node()).empty
    ours = cleanup(node(state=S.DRAIN_REQUIRED, unschedulable=True))
    assert ours.transition is not None
    assert ours.transition.to is None and ours.transition.unschedulable is False
    theirs = cleanup(
        node(state=S.DRAIN_REQUIRED, unschedulable=True, **{INITIALLY_UNSCHEDULABLE: "true"})
    )
    assert theirs.transition is not None and theirs.transition.unschedulable is None
    assert INITIALLY_UNSCHEDULABLE in theirs.transition.annotations
    pending = cleanup(node(state=S.UPGRADE_REQUIRED, unschedulable=True))
    assert pending.transition is not None and pending.transition.unschedulable is None


# -- the device plugin's pause around the driver restart ---------------------------------


def _restart_node(plugin: str | None, *, gpus: bool = False, since: float = NOW) -> NodeView:
    n = node(state=S.POD_RESTART_REQUIRED, since=since)
    return replace(n, device_plugin=plugin, gpus_advertised=gpus)


def test_the_node_stops_offering_gpus_before_its_driver_restarts() -> None:
    # A pod tolerating every taint gets past the cordon: first the device plugin is
    # paused, so the node offers no GPU to schedule it on.
    s = step(NodeContext(_restart_node("true", gpus=True), driver("old"), "new"))
    assert s.delete == () and s.transition is not None
    assert s.transition.to is S.POD_RESTART_REQUIRED and s.transition.clients is False
    # Paused, but the node still offers GPUs: the driver stays until they are gone.
    waiting = step(
        NodeContext(_restart_node(DEVICE_PLUGIN_PAUSED, gpus=True), driver("old"), "new")
    )
    assert waiting.empty and "offering GPUs" in waiting.wait
    assert waiting.requeue_after is not None and waiting.requeue_after > 60
    # Gone: the restart goes ahead.
    gone = NodeContext(_restart_node(DEVICE_PLUGIN_PAUSED), driver("old"), "new")
    assert step(gone).delete == (driver("old"),)
    # The takeover's hand-over is a restart too.
    s = step(NodeContext(_restart_node("true"), driver("old"), "old", replacing=True))
    assert s.transition is not None and s.transition.clients is False
    assert not s.transition.release_takeover


def test_another_agents_device_plugin_value_is_never_paused_over() -> None:
    for value in ("false", "paused-for-mig-change", None):
        s = step(NodeContext(_restart_node(value, gpus=False), driver("old"), "new"))
        assert s.delete == (driver("old"),), value
    # A plugin that is not ours keeps advertising: past the timeout the restart goes
    # ahead, guarded by the live re-check of the node's pods alone.
    stuck = _restart_node(DEVICE_PLUGIN_PAUSED, gpus=True, since=NOW - 600)
    assert step(NodeContext(stuck, driver("old"), "new")).delete == (driver("old"),)


def test_no_pause_when_the_driver_needs_no_restart() -> None:
    ready = NodeContext(_restart_node("true", gpus=True), driver("new"), "new")
    s = step(ready)
    assert s.transition is not None and s.transition.to is S.VALIDATION_REQUIRED
    assert s.transition.clients is None


def test_the_device_plugin_resumes_when_the_walk_leaves_the_restart() -> None:
    paused = _restart_node(DEVICE_PLUGIN_PAUSED)
    s = step(NodeContext(paused, driver("new"), "new"))
    assert s.transition is not None and s.transition.to is S.VALIDATION_REQUIRED
    assert s.transition.clients is True and "resumed the device plugin" in s.transition.reason
    # Back to clearing (a GPU pod got on the node) keeps the pause.
    back = step(NodeContext(paused, driver("old"), "new", pods=[gpu_pod()]))
    assert back.transition is not None and back.transition.to is S.POD_DELETION_REQUIRED
    assert back.transition.clients is None
    # A failed node that recovers resumes it.
    failed = replace(node(state=S.UPGRADE_FAILED), device_plugin=DEVICE_PLUGIN_PAUSED)
    recovered = step(NodeContext(failed, driver("new"), "new", pods=[validator(created=NOW)]))
    assert recovered.transition is not None and recovered.transition.clients is True
    # Outside the walk's pause states the value is the driver manager's own: left alone.
    done = replace(node(state=S.UPGRADE_DONE), device_plugin=DEVICE_PLUGIN_PAUSED)
    s = step(NodeContext(done, driver("old"), "new"))
    assert s.transition is not None and s.transition.clients is None


def test_the_validator_is_paused_with_the_device_plugin_and_comes_back_after_the_driver() -> None:
    # The validator leaves with the device plugin (as the reference's driver manager takes
    # it off), so the one that validates the new driver is created after it is ready.
    both = replace(_restart_node("true", gpus=True), validator="true")
    s = step(NodeContext(both, driver("old"), "new"))
    assert s.transition is not None and s.delete == ()
    ops = transition_patch(both, s.transition, NOW)
    for label in (DEVICE_PLUGIN_DEPLOY_LABEL, VALIDATOR_DEPLOY_LABEL):
        path = "/metadata/labels/" + label.replace("/", "~1")
        assert {"op": "test", "path": path, "value": "true"} in ops
        assert {"op": "replace", "path": path, "value": DEVICE_PLUGIN_PAUSED} in ops
    assert "paused the device plugin and the validator" in s.transition.reason
    # Once the new driver is ready both come back in the write that starts validation.
    paused = replace(both, device_plugin=DEVICE_PLUGIN_PAUSED, validator=DEVICE_PLUGIN_PAUSED)
    ready = step(NodeContext(paused, driver("new"), "new"))
    assert ready.transition is not None and ready.transition.to is S.VALIDATION_REQUIRED
    assert "resumed the device plugin and the validator" in ready.transition.reason
    resumed = transition_patch(paused, ready.transition, NOW)
    assert (
        sum(
            op == {"op": "replace", "path": p, "value": "true"}
            for op in resumed
            for p in (
                "/metadata/labels/" + DEVICE_PLUGIN_DEPLOY_LABEL.replace("/", "~1"),
                "/metadata/labels/" + VALIDATOR_DEPLOY_LABEL.replace("/", "~1"),
            )
        )
        == 2
    )
    # A validator label of another agent is left as it is, and the plugin alone pauses.
    theirs = replace(both, validator="false")
    s = step(NodeContext(theirs, driver("old"), "new"))
    assert s.transition is not None
    assert s.transition.reason.startswith("paused the device plugin:")
    path = "/metadata/labels/" + VALIDATOR_DEPLOY_LABEL.replace("/", "~1")
    assert not any(op["path"] == path for op in transition_patch(theirs, s.transition, NOW))


def test_turning_auto_upgrade_off_mid_restart_resumes_the_device_plugin() -> None:
    paused = replace(_restart_node(DEVICE_PLUGIN_PAUSED), unschedulable=True)
    s = cleanup(paused)
    assert s.transition is not None and s.transition.to is None
    assert s.transition.clients is True
    other = replace(paused, device_plugin="paused-for-mig-change")
    s = cleanup(other)
    assert s.transition is not None and s.transition.clients is None


def test_with_the_node_agent_validation_waits_for_its_answer_about_the_new_driver() -> None:
    d = driver("new", created=NOW - 50)
    n = node(state=S.VALIDATION_REQUIRED, since=NOW - 40)
    # No validator pod runs: the agent's answer is enough, once it is about the new driver.
    assert "node agent to report" in step(NodeContext(n, d, "new", pods=[d], agent=True)).wait
    before = replace(n, validated=AgentVerdict("True", "Validated", "ok", since=NOW - 500))
    s = step(NodeContext(before, d, "new", pods=[d], agent=True))
    assert s.transition is None and "validate the new driver" in s.wait
    failing = replace(
        n, validated=AgentVerdict("False", "ToolkitMissing", "no toolkit", since=NOW - 20)
    )
    s = step(NodeContext(failing, d, "new", pods=[d], agent=True))
    assert "ToolkitMissing: no toolkit" in s.wait
    fresh = replace(n, validated=AgentVerdict("True", "Validated", "ok", since=NOW - 10))
    assert to(NodeContext(fresh, d, "new", pods=[d], agent=True)) is S.UNCORDON_REQUIRED
    # The same answer does not pass while a validator pod still validated the old driver.
    stale = validator(created=NOW - 1000)
    assert step(NodeContext(fresh, d, "new", pods=[d, stale], agent=True)).delete == (stale,)
    # Without the agent on, its condition is not read: a validator pod is awaited.
    assert "validator" in step(NodeContext(fresh, d, "new", pods=[d])).wait
