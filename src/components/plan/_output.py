"""The plan as a person reads it at a terminal."""

from __future__ import annotations

from collections.abc import Iterator

from components.plan._plan import PolicyPlan

_VERBS = {"created": "create", "changed": "change", "deleted": "delete"}


def text(plan: PolicyPlan) -> Iterator[str]:
    counts = {v: sum(1 for c in plan.objects if c.action == v) for v in _VERBS}
    yield (
        f"ClusterPolicy {plan.policy}: {counts['created']} to create, "
        f"{counts['changed']} to change, {counts['deleted']} to delete"
    )
    for c in plan.objects:
        suffix = f" ({c.component})" if c.component else ""
        yield f"  {_VERBS[c.action]:<7} {c.what}{suffix}"
        for f in c.fields:
            yield f"            {f}"
    n = plan.nodes
    if n.install:
        yield f"Driver installed for the first time on: {', '.join(n.install)}"
    if n.restart:
        yield f"Driver restarted in place (no cordon, no drain): {', '.join(n.restart)}"
    if n.walk:
        yield f"Driver walked (cordon, drain, restart): {', '.join(n.walk)}"
    if n.restart or n.walk:
        limits = ", ".join(f"{k} {v}" for k, v in n.limits.items())
        yield f"In {len(n.rounds)} rounds ({limits}):"
        for i, r in enumerate(n.rounds, 1):
            yield f"  round {i}: {', '.join(r)}"
        if not n.auto_upgrade:
            yield (
                "autoUpgrade is off: no node moves until its driver pod is deleted "
                "(the DaemonSet updates OnDelete)"
            )
    if n.held:
        yield f"Held by pre-flight: {', '.join(n.held)}: {n.preflight}"
    if not plan.changes:
        yield "Nothing would change."
