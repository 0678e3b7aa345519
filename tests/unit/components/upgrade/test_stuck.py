"""Stuck states explain themselves: what a waiting node names, when a failed node is tried
again, and when it counts as recovered. The clock comes in (`NOW`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from components.api import GPU_PROCESSES_ANNOTATION, UpgradeState
from components.upgrade import (
    FAILED_STATE,
    MESSAGE,
    RETRIES,
    STATE_SINCE,
    Backoff,
    NodeContext,
    PdbView,
    Step,
    failing,
    format_time,
    plan_node,
    transition_patch,
)

from .builders import NOW, NS, driver, gpu_pod, node, policy, validator

S = UpgradeState
FAST = Backoff(initial=10, cap=60)


def step(ctx: NodeContext, now: float = NOW, **fields: object) -> Step:
    return plan_node(ctx, policy(**fields), now, backoff=FAST)


def failed(since: float, state: str = "drain-required", retries: int = 0, **more: str):  # type: ignore[no-untyped-def]
    ann = {FAILED_STATE: state, MESSAGE: "drain timed out after 300s", **more}
    if retries:
        ann[RETRIES] = str(retries)
    return node(state=S.UPGRADE_FAILED, since=since, unschedulable=True, **ann)


# -- recovery only when current and validated -------------------------------------------


def test_a_failed_node_does_not_recover_while_its_drivers_revision_is_not_known() -> None:
    # The DaemonSet's newest revision is not known (its ControllerRevisions not cached
    # yet): an old driver pod, ready, with a validator newer than it, is not "in sync".
    n = failed(NOW - 5, "pod-deletion-required")
    ctx = NodeContext(n, driver("old", created=NOW - 500), None, pods=[validator(created=NOW - 50)])
    s = step(ctx)
    assert s.transition is None or s.transition.to not in (S.UNCORDON_REQUIRED, S.UPGRADE_DONE)


def test_a_failed_node_does_not_recover_before_a_requested_restart_happened() -> None:
    n = failed(
        NOW - 5, "pod-deletion-required", **{"nvidia.com/gpu-driver-upgrade-requested": "true"}
    )
    ctx = NodeContext(
        n, driver("new", created=NOW - 500), "new", pods=[validator(created=NOW - 50)]
    )
    s = step(ctx)
    assert s.transition is None or s.transition.to not in (S.UNCORDON_REQUIRED, S.UPGRADE_DONE)


def test_a_failed_node_recovers_when_current_and_validated() -> None:
    d = driver("new", created=NOW - 60)
    ok = NodeContext(failed(NOW - 5), d, "new", pods=[validator(created=NOW - 30)])
    assert (s := step(ok)).transition is not None and s.transition.to is S.UNCORDON_REQUIRED
    stale = NodeContext(failed(NOW - 5), d, "new", pods=[validator(created=NOW - 90)])
    s = step(stale)
    assert s.transition is None and s.delete  # the old validator goes first


# -- retry with backoff -----------------------------------------------------------------


def test_backoff_doubles_and_is_bounded() -> None:
    assert [FAST.delay(n) for n in range(6)] == [10, 20, 40, 60, 60, 60]


def test_a_failed_node_waits_its_backoff_then_retries_the_failed_step() -> None:
    held = gpu_pod("db", gpu=False, labels={"app": "db"})
    closed = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)
    drain = {"drain": {"enable": True}}

    def at(now: float, retries: int) -> Step:
        ctx = NodeContext(
            failed(NOW, retries=retries), driver("old"), "new", pods=[held], pdbs=[closed]
        )
        return step(ctx, now, **drain)

    waiting = at(NOW + 9, 0)
    assert waiting.transition is None and waiting.requeue_after == pytest.approx(1)
    assert f"retry 1 at {format_time(NOW + 10)}" in waiting.wait and waiting.explains
    retry = at(NOW + 10, 0).transition
    assert retry is not None and retry.to is S.DRAIN_REQUIRED
    assert retry.annotations[RETRIES] == "1"
    # The third retry waits 40s, the fifth is held at the cap.
    assert at(NOW + 39, 2).transition is None
    assert at(NOW + 40, 2).transition is not None
    assert at(NOW + 59, 9).transition is None
    assert at(NOW + 60, 9).transition is not None


def test_a_retry_keeps_its_count_through_the_next_failure_and_done_clears_it() -> None:
    retrying = node(state=S.DRAIN_REQUIRED, since=NOW - 400, **{RETRIES: "2"})
    ctx = NodeContext(retrying, driver("old"), "new", pods=[gpu_pod("db", labels={"app": "db"})])
    s = step(ctx, drain={"enable": True, "timeoutSeconds": 300})
    assert s.transition is not None and s.transition.to is S.UPGRADE_FAILED
    patch = transition_patch(retrying, s.transition, NOW)
    assert not any(RETRIES.replace("/", "~1") in op["path"] for op in patch)
    done = node(state=S.UNCORDON_REQUIRED, **{RETRIES: "2"})
    t = step(NodeContext(done, driver("new"), "new")).transition
    assert t is not None
    assert any(
        op["op"] == "remove" and op["path"].endswith("retries")
        for op in transition_patch(done, t, NOW)
    )


def test_a_node_retrying_after_a_failure_still_counts_against_the_budget() -> None:
    retrying = node("n2", state=S.DRAIN_REQUIRED, **{RETRIES: "1"})
    assert [name for name, _ in failing([failed(NOW), retrying, node("n3", S.DRAIN_REQUIRED)])] == [
        "n1",
        "n2",
    ]


# -- what a waiting node names -----------------------------------------------------------


def test_a_drain_wait_names_the_disruption_budget_that_refuses_the_eviction() -> None:
    held = gpu_pod("db", labels={"app": "db"})
    closed = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)
    n = node(state=S.DRAIN_REQUIRED, since=NOW - 10)
    s = step(
        NodeContext(n, driver("old"), "new", pods=[held], pdbs=[closed]), drain={"enable": True}
    )
    assert "work/db (PodDisruptionBudget work/db-pdb allows no disruption)" in s.wait
    assert f"gives up at {format_time(NOW + 290)}" in s.wait
    assert s.explains


def _processes(*entries: dict[str, object]) -> dict[str, str]:
    return {GPU_PROCESSES_ANNOTATION: json.dumps(list(entries))}


def test_a_pod_using_a_gpu_without_requesting_one_is_cleared_and_named() -> None:
    sneaky = gpu_pod("sneaky", gpu=False)
    entry = {
        "gpu": "GPU-1",
        "index": 0,
        "pid": 4242,
        "mig": None,
        "podUID": sneaky.uid,
        "pod": sneaky.key,
    }
    n = replace(
        node(state=S.POD_DELETION_REQUIRED, since=NOW - 10),
        processes=_processes(entry)[GPU_PROCESSES_ANNOTATION],
    )
    with_agent = step(NodeContext(n, driver("old"), "new", pods=[sneaky], agent=True))
    assert [p.key for p in with_agent.delete] == ["work/sneaky"]
    assert "work/sneaky uses GPU 0 (process 4242) without requesting one" in with_agent.wait
    # Without the agent no list is current enough to act on: the pod is not a GPU pod.
    without = step(NodeContext(n, driver("old"), "new", pods=[sneaky]))
    assert without.transition is not None and without.transition.to is S.POD_RESTART_REQUIRED
    # An operand in the driver's namespace is never taken for one.
    operand = replace(sneaky, namespace=NS)
    entry_op = {**entry, "pod": operand.key}
    n_op = replace(n, processes=_processes(entry_op)[GPU_PROCESSES_ANNOTATION])
    s = step(NodeContext(n_op, driver("old"), "new", pods=[operand], agent=True))
    assert not s.delete


def test_a_process_outside_any_pod_is_named_while_the_driver_does_not_come_up() -> None:
    entry = {"gpu": "GPU-1", "index": 1, "pid": 777, "mig": None, "podUID": "", "pod": ""}
    n = replace(
        node(state=S.POD_RESTART_REQUIRED, since=NOW - 10),
        processes=_processes(entry)[GPU_PROCESSES_ANNOTATION],
    )
    s = step(NodeContext(n, driver("new", ready=False), "new", agent=True))
    assert s.transition is None
    assert "process 777 outside any pod holds GPU 1" in s.wait and s.explains


def test_a_driver_pod_never_ready_fails_the_node_after_the_timeout() -> None:
    # An image that cannot be pulled never crash-loops: only the timeout ends the wait.
    def at(since: float) -> Step:
        n = node(state=S.POD_RESTART_REQUIRED, since=since)
        return plan_node(
            NodeContext(n, driver("new", ready=False), "new"),
            policy(),
            NOW,
            validation_timeout=600,
            backoff=FAST,
        )

    waiting = at(NOW - 10)
    assert waiting.transition is None and waiting.requeue_after == pytest.approx(590)
    t = at(NOW - 600).transition
    assert t is not None and t.to is S.UPGRADE_FAILED
    assert t.reason == "driver pod gpu-operator/driver-abc was not ready within 600s"
    assert t.annotations[FAILED_STATE] == S.POD_RESTART_REQUIRED.value


def test_the_policys_retry_backoff_sets_the_wait() -> None:
    n = failed(NOW, retries=1)
    ctx = NodeContext(n, driver("old"), "new", pods=[gpu_pod("db", labels={"app": "db"})])
    closed = [PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)]
    ctx = NodeContext(n, ctx.driver, "new", pods=ctx.pods, pdbs=closed)
    p = policy(drain={"enable": True}, retryBackoff={"initialSeconds": 100, "maxSeconds": 150})
    assert plan_node(ctx, p, NOW + 149, backoff=FAST).transition is None  # 100 * 2, capped
    assert plan_node(ctx, p, NOW + 150, backoff=FAST).transition is not None


def test_validate_refuses_bad_retry_backoff_values_by_name() -> None:
    from components.offline import validate_text

    text = """
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  driver:
    upgradePolicy:
      retryBackoff: {initialSeconds: 600, maxSeconds: 60}
"""
    problems = {p.path: p.message for _, p in validate_text(text, "cp.yaml").problems}
    assert list(problems) == ["spec.driver.upgradePolicy.retryBackoff.maxSeconds"]
    assert "initialSeconds" in problems["spec.driver.upgradePolicy.retryBackoff.maxSeconds"]
    negative = text.replace("{initialSeconds: 600, maxSeconds: 60}", "{initialSeconds: -1}")
    paths = [p.path for _, p in validate_text(negative, "cp.yaml").problems]
    assert paths == ["spec.driver.upgradePolicy.retryBackoff.initialSeconds"]


def test_an_initial_backoff_of_zero_retries_only_once_what_blocked_is_gone() -> None:
    held = gpu_pod("db", gpu=False, labels={"app": "db"})
    closed = PdbView("work", "db-pdb", {"matchLabels": {"app": "db"}}, 0)
    open_ = replace(closed, disruptions_allowed=1)
    never = Backoff(initial=0)

    def at(now: float, pdb: PdbView) -> Step:
        ctx = NodeContext(failed(NOW), driver("old"), "new", pods=[held], pdbs=[pdb])
        return plan_node(ctx, policy(drain={"enable": True}), now, backoff=never)

    stuck = at(NOW + 86_400, closed)
    assert stuck.transition is None and stuck.requeue_after is None
    assert stuck.wait == "upgrade failed: drain timed out after 300s"
    t = at(NOW + 1, open_).transition
    assert t is not None and t.to is S.DRAIN_REQUIRED and t.annotations[RETRIES] == "1"


def test_a_driver_pod_that_never_comes_back_fails_the_node_after_the_timeout() -> None:
    n = node(state=S.POD_RESTART_REQUIRED, since=NOW - 600)
    t = plan_node(NodeContext(n, None, "new"), policy(), NOW, validation_timeout=600).transition
    assert t is not None and t.to is S.UPGRADE_FAILED
    assert t.reason == "waited 600s for the driver pod to be recreated"
    early = replace(n, annotations={**n.annotations, STATE_SINCE: format_time(NOW - 10)})
    s = plan_node(NodeContext(early, None, "new"), policy(), NOW, validation_timeout=600)
    assert s.transition is None and s.requeue_after == pytest.approx(590)
