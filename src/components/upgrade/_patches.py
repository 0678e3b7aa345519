"""A transition as one JSON patch: the state label, its annotations and the cordon together
(and, for a precompiled driver, the kernel pin).

One request changes everything a transition changes, so there is no moment (and no crash)
in which a node is cordoned but not yet in its new state, or in its new state without the
time it entered it. The patch starts with a `test` of the state label as we read it: if
anyone (a stale cache, a second writer) moved the node meanwhile, the server refuses the
whole patch (422) and nothing is half-applied.
"""

from __future__ import annotations

from typing import Any

from components.api import DRIVER_KERNEL_PIN_LABEL, DRIVER_TAKEOVER_LABEL, UpgradeState
from components.upgrade._model import NodeView
from components.upgrade._names import (
    CLIENT_NAMES,
    CORDONED_AT,
    DEVICE_PLUGIN_PAUSED,
    FAILED_STATE,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    RESTART_ONLY,
    RETRIES,
    STATE_LABEL,
    STATE_SINCE,
    VALIDATION_START,
    WAIT_FOR_JOBS_START,
    WALK_ANNOTATIONS,
)
from components.upgrade._step import Transition
from components.upgrade._times import format_time

Op = dict[str, Any]

_UNCORDONED = frozenset(
    {UpgradeState.UPGRADE_DONE, UpgradeState.UPGRADE_REQUIRED, UpgradeState.CORDON_REQUIRED}
)
"""States in which the upgrade holds no cordon: the cordon time goes."""


def _pointer(*parts: str) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def annotation_changes(node: NodeView, t: Transition, now: float) -> dict[str, str | None]:
    """Every annotation the transition sets (value) or removes (None), bookkeeping included,
    already reduced to real changes."""
    changes: dict[str, str | None] = dict(t.annotations)
    moves = (t.to is None and node.state_label is not None) or (
        t.to is not None and t.to.value != node.state_label
    )
    if t.to is None:
        for key in WALK_ANNOTATIONS:
            changes.setdefault(key, None)
        changes.setdefault(INITIALLY_UNSCHEDULABLE, None)
    else:
        if moves:
            changes.setdefault(STATE_SINCE, format_time(now))
        changes.setdefault(MESSAGE, t.reason if t.warning and t.reason else None)
        if t.to is not UpgradeState.UPGRADE_FAILED:
            changes.setdefault(FAILED_STATE, None)
        if t.to in _UNCORDONED:
            changes.setdefault(CORDONED_AT, None)
        if t.to in (UpgradeState.UPGRADE_DONE, UpgradeState.UPGRADE_REQUIRED):
            changes.setdefault(RESTART_ONLY, None)
            changes.setdefault(RETRIES, None)
        changes.setdefault(WAIT_FOR_JOBS_START, None)
        changes.setdefault(VALIDATION_START, None)
    have = node.annotations
    return {
        k: v
        for k, v in changes.items()
        if (v is None and k in have) or (v is not None and have.get(k) != v)
    }


def client_changes(node: NodeView, t: Transition) -> tuple[tuple[str, str, str], ...]:
    """(label, from, to) for each client deploy label `t` changes: a pause only from
    `true`, a resume only from our own pause."""
    if t.clients is None:
        return ()
    before, after = (
        ("true", DEVICE_PLUGIN_PAUSED) if not t.clients else (DEVICE_PLUGIN_PAUSED, "true")
    )
    return tuple((label, before, after) for label, value in node.clients.items() if value == before)


def name_clients(changes: tuple[tuple[str, str, str], ...]) -> str:
    """`the device plugin and the validator`: the operands `changes` pause or resume."""
    return " and ".join(CLIENT_NAMES[label] for label, _, _ in changes)


def transition_patch(node: NodeView, t: Transition, now: float) -> list[Op]:
    """The JSON patch for `t` on `node`; empty when it would change nothing."""
    ops: list[Op] = []
    label_path = _pointer("metadata", "labels", STATE_LABEL)
    labels: dict[str, str] = {}
    if t.to is None:
        if node.state_label is not None:
            ops.append({"op": "remove", "path": label_path})
    elif t.to.value != node.state_label:
        labels[STATE_LABEL] = t.to.value
    if t.pin_kernel and t.pin_kernel != node.pinned_kernel:
        labels[DRIVER_KERNEL_PIN_LABEL] = t.pin_kernel
    if labels and not node.has_labels:
        ops.append({"op": "add", "path": "/metadata/labels", "value": labels})
    else:
        for key, value in labels.items():
            ops.append({"op": "add", "path": _pointer("metadata", "labels", key), "value": value})
    if t.pin_kernel == "" and node.pinned_kernel is not None:
        ops.append(
            {"op": "remove", "path": _pointer("metadata", "labels", DRIVER_KERNEL_PIN_LABEL)}
        )
    if t.release_takeover and node.taken_over:
        ops.append({"op": "remove", "path": _pointer("metadata", "labels", DRIVER_TAKEOVER_LABEL)})
    for label, before, after in client_changes(node, t):
        # Tested too: a value another agent wrote since we read the node is never replaced.
        path = _pointer("metadata", "labels", label)
        ops.append({"op": "test", "path": path, "value": before})
        ops.append({"op": "replace", "path": path, "value": after})
    changes = annotation_changes(node, t, now)
    sets = {k: v for k, v in changes.items() if v is not None}
    if sets and not node.has_annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": sets})
    else:
        for key, value in sorted(sets.items()):
            ops.append(
                {"op": "add", "path": _pointer("metadata", "annotations", key), "value": value}
            )
    for key in sorted(k for k, v in changes.items() if v is None):
        ops.append({"op": "remove", "path": _pointer("metadata", "annotations", key)})
    if t.unschedulable is not None and t.unschedulable != node.unschedulable:
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": t.unschedulable})
    if not ops:
        return []
    if node.state_label is not None:
        ops.insert(0, {"op": "test", "path": label_path, "value": node.state_label})
    return ops
