"""Canary first: which waiting nodes admission must hold back until the canaries have soaked.

A pure function of one pool's nodes, its policy and the wall clock. The canaries (the first
`canary.nodes` managed nodes by name, or those `canary.selector` matches; never a node
labelled to skip driver upgrades, which would never walk) are admitted as
any node is; every other node waits until each canary is `upgrade-done`, Ready and (where
the node agent answers) validated, and has stayed so for `canary.soakSeconds`.

Nothing is remembered: the soak counts from the latest of the canary's entry into
`upgrade-done`, its Ready condition's last change and its validation's, all read from the
node. A canary that was already `upgrade-done` before the nodes now waiting were found
outdated (its own detection may lag theirs by a moment, or it may not need this change at
all) soaks from the moment the first of them was: the rest never slips past a canary that
has not yet been seen to need the new driver, and a change that the canaries do not need
costs one soak, not a stall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components.api import DriverUpgradePolicySpec, UpgradeState
from components.upgrade._model import NodeView
from components.upgrade._selectors import SelectorError, parse_selector

S = UpgradeState

RECHECK_SECONDS = 2.0
"""While canaries hold the rest back, admission looks again at least this often: a canary
turning Ready or validated changes no upgrade label, so no node event is sure to wake it."""


@dataclass(frozen=True, slots=True)
class CanaryGate:
    hold: frozenset[str] = frozenset()
    """Nodes that may not start now."""
    canaries: frozenset[str] = frozenset()
    wait: str = ""
    """Why the rest waits ("" when it does not)."""
    requeue_after: float | None = None


OPEN = CanaryGate()


def canaries(nodes: Sequence[NodeView], policy: DriverUpgradePolicySpec) -> frozenset[str]:
    """The pool's canary nodes (none without a `canary` section); SelectorError when the
    selector does not parse."""
    spec = policy.canary
    if spec is None:
        return frozenset()
    if spec.selector:
        matches = parse_selector(spec.selector)
        return frozenset(n.name for n in nodes if matches(n.labels) and not n.skip)
    eligible = sorted(n.name for n in nodes if not n.skip)
    return frozenset(eligible[: spec.nodes])


def canary_gate(
    nodes: Sequence[NodeView], policy: DriverUpgradePolicySpec, now: float
) -> CanaryGate:
    spec = policy.canary
    if spec is None or (not spec.nodes and not spec.selector):
        return OPEN
    waiting = [n for n in nodes if n.state is S.UPGRADE_REQUIRED]
    if not waiting:
        return OPEN
    try:
        chosen = canaries(nodes, policy)
    except SelectorError as exc:
        return _hold_all(waiting, f"canary.selector is invalid: {exc}")
    if not chosen:
        return _hold_all(waiting, f"canary.selector {spec.selector!r} matches no node")
    found = min((n.since or now) for n in waiting)
    not_yet: list[str] = []
    left = 0.0
    for node in nodes:
        if node.name not in chosen:
            continue
        blocker = _not_soaked(node, spec.soak_seconds, found, now)
        if isinstance(blocker, str):
            not_yet.append(blocker)
        elif blocker > 0:
            not_yet.append(f"{node.name} soaking ({blocker:.0f}s left)")
            left = blocker if not left else min(left, blocker)
    if not not_yet:
        return CanaryGate(canaries=chosen)
    hold = frozenset(n.name for n in waiting if n.name not in chosen)
    shown = ", ".join(sorted(not_yet)[:5]) + (", ..." if len(not_yet) > 5 else "")
    return CanaryGate(
        hold=hold,
        canaries=chosen,
        wait=f"waiting for the canaries: {shown}",
        requeue_after=min(left, RECHECK_SECONDS) if left else RECHECK_SECONDS,
    )


def _not_soaked(node: NodeView, soak: int, found: float, now: float) -> str | float:
    """Why a canary still holds the rest back (a reason), or the seconds of soak left."""
    if node.state is not S.UPGRADE_DONE:
        return f"{node.name} is {node.state.value}"
    if not node.ready:
        return f"{node.name} is not Ready"
    verdict = node.validated
    if verdict is not None and verdict.status != "True":
        return f"{node.name} is not validated"
    done = node.since or 0.0
    start = max(done if done >= found else found, node.ready_since)
    if verdict is not None:
        start = max(start, verdict.since)
    return soak - (now - start)


def _hold_all(waiting: Sequence[NodeView], reason: str) -> CanaryGate:
    return CanaryGate(
        hold=frozenset(n.name for n in waiting),
        wait=reason,
        requeue_after=RECHECK_SECONDS,
    )
