"""The state machine: for one node, from what the cache shows, the next step to take.

`plan_node` is pure: a node, the pods on it, its driver's newest revision, the policy and
the time in, one `Step` out (a state transition, pods to delete or evict, or a reason to
wait). Nothing is remembered between calls; every timeout counts from the time the node
entered its state, which is written on the node with the state itself. So a restarted
operator, reading the same cluster, takes the same step.

The walk (reference state names)::

    unknown/upgrade-done --(driver outdated)--> upgrade-required --(admitted)-->
    cordon-required -> wait-for-jobs-required -> pod-deletion-required
        -> [drain-required, if pod deletion cannot finish and drain is enabled]
        -> pod-restart-required -> validation-required -> uncordon-required -> upgrade-done

and `upgrade-failed` from the steps that can time out or fail. A failed node recovers by
itself when its driver is in sync, ready and validated, or, when clearing the node is what
failed, as soon as what blocked it is gone (the pods, or a PodDisruptionBudget that now
allows a disruption): it goes back and tries that step again.

Admission (upgrade-required -> cordon-required) is not here: it weighs every node of a
pool against the limits (`_limits.admit`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from components.api import LAST_GOOD_IMAGE, ROLLBACK_NODE, DriverUpgradePolicySpec, UpgradeState
from components.upgrade._clearing import (
    deletion_plan,
    describe,
    disruption_blocker,
    drain_plan,
    gpu_pods,
    jobs_running,
)
from components.upgrade._holders import holders_note, with_holders
from components.upgrade._model import NodeView, PdbView
from components.upgrade._names import (
    CORDONED_BY_US,
    DEVICE_PLUGIN_PAUSE_STATES,
    NODE_ANNOTATIONS,
    UPGRADE_REQUESTED,
)
from components.upgrade._patches import client_changes, name_clients
from components.upgrade._pods import PodView
from components.upgrade._restart import RESTART_ONLY_REASON, pod_restart, restart_only
from components.upgrade._retry import DEFAULT_BACKOFF, Backoff, retries, retry_due, retry_target
from components.upgrade._selectors import SelectorError
from components.upgrade._step import (
    DEFAULT_VALIDATION_TIMEOUT,
    NodeContext,
    Step,
    Transition,
    fail_in,
    move_to,
    timed_out,
)
from components.upgrade._times import format_time, format_time_ms
from components.upgrade._validation import Validation, validate

S = UpgradeState


def _finish(ctx: NodeContext, reason: str) -> Step:
    """Validated: uncordon, or stay cordoned when the node was cordoned before the upgrade.
    A node restarted in place was never cordoned: it is done. The driver it validated is
    its last good one from now on (`record_good`); a node a rollback marked is back."""
    if ctx.node.restart_only:
        step = move_to(S.UPGRADE_DONE, f"{reason}; restarted in place", initially=None)
    elif ctx.node.initially_unschedulable:
        reason = f"{reason}; the node stays cordoned as it was"
        step = move_to(S.UPGRADE_DONE, reason, initially=None)
    else:
        step = move_to(S.UNCORDON_REQUIRED, reason)
    step = record_good(ctx, step)
    if ctx.node.annotations.get(ROLLBACK_NODE) == "true" and step.transition is not None:
        # A node the rollback walks back is back (`components.upgrade._rollback`).
        t = step.transition
        back = replace(t, annotations={**t.annotations, ROLLBACK_NODE: "back"})
        step = replace(step, transition=back)
    return step


def plan_node(
    ctx: NodeContext,
    policy: DriverUpgradePolicySpec,
    now: float,
    *,
    validation_timeout: float = DEFAULT_VALIDATION_TIMEOUT,
    backoff: Backoff = DEFAULT_BACKOFF,
) -> Step:
    """The next step for `ctx.node` under `policy` (auto upgrade is on). `backoff`: how
    long a failed node waits before each retry, where the policy's `retryBackoff` does not
    say."""
    ctx = with_holders(ctx)
    if (retry := policy.retry_backoff) is not None:
        backoff = Backoff(initial=retry.initial_seconds, cap=retry.max_seconds)
    step = _resuming(ctx.node, _plan(ctx, policy, now, validation_timeout, backoff))
    d = ctx.driver
    if d is not None and d.kernel_learnt and d.kernel:
        # The node's kernel changed under the pod (`_kernels`): the kernel it was loaded for
        # goes on it with the step the mismatch starts, so a restart of ours resumes from it.
        return replace(step, record_kernel=d.kernel)
    return step


def _resuming(node: NodeView, step: Step) -> Step:
    """`step`, resuming the driver's clients (the device plugin, the validator) when its
    transition leaves the states the walk pauses them in (a retry back into one of them
    keeps the pause)."""
    t = step.transition
    if (
        t is None
        or not node.clients_paused
        or node.state not in DEVICE_PLUGIN_PAUSE_STATES
        or (t.to is not None and t.to in DEVICE_PLUGIN_PAUSE_STATES)
    ):
        return step
    resumed = replace(t, clients=True)
    named = name_clients(client_changes(node, resumed))
    return replace(step, transition=replace(resumed, reason=_with(t.reason, f"resumed {named}")))


def _with(reason: str, more: str) -> str:
    return f"{reason}; {more}" if reason else more


def _plan(
    ctx: NodeContext,
    policy: DriverUpgradePolicySpec,
    now: float,
    validation_timeout: float,
    backoff: Backoff,
) -> Step:
    node = ctx.node
    state = node.state
    if state in (S.UNKNOWN, S.UPGRADE_DONE):
        return _detect(ctx)
    if state is S.UPGRADE_REQUIRED:
        if ctx.driver is not None and not ctx.driver.terminating and ctx.outdated() is None:
            in_sync = move_to(S.UPGRADE_DONE, "the driver is in sync again", initially=None)
            return record_good(ctx, in_sync)
        if node.skip:
            return Step(wait="the node is labelled to skip driver upgrades")
        return Step(wait="waiting for an upgrade slot")
    if state is S.CORDON_REQUIRED:
        if restart_only(ctx):
            return in_place()
        # Cordoned by someone else before the upgrade began: it stays cordoned after it.
        initially = "true" if node.unschedulable else None
        return move_to(
            S.WAIT_FOR_JOBS_REQUIRED,
            "cordoned the node",
            unschedulable=True,
            initially=initially,
            cordoned=format_time_ms(now),
        )
    if state is S.WAIT_FOR_JOBS_REQUIRED:
        return _wait_for_jobs(ctx, policy, now)
    if state is S.POD_DELETION_REQUIRED:
        return _pod_deletion(ctx, policy, now)
    if state is S.DRAIN_REQUIRED:
        return _drain(ctx, policy, now)
    if state is S.POD_RESTART_REQUIRED:
        return pod_restart(ctx, now, validation_timeout)
    if state is S.VALIDATION_REQUIRED:
        return _validation(ctx, now, validation_timeout)
    if state is S.UNCORDON_REQUIRED:
        return move_to(S.UPGRADE_DONE, "uncordoned the node", unschedulable=False, initially=None)
    return _failed(ctx, policy, now, backoff)


def in_place(reason: str = RESTART_ONLY_REASON) -> Step:
    """Admitted, restart-only (`_restart.restart_only`): to the driver's restart, uncordoned."""
    return move_to(S.POD_RESTART_REQUIRED, reason, restart_only="true")


def _detect(ctx: NodeContext) -> Step:
    d = ctx.driver
    if d is None or d.terminating:
        return Step()
    reason = ctx.outdated()
    if reason is not None:
        # A node cordoned before its upgrade stays cordoned after it.
        initially = "true" if ctx.node.unschedulable else None
        required = move_to(S.UPGRADE_REQUIRED, reason, initially=initially)
        # The driver it ran done is its last good one, should this walk need undoing.
        return record_good(ctx, required) if ctx.node.state is S.UPGRADE_DONE else required
    if ctx.node.state is S.UNKNOWN:
        return record_good(ctx, move_to(S.UPGRADE_DONE, "the driver is in sync"))
    return Step()


def record_good(ctx: NodeContext, step: Step) -> Step:
    """`step`, recording the image of the driver the node runs (in sync and done, or just
    validated) as its last good one (`components.api.LAST_GOOD_IMAGE`): what a rollback
    brings it back to. Only ever with a transition the walk writes anyway."""
    t = step.transition
    image = ctx.driver.image if ctx.driver is not None else None
    if t is None or not image:
        return step
    annotations = {**t.annotations, LAST_GOOD_IMAGE: image}
    return replace(step, transition=replace(t, annotations=annotations))


def _wait_for_jobs(ctx: NodeContext, policy: DriverUpgradePolicySpec, now: float) -> Step:
    spec = policy.wait_for_completion
    if not spec.pod_selector:
        return move_to(S.POD_DELETION_REQUIRED, "no jobs to wait for")
    try:
        running = jobs_running(ctx.pods, spec.pod_selector)
    except SelectorError as exc:
        return Step(wait=f"waitForCompletion.podSelector is invalid: {exc}")
    if not running:
        return move_to(S.POD_DELETION_REQUIRED, "the jobs finished")
    expired, left = timed_out(ctx.node, spec.timeout_seconds, now)
    if expired:
        return move_to(
            S.POD_DELETION_REQUIRED,
            f"stopped waiting for {describe(running)} after {spec.timeout_seconds}s",
        )
    return Step(
        wait=f"waiting for {describe(running)} to complete" + _until(ctx.node, left, now),
        requeue_after=left,
        explains=True,
    )


def _pod_deletion(ctx: NodeContext, policy: DriverUpgradePolicySpec, now: float) -> Step:
    spec = policy.pod_deletion
    plan = deletion_plan(ctx.pods, spec)
    drain = policy.drain.enable
    if plan.blocked:
        reason = "cannot delete " + "; ".join(str(b) for b in plan.blocked[:3])
        reason += holders_note(ctx, [b.pod for b in plan.blocked])
        if drain:
            return move_to(S.DRAIN_REQUIRED, f"{reason}: draining the node instead")
        return fail_in(S.POD_DELETION_REQUIRED, reason)
    if plan.clear:
        return move_to(S.POD_RESTART_REQUIRED, "no GPU pods left on the node")
    expired, left = timed_out(ctx.node, spec.timeout_seconds, now)
    if expired:
        reason = (
            f"GPU pods {describe(plan.remaining)} still on the node after {spec.timeout_seconds}s"
            + holders_note(ctx, plan.remaining)
        )
        if drain:
            return move_to(S.DRAIN_REQUIRED, f"{reason}: draining the node instead")
        return fail_in(S.POD_DELETION_REQUIRED, reason)
    return Step(
        delete=plan.act,
        wait=f"waiting for GPU pods {describe(plan.remaining)} to be deleted"
        + holders_note(ctx, plan.remaining)
        + _until(ctx.node, left, now),
        requeue_after=left,
        explains=True,
    )


def _drain(ctx: NodeContext, policy: DriverUpgradePolicySpec, now: float) -> Step:
    spec = policy.drain
    gpu = gpu_pods(ctx.pods)
    if not spec.enable:
        if gpu:
            return move_to(S.POD_DELETION_REQUIRED, "drain is disabled; deleting the GPU pods")
        return move_to(S.POD_RESTART_REQUIRED, "drain is disabled and no GPU pods are left")
    try:
        plan = drain_plan(ctx.pods, spec, operator_pod=ctx.operator_pod)
    except SelectorError as exc:
        return Step(wait=f"drain.podSelector is invalid: {exc}")
    if plan.blocked:
        reason = "cannot drain " + "; ".join(str(b) for b in plan.blocked[:3])
        return fail_in(S.DRAIN_REQUIRED, reason)
    if not plan.clear:
        expired, left = timed_out(ctx.node, spec.timeout_seconds, now)
        if expired:
            return fail_in(
                S.DRAIN_REQUIRED,
                f"drain timed out after {spec.timeout_seconds}s; still on the node: "
                + _held(plan.remaining, ctx.pdbs),
            )
        return Step(
            evict=plan.act,
            wait=f"waiting for {_held(plan.remaining, ctx.pdbs)} to be evicted"
            + _until(ctx.node, left, now),
            requeue_after=left,
            explains=True,
        )
    if gpu:
        return fail_in(
            S.DRAIN_REQUIRED,
            f"GPU pods {describe(gpu)} are not drained (drain skips them) and would keep "
            "running on the old driver",
        )
    return move_to(S.POD_RESTART_REQUIRED, "drained the node")


def _held(pods: tuple[PodView, ...], pdbs: Sequence[PdbView], limit: int = 3) -> str:
    """`work/db (PodDisruptionBudget work/db-pdb allows no disruption), work/x and 2 more`:
    the pods still to go, each naming the budget that refuses its eviction now."""
    named = [
        f"{p.key} (PodDisruptionBudget {b.namespace}/{b.name} allows no disruption)"
        if (b := disruption_blocker(p, pdbs)) is not None
        else p.key
        for p in pods[:limit]
    ]
    more = f" and {len(pods) - limit} more" if len(pods) > limit else ""
    return ", ".join(named) + more


def _until(node: NodeView, left: float | None, now: float) -> str:
    """`; gives up at 2026-12-07T18:30:00Z`: when the wait times out (a moment, not a
    count-down, so the status does not change while nothing else does)."""
    if left is None or node.since is None:
        return ""
    return f"; gives up at {format_time(now + left)}"


def _validation(ctx: NodeContext, now: float, timeout: float) -> Step:
    d = ctx.driver
    if d is not None and not d.terminating and ctx.outdated(requested=False) is not None:
        return move_to(S.POD_RESTART_REQUIRED, "the driver changed again")
    expired, left = timed_out(ctx.node, timeout, now)
    if d is None or d.terminating or not d.ready:
        # A pod tolerating every taint (the cordon's too) can be scheduled back while the
        # driver restarts: clear the node again before that pod runs on no driver. (A
        # restart in place keeps the driver loaded: its GPU pods stay.)
        restarting = not ctx.node.restart_only
        live = [p for p in gpu_pods(ctx.pods) if not p.terminating and restarting]
        if live:
            return move_to(
                S.POD_DELETION_REQUIRED,
                f"GPU pods {describe(live)} appeared on the node while its driver restarts",
            )
        if expired:
            return fail_in(S.VALIDATION_REQUIRED, f"the driver was not ready within {timeout:.0f}s")
        return Step(wait="waiting for the driver pod to be ready", requeue_after=left)
    result = _validate(ctx, d)
    if result.passed:
        return _finish(ctx, "the validator passed")
    if expired:
        return fail_in(
            S.VALIDATION_REQUIRED,
            f"validation did not pass within {timeout:.0f}s (waiting for {result.waiting_for})",
        )
    return Step(delete=result.stale, wait=f"waiting for {result.waiting_for}", requeue_after=left)


def _validate(ctx: NodeContext, driver: PodView) -> Validation:
    """The node's validation as the walk judges it, in a walk and after a failure alike."""
    return validate(
        driver,
        ctx.pods,
        agent=ctx.agent,
        verdict=ctx.node.validated,
        in_place=ctx.node.restart_only,
    )


def _current(ctx: NodeContext) -> bool:
    """The driver pod is really the one the policy wants now: live, ready, its revision the
    DaemonSet's newest as known (not merely "no newer one is known": with the revisions not
    cached yet, `outdated` has nothing to compare with), and no restart asked of it left."""
    d = ctx.driver
    return (
        d is not None
        and not d.terminating
        and d.ready
        and ctx.target_revision is not None
        and ctx.outdated() is None
    )


def _failed(
    ctx: NodeContext, policy: DriverUpgradePolicySpec, now: float, backoff: Backoff
) -> Step:
    """A failed node recovers when its driver is current and validated; otherwise the
    failed step is tried again, at once when what blocked it is gone, else after the
    backoff (`_retry`)."""
    node = ctx.node
    d = ctx.driver
    outdated = ctx.outdated(requested=False) if d is not None and not d.terminating else None
    if node.annotations.get(ROLLBACK_NODE) == "true" and outdated is not None:
        # A rollback pinned the driver back (`components.api.pinned_image`): the node walks
        # back through the same steps at once, keeping the slot its failure holds.
        return move_to(S.WAIT_FOR_JOBS_REQUIRED, f"rolling back: {outdated}")
    stale: tuple[PodView, ...] = ()
    target = retry_target(node.failed_state)
    if d is not None and _current(ctx):
        result = _validate(ctx, d)
        if result.passed:
            return _finish(ctx, "recovered: the driver is current, ready and validated")
        stale = result.stale
        target = S.VALIDATION_REQUIRED  # the new driver runs: only validation is left
    due = retry_due(node, backoff, now)
    attempt = retries(node) + 1
    retry = _blocker_gone(ctx, policy) if target is node.failed_state else None
    if retry is None and due is not None and due.due:
        retry = f"{backoff.delay(attempt - 1):.0f}s after the failure"
    if retry is not None:
        return move_to(target, f"retrying (retry {attempt}): {retry}", retries=str(attempt))
    why = f"upgrade failed: {node.message or 'see the node events'}"
    if due is None:
        return Step(delete=stale, wait=why, explains=True)
    return Step(
        delete=stale,
        wait=f"{why}; retry {attempt} at {format_time(now + due.left)}",
        requeue_after=due.left,
        explains=True,
    )


def _blocker_gone(ctx: NodeContext, policy: DriverUpgradePolicySpec) -> str | None:
    """Why clearing the node, which failed, can be tried again now (None: it cannot)."""
    failed = ctx.node.failed_state
    if failed is S.POD_DELETION_REQUIRED:
        plan = deletion_plan(ctx.pods, policy.pod_deletion)
        if not plan.blocked and not plan.waiting:
            return "nothing blocks deleting the GPU pods any more"
    elif failed is S.DRAIN_REQUIRED and policy.drain.enable:
        try:
            drain = drain_plan(ctx.pods, policy.drain, operator_pod=ctx.operator_pod)
        except SelectorError:
            return None
        if (
            not drain.blocked
            and not drain.waiting
            and all(disruption_blocker(p, ctx.pdbs) is None for p in drain.act)
            and all(p in drain.act for p in gpu_pods(ctx.pods))
        ):
            return "nothing blocks the drain any more"
    return None


def cleanup(node: NodeView) -> Step:
    """Auto upgrade is off (or the node is no longer managed): take the upgrade's labels
    and annotations off, and uncordon a node the upgrade cordoned."""
    ours = [k for k in NODE_ANNOTATIONS if k in node.annotations and k != UPGRADE_REQUESTED]
    if node.state_label is None and not ours:
        return Step()
    uncordon = (
        node.state in CORDONED_BY_US
        and node.unschedulable
        and not node.initially_unschedulable
        and not node.restart_only
    )
    resume = node.state in DEVICE_PLUGIN_PAUSE_STATES and node.clients_paused
    clear = Transition(
        None, unschedulable=False if uncordon else None, clients=True if resume else None
    )
    resumed = name_clients(client_changes(node, clear))
    return Step(
        transition=replace(
            clear,
            reason="driver auto upgrade is off: the upgrade state is cleared"
            + ("; uncordoned the node it had cordoned" if uncordon else "")
            + (f"; resumed {resumed}" if resumed else ""),
            annotations=dict.fromkeys(ours),
        )
    )
