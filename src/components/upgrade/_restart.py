"""The restart step of the walk: the one moment a node's driver goes away.

Everything before it exists to make this safe (no GPU pod on the node, the cordon seen by
the scheduler); everything here re-checks that, because a pod that tolerates every taint
can still be bound: GPU pods that appeared send the node back to clearing, and the device
plugin is paused so the node stops offering GPUs before the driver restarts.
"""

from __future__ import annotations

from dataclasses import replace

from components.api import UpgradeState
from components.upgrade._clearing import describe, gpu_pods
from components.upgrade._holders import holders_note
from components.upgrade._model import NodeView
from components.upgrade._names import (
    CORDON_SETTLE_SECONDS,
    DEVICE_PLUGIN_PAUSE_TIMEOUT,
    DEVICE_PLUGIN_PAUSED,
    UPGRADE_REQUESTED,
)
from components.upgrade._patches import client_changes, name_clients
from components.upgrade._pods import PodView
from components.upgrade._step import (
    DEFAULT_VALIDATION_TIMEOUT,
    NodeContext,
    Step,
    Transition,
    fail_in,
    move_to,
    timed_out,
)

S = UpgradeState


def _settling(node: NodeView, now: float) -> Step | None:
    """A wait while the cordon may not have reached the scheduler yet: a pod it placed
    from an older view can still be bound to the node, and must be seen before the driver
    goes. A node without the cordon time (cordoned by an older operator) has settled.

    This is a timer because the scheduler gives no signal to wait for: it publishes
    neither the resourceVersion of the Node it last saw nor the bindings it has in flight
    (a decision taken from a pre-cordon snapshot is bound asynchronously, after Permit
    plugins that may hold it for minutes), and the API server binds a pod to a cordoned
    node without a check. So no wait, timed or not, bounds that race.

    What does bound it, for the pods a driver restart endangers, is the node itself: once
    its allocatable shows no GPU, the kubelet's device manager has no device left to admit
    a GPU pod with, so a GPU pod bound from any stale view fails admission and never runs;
    and a GPU pod bound before that is already on the server, where the live re-check
    right before the restart (`NodeReconciler._gpu_pod_arrived`) finds it. So the timer
    only holds a node that still offers GPUs: a device plugin that is not ours, or one
    past `DEVICE_PLUGIN_PAUSE_TIMEOUT`; there it is the best guess there is."""
    cordoned = node.cordoned_at
    if cordoned is None or not node.gpus_advertised:
        return None
    left = cordoned + CORDON_SETTLE_SECONDS - now
    if left <= 0:
        return None
    return Step(wait="letting the cordon reach the scheduler", requeue_after=left)


def _pausing(node: NodeView, now: float) -> Step | None:
    """Before the driver restarts, the node must stop offering GPUs: a pod that tolerates
    every taint gets past the cordon, but never past a node with no GPU to give. The device
    plugin is paused (its DaemonSet selects `true`), then the node's allocatable awaited.
    A value of another agent (`false`, a MIG change's pause) keeps the plugin off anyway.
    The validator is paused in the same write (it needs no waiting for: it holds nothing),
    and resumed with the device plugin once the new driver is ready, so the validator that
    then starts is the one that validates the new driver."""
    pause = Transition(S.POD_RESTART_REQUIRED, clients=False)
    changes = client_changes(node, pause)
    if changes:
        why = "the node stops offering GPUs before its driver restarts"
        if node.device_plugin != "true":
            why = "it validates the driver again once the new one is ready"
        return Step(
            transition=replace(pause, reason=f"paused {name_clients(changes)}: {why}"),
            wait="pausing the driver's clients",
        )
    if node.device_plugin != DEVICE_PLUGIN_PAUSED or not node.gpus_advertised:
        return None
    expired, left = timed_out(node, DEVICE_PLUGIN_PAUSE_TIMEOUT, now)
    if expired:
        return None  # a device plugin not ours advertises: the live re-check alone guards
    return Step(wait="waiting for the node to stop offering GPUs", requeue_after=left)


def restart_only(ctx: NodeContext) -> bool:
    """Whether the node's driver pod is out of date only in what does not change the
    install, so it is restarted in place (the reference's restart-only, 26.7): its revision
    is not the DaemonSet's newest, but the `DRIVER_CONFIG_DIGEST` it was installed with is
    the template's. The new driver container finds the driver it would install loaded and
    keeps it (no unload, no rebuild): GPU pods keep running, so nothing is cordoned,
    cleared or paused. A digest missing on either side, a driver of the reference operator
    to replace, a precompiled pin to move, a kernel change and an upgrade an admin asked
    for all take the full walk."""
    d = ctx.driver
    if d is None or ctx.replacing or ctx.node.upgrade_requested:
        return False
    if ctx.target_revision is None or d.revision == ctx.target_revision:
        return False  # in sync, or not known: nothing to restart in place
    if d.config_digest is None or d.config_digest != ctx.target_digest:
        return False
    if _wanted_pin(ctx) != ctx.node.pinned_kernel:
        return False
    kernel = ctx.node.kernel
    if d.kernel is not None and kernel is not None and d.kernel != kernel:
        return False
    return ctx.precompiled is None or d.pinned == ctx.precompiled


RESTART_ONLY_REASON = (
    "restarting the driver in place: its DRIVER_CONFIG_DIGEST is the template's, so the "
    "install is unchanged (no cordon, no drain; GPU pods keep running)"
)


def _coming_up(ctx: NodeContext, d: PodView, now: float, timeout: float) -> Step:
    """The new driver pod is not ready yet: it fails the node when it keeps crashing or
    is not ready in `timeout` (from entering pod-restart-required: an image that cannot
    be pulled never crashes), naming what holds the GPU the old module cannot let go."""
    held = holders_note(ctx, ())
    if d.failing:
        return fail_in(S.POD_RESTART_REQUIRED, f"driver pod {d.key} keeps failing{held}")
    expired, left = timed_out(ctx.node, timeout, now)
    if expired:
        reason = f"driver pod {d.key} was not ready within {timeout:.0f}s{held}"
        return fail_in(S.POD_RESTART_REQUIRED, reason)
    return Step(
        wait=f"waiting for driver pod {d.key} to be ready{held}",
        requeue_after=left,
        explains=bool(held),
    )


def _timed(ctx: NodeContext, now: float, timeout: float, what: str) -> Step:
    """A wait on the driver's DaemonSet (a pod that does not go, or does not come: a node
    its template no longer selects, a finalizer) that fails the node after `timeout`."""
    expired, left = timed_out(ctx.node, timeout, now)
    if expired:
        return fail_in(S.POD_RESTART_REQUIRED, f"waited {timeout:.0f}s for {what}")
    return Step(wait=f"waiting for {what}", requeue_after=left)


def _restart_in_place(ctx: NodeContext, now: float, timeout: float) -> Step:
    """`pod-restart-required` on a restart-only node: delete the driver pod (its DaemonSet
    recreates it at the newest revision) and wait for the new one to be ready. No GPU pod
    is looked for: the driver stays loaded. If the template changed meanwhile in what the
    driver is installed with, the node takes the full walk from the cordon."""
    d = ctx.driver
    if d is None:
        return _timed(ctx, now, timeout, "the driver pod to be recreated")
    if d.terminating:
        return _timed(ctx, now, timeout, f"driver pod {d.key} to terminate")
    reason = ctx.outdated()
    if reason is not None:
        if not restart_only(ctx):
            return move_to(
                S.CORDON_REQUIRED,
                f"the driver's install changed ({reason}): taking the full walk",
                restart_only=None,
            )
        return Step(delete=(d,), wait=f"restarting the driver in place: {reason}")
    if d.ready:
        return move_to(S.VALIDATION_REQUIRED, f"driver pod {d.key} is ready (restarted in place)")
    return _coming_up(ctx, d, now, timeout)


def pod_restart(ctx: NodeContext, now: float, timeout: float = DEFAULT_VALIDATION_TIMEOUT) -> Step:
    """`pod-restart-required`: the node is cleared; pause the device plugin, let the cordon
    settle, then restart the driver (delete its pod, move the pin, or hand the node over
    from the reference operator), and wait for the new one to be ready."""
    if ctx.node.restart_only:
        return _restart_in_place(ctx, now, timeout)
    gpu = gpu_pods(ctx.pods)
    live = [p for p in gpu if not p.terminating]
    if live:
        return move_to(S.POD_DELETION_REQUIRED, f"GPU pods {describe(live)} appeared on the node")
    if gpu:
        return Step(
            wait=f"waiting for GPU pods {describe(gpu)} to terminate" + holders_note(ctx, gpu),
            explains=True,
        )
    d = ctx.driver
    if d is None:
        return _timed(ctx, now, timeout, "the driver pod to be recreated")
    if d.terminating:
        return _timed(ctx, now, timeout, f"driver pod {d.key} to terminate")
    pin = _wanted_pin(ctx)
    restart = ctx.replacing or pin != ctx.node.pinned_kernel or ctx.outdated() is not None
    if restart and (pausing := _pausing(ctx.node, now)) is not None:
        return pausing
    if ctx.replacing:
        return _hand_over(ctx, d, now)
    if restart and (settling := _settling(ctx.node, now)) is not None:
        return settling
    if pin != ctx.node.pinned_kernel:
        # The pin picks the DaemonSet (a precompiled one per kernel, or the per-OS one when
        # unpinned): deleting the pod would only bring the same driver back. Moving the pin
        # hands the node to the right DaemonSet, whose controller replaces the pod.
        what = f"the precompiled driver for kernel {pin}" if pin else "the per-OS driver"
        return Step(
            transition=Transition(
                S.POD_RESTART_REQUIRED,
                f"moved the node to {what}",
                annotations={UPGRADE_REQUESTED: None} if ctx.node.upgrade_requested else {},
                pin_kernel=pin or "",
            ),
            wait=f"restarting the driver: moving the node to {what}",
        )
    reason = ctx.outdated()
    if reason is not None:
        wait = f"restarting the driver: {reason}"
        if ctx.node.upgrade_requested:
            # The request is served by this restart: clear it (after the delete).
            return Step(
                delete=(d,),
                wait=wait,
                transition=Transition(
                    S.POD_RESTART_REQUIRED,
                    "restarting the driver as requested",
                    annotations={UPGRADE_REQUESTED: None},
                ),
            )
        return Step(delete=(d,), wait=wait)
    if d.ready:
        return move_to(S.VALIDATION_REQUIRED, f"driver pod {d.key} is ready")
    return _coming_up(ctx, d, now, timeout)


def _hand_over(ctx: NodeContext, d: PodView, now: float) -> Step:
    """The restart of a node on the reference operator's driver: removing the takeover
    label makes its fenced DaemonSet let the node go (its controller deletes the pod) and
    ours take it, as moving the pin does between our own DaemonSets."""
    if (settling := _settling(ctx.node, now)) is not None:
        return settling
    if not ctx.node.taken_over:
        return Step(wait=f"waiting for the reference operator's driver pod {d.key} to go")
    return Step(
        transition=Transition(
            S.POD_RESTART_REQUIRED,
            "handed the node from the reference operator's driver to ours",
            annotations={UPGRADE_REQUESTED: None} if ctx.node.upgrade_requested else {},
            release_takeover=True,
        ),
        wait="restarting the driver: the reference operator's pod goes, ours comes",
    )


def _wanted_pin(ctx: NodeContext) -> str | None:
    """The kernel the node should be pinned to once cleared (None: unpinned, per-OS)."""
    precompiled = ctx.precompiled
    if precompiled is None:
        precompiled = ctx.driver is not None and ctx.driver.pinned
    if not precompiled:
        return None
    return ctx.node.kernel or ctx.node.pinned_kernel
