"""Names: the node labels and annotations the upgrade lives in, the kinds it reads.

The reference's keys (k8s-operator-libs `pkg/upgrade/consts.go`, driver name `gpu`) keep
their names and meaning, so dashboards, runbooks and `kubectl get nodes -L` keep working.
Keys the reference does not have are ours and carry the same prefix. Only the upgrade uses
these; keys other parts share (the kernel, its pin, the NVIDIADriver owner, and the state
label, whose first value the node labeller writes) are `components.api`'s.
"""

from __future__ import annotations

from typing import Final

from components.api import (
    DEPLOY_LABEL_PREFIX,
    DRIVER_UPGRADE_STATE_LABEL,
    ROLLBACK_NODE,
    UpgradeState,
)
from components.kinds import CACHED_PODS as CACHED_PODS
from components.kinds import CLUSTER_POLICY as CLUSTER_POLICY
from components.kinds import NVIDIA_DRIVER as NVIDIA_DRIVER
from components.kinds import SCHEDULED_PODS as SCHEDULED_PODS
from reconciler.kinds import CONTROLLER_REVISION as CONTROLLER_REVISION
from reconciler.kinds import DAEMONSET as DAEMONSET
from reconciler.kinds import NODE as NODE
from reconciler.kinds import PDB as PDB
from reconciler.kinds import POD as POD

# -- node labels -------------------------------------------------------------------------

STATE_LABEL: Final = DRIVER_UPGRADE_STATE_LABEL
"""Where a node is in the upgrade (`UpgradeState` values); absent = unknown."""

SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade.skip"
"""`true` on a node: never start its upgrade (a walk already begun finishes)."""

# -- node annotations --------------------------------------------------------------------

INITIALLY_UNSCHEDULABLE: Final = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
"""The node was cordoned before its upgrade began, so it stays cordoned after it."""

UPGRADE_REQUESTED: Final = "nvidia.com/gpu-driver-upgrade-requested"
"""`true`: restart this node's driver through the safe path even though it is in sync."""

STATE_SINCE: Final = "nvidia.com/gpu-driver-upgrade-state-since"
"""When the node entered its current state (RFC 3339, UTC): every timeout counts from it.
Written in the same request as the state label, so the two never disagree."""

FAILED_STATE: Final = "nvidia.com/gpu-driver-upgrade-failed-state"
"""On an `upgrade-failed` node: the state it failed in, so the retry knows what to redo."""

MESSAGE: Final = "nvidia.com/gpu-driver-upgrade-message"
"""Why the node is where it is, when that is worth a sentence (failures, mostly)."""

CORDONED_AT: Final = "nvidia.com/gpu-driver-upgrade.cordoned-at"
"""When the upgrade cordoned the node (RFC 3339, milliseconds). The scheduler may still bind
a pod it placed from a view older than the cordon, so on a node that still offers GPUs the
driver is not replaced until the cordon has had `CORDON_SETTLE_SECONDS` to reach it (once
the node offers none, the kubelet's device admission is the guard: `_restart._settling`)."""

CORDON_SETTLE_SECONDS: Final = 2.0

RESTART_ONLY: Final = "nvidia.com/gpu-driver-upgrade.restart-only"
"""`true` on a node whose driver pod is restarted in place (`_restart.restart_only`): its
template changed, not what the driver is installed with, so the node goes from
`upgrade-required` to `pod-restart-required` with no cordon, no clearing and no pause of
the driver's clients, and from validation straight to `upgrade-done`."""

RETRIES: Final = "nvidia.com/gpu-driver-upgrade.retries"
"""Ours: how many times the walk has retried this node after `upgrade-failed` (a count).
The wait before the next retry doubles with each (`_retry`); kept on the node, so a
restarted operator keeps the backoff, and cleared when the node is done."""

WAIT_FOR_JOBS_START: Final = "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
VALIDATION_START: Final = "nvidia.com/gpu-driver-upgrade-validation-start-time"
"""The reference's start-time annotations (Unix seconds). We time from `STATE_SINCE` and
only remove these, so a node taken over from the reference operator ends up clean."""

WALK_ANNOTATIONS: Final = (
    STATE_SINCE,
    RESTART_ONLY,
    CORDONED_AT,
    FAILED_STATE,
    MESSAGE,
    RETRIES,
    WAIT_FOR_JOBS_START,
    VALIDATION_START,
)
"""Annotations that only mean something during a walk; cleared when it ends."""

NODE_ANNOTATIONS: Final = (
    INITIALLY_UNSCHEDULABLE,
    UPGRADE_REQUESTED,
    *WALK_ANNOTATIONS,
    ROLLBACK_NODE,
)
"""Every node annotation the upgrade reads or writes."""


# -- pod labels and annotations ----------------------------------------------------------

DRAIN_SKIP_LABEL: Final = "nvidia.com/gpu-driver-upgrade-drain.skip"
"""`true` on a pod: a drain leaves it alone (the operator's own pod carries it)."""

REVISION_LABEL: Final = "controller-revision-hash"
"""On DaemonSet pods and ControllerRevisions: which revision of the template it is."""

DRIVER_KERNEL_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade.kernel-version"
"""On a driver pod: the kernel its driver was built and loaded for. Set by the renderer or
the driver container when they know it; otherwise recorded by the upgrade controller when
it first sees the pod ready (the node's kernel then). Precompiled driver pods carry the
kernel in their node selector instead, which is read too."""

VALIDATOR_APP: Final = "nvidia-operator-validator"
"""`app` label of the validator pods that must be Ready after a driver restart."""

MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"

GPU_RESOURCE_PREFIXES: Final = ("nvidia.com/gpu", "nvidia.com/mig-")
"""A pod requesting a resource with one of these prefixes uses a GPU."""

DEVICE_PLUGIN_DEPLOY_LABEL: Final = DEPLOY_LABEL_PREFIX + "device-plugin"
"""The device plugin DaemonSet selects nodes on this label being `true`."""
DEVICE_PLUGIN_PAUSED: Final = "paused-for-driver-upgrade"
"""The reference's value for "this operand stays off the node while its driver restarts":
the device plugin leaves, and the node stops advertising GPUs, so the scheduler cannot
put a GPU pod back on it (an `Exists` toleration gets past any cordon or taint)."""
VALIDATOR_DEPLOY_LABEL: Final = DEPLOY_LABEL_PREFIX + "operator-validator"
"""The validator DaemonSet selects nodes on this label being `true`."""
CLIENT_DEPLOY_LABELS: Final = (DEVICE_PLUGIN_DEPLOY_LABEL, VALIDATOR_DEPLOY_LABEL)
"""The operands the walk pauses while a node's driver restarts, as the reference's driver
manager pauses them (with others, which do not bear on the walk): the device plugin, so
the node offers no GPU while there is no driver, and the validator, so that the one which
validates the new driver is created after it, instead of an old one being replaced."""
CLIENT_NAMES: Final = {
    DEVICE_PLUGIN_DEPLOY_LABEL: "the device plugin",
    VALIDATOR_DEPLOY_LABEL: "the validator",
}
DEVICE_PLUGIN_PAUSE_TIMEOUT: Final = 120.0
"""Seconds (from entering pod-restart-required) to wait for the node's GPUs to vanish once
the device plugin is paused. Past it (a device plugin that is not ours still advertises)
the restart goes ahead behind the live re-check of the node's pods alone."""

DRIVER_POD_LABELS: Final = (
    ("app", "nvidia-driver-daemonset"),
    ("app.kubernetes.io/component", "nvidia-driver"),
)
"""Labels that make a pod in the operator namespace a driver pod (the reference's:
`app=nvidia-driver-daemonset` for ClusterPolicy, the component label for NVIDIADriver)."""

# -- events ------------------------------------------------------------------------------

EVENT_REASON: Final = "GPUDriverUpgrade"
"""The reference's event reason, so existing event filters keep matching."""

STATUS_FIELD_MANAGER: Final = "gpu-operator-upgrade"
"""The field manager of `status.upgrade` where the upgrade runs without the policy
controllers (which otherwise write it, `_pool.StatusSink`)."""

# -- states ------------------------------------------------------------------------------

S = UpgradeState

IN_PROGRESS: Final = frozenset(
    {
        S.CORDON_REQUIRED,
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.DRAIN_REQUIRED,
        S.POD_RESTART_REQUIRED,
        S.VALIDATION_REQUIRED,
        S.UNCORDON_REQUIRED,
        S.UPGRADE_FAILED,
    }
)
"""The reference's in-progress: every state but unknown, done and upgrade-required. A
failed node keeps its slot until it recovers: it is still cordoned and still not done."""

CORDONED_BY_US: Final = IN_PROGRESS - {S.CORDON_REQUIRED}
"""States in which the upgrade has cordoned the node (unless it was cordoned before)."""

DEVICE_PLUGIN_PAUSE_STATES: Final = frozenset(
    {S.POD_DELETION_REQUIRED, S.DRAIN_REQUIRED, S.POD_RESTART_REQUIRED, S.UPGRADE_FAILED}
)
"""States in which the walk may hold the driver's clients (`CLIENT_DEPLOY_LABELS`) paused:
from the driver restart (which pauses them) back to clearing, or failed. Every transition
out of them resumes them; outside them a paused value is another agent's (the driver
manager's own) and is left be."""


def parse_state(value: str | None) -> UpgradeState:
    """The state a label value names; anything unknown reads as unknown."""
    try:
        return UpgradeState(value or "")
    except ValueError:
        return UpgradeState.UNKNOWN
