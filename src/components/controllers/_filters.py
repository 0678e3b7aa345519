"""Event filters: which updates can change what a reconcile computes.

Most updates during a rollout are status writes on the way to a state (a pod scheduled,
started, its containers coming up one by one); a reconcile that reads only the outcome
need not run for each.
"""

from __future__ import annotations

from components.operands.readiness import pod_ready
from reconciler import Funcs, Object


def _pod_readiness_changed(old: Object, new: Object) -> bool:
    """What operand readiness reads of a pod: where it runs, whose it is, its revision,
    whether it is going, and whether it is ready (not every status write on the way)."""
    o, n = old.get("metadata") or {}, new.get("metadata") or {}
    return (
        pod_ready(old) != pod_ready(new)
        or (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName")
        or o.get("labels") != n.get("labels")
        or o.get("ownerReferences") != n.get("ownerReferences")
        or bool(o.get("deletionTimestamp")) != bool(n.get("deletionTimestamp"))
    )


POD_CHANGED = Funcs(update=_pod_readiness_changed)
