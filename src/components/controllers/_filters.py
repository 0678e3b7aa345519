"""Event filters: which updates can change what a reconcile computes.

Most updates during a rollout are status writes on the way to a state (a pod scheduled,
started, its containers coming up one by one); a reconcile that reads only the outcome
need not run for each.
"""

from __future__ import annotations

from typing import Any

from components.api import ROLLBACK_ANNOTATION, rollback_condition
from components.controllers._status import agent_conditions
from components.operands.readiness import pod_ready
from reconciler import (
    Funcs,
    GenerationChanged,
    LabelsChanged,
    Matching,
    Object,
    Or,
    annotations_of,
    generation_of,
    is_deleting,
    labels_of,
    namespace_of,
    owner_references_of,
)


def _pod_readiness_changed(old: Object, new: Object) -> bool:
    """What operand readiness reads of a pod: where it runs, whose it is, its revision,
    whether it is going, and whether it is ready (not every status write on the way)."""
    return (
        pod_ready(old) != pod_ready(new)
        or (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName")
        or labels_of(old) != labels_of(new)
        or owner_references_of(old) != owner_references_of(new)
        or is_deleting(old) != is_deleting(new)
    )


POD_CHANGED = Funcs(update=_pod_readiness_changed)


def _rolled_out(ds: Object) -> bool:
    """The DaemonSet controller's word that a DaemonSet's rollout is complete: its spec
    seen, every pod it wants updated and available."""
    status = ds.get("status") or {}
    desired = int(status.get("desiredNumberScheduled") or 0)
    return (
        int(status.get("observedGeneration") or 0) >= generation_of(ds)
        and int(status.get("numberUnavailable") or 0) == 0
        and int(status.get("updatedNumberScheduled") or 0) >= desired
        and int(status.get("numberAvailable") or 0) >= desired
    )


def _finished_rolling_out(old: Object, new: Object) -> bool:
    return _rolled_out(new) and not _rolled_out(old)


ROLLOUT_FINISHED = Funcs(
    create=lambda _: False, update=_finished_rolling_out, delete=lambda _: False
)
"""A DaemonSet of ours that has just finished rolling out (about eight events a rollout):
the news a paced reconcile of its policy waits for."""

DELETED = Funcs(create=lambda _: False, update=lambda _old, _new: False)
"""Only deletions: an object of ours gone is a repair to make at once, not progress to
report at the next paced turn."""

NOT_DELETED = Funcs(delete=lambda _: False)
"""Every event but deletions (which a `DELETED` watch takes)."""


def _runtime_changed(old: Object, new: Object) -> bool:
    def runtime(node: Object) -> object:
        return ((node.get("status") or {}).get("nodeInfo") or {}).get("containerRuntimeVersion")

    return runtime(old) != runtime(new)


def in_namespace(namespace: str) -> Matching:
    return Matching(lambda obj: namespace_of(obj) == namespace)


def _agent_reported(old: Object, new: Object) -> bool:
    def said(node: Object) -> dict[str, tuple[Any, Any]]:
        return {k: (c.get("status"), c.get("reason")) for k, c in agent_conditions(node).items()}

    return said(old) != said(new)


NODE_CHANGED = Or(LabelsChanged(), Funcs(update=_runtime_changed), Funcs(update=_agent_reported))
"""Node events that can change the desired state or the status: labels, the container
runtime, what the node agent reports (not heartbeats or kubelet's conditions)."""


def _rollback_changed(old: Object, new: Object) -> bool:
    def said(policy: Object) -> tuple[object, ...]:
        c = rollback_condition(policy) or {}
        bound = (c.get("reason"), c.get("observedGeneration"))
        return annotations_of(policy).get(ROLLBACK_ANNOTATION), *bound

    return said(old) != said(new)


POLICY_CHANGED = Or(GenerationChanged(), Funcs(update=_rollback_changed))
"""Policy events that change what is rendered: the spec, or a driver rollback bound to it
(its annotation and its status condition; `components.api.rollback_request`), which pins
the driver images back."""
