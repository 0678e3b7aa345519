"""The limits: how many nodes may be in an upgrade, and how many may be unavailable.

Pure functions of one pool's managed nodes (a pool is the nodes one upgrade policy governs:
the ClusterPolicy's, or one NVIDIADriver's). The counts are the reference's:

* in progress = managed - (unknown + done + upgrade-required); a failed node keeps its slot;
* `maxParallelUpgrades` caps in progress (0 = no cap);
* `maxUnavailable` (a count, or a percentage of managed nodes rounded up) caps the nodes that
  are cordoned or NotReady, counting nodes about to be cordoned (`cordon-required`).

Admission is the only step that consumes either limit, and `admit` never lets a step make
either count exceed its cap: a node that is already unavailable (cordoned by someone, or
NotReady) costs no unavailability, so it may start even when the budget is spent, but it
still takes a parallel slot. (The reference lets such nodes start past maxParallelUpgrades
too; we do not.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from components.api import DriverUpgradePolicySpec, UpgradeState, scaled_value
from components.upgrade._model import NodeView
from components.upgrade._names import IN_PROGRESS

S = UpgradeState


@dataclass(frozen=True, slots=True)
class Counts:
    managed: int
    pending: int
    in_progress: int
    done: int
    failed: int
    unavailable: int
    """Cordoned, NotReady, or about to be cordoned."""
    max_parallel: int
    """0 = no limit."""
    max_unavailable: int
    available: int
    """Upgrades that may start now (the reference's `GetUpgradesAvailable`)."""


def max_unavailable(policy: DriverUpgradePolicySpec, managed: int) -> int:
    value = policy.max_unavailable
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * managed / 100)
    return max(0, scaled_value(value, managed))


def _unavailable(node: NodeView) -> bool:
    return node.unavailable or node.state is S.CORDON_REQUIRED


def counts(nodes: Sequence[NodeView], policy: DriverUpgradePolicySpec) -> Counts:
    states = [n.state for n in nodes]
    managed = len(nodes)
    pending = states.count(S.UPGRADE_REQUIRED)
    in_progress = sum(1 for s in states if s in IN_PROGRESS)
    cap = max_unavailable(policy, managed)
    unavailable = sum(1 for n in nodes if _unavailable(n))
    if policy.max_parallel_upgrades == 0:
        available = pending
    else:
        available = policy.max_parallel_upgrades - in_progress
    available = min(available, cap - unavailable)
    return Counts(
        managed=managed,
        pending=pending,
        in_progress=in_progress,
        done=states.count(S.UPGRADE_DONE),
        failed=states.count(S.UPGRADE_FAILED),
        unavailable=unavailable,
        max_parallel=policy.max_parallel_upgrades,
        max_unavailable=cap,
        available=max(0, available),
    )


def admit(
    nodes: Sequence[NodeView],
    policy: DriverUpgradePolicySpec,
    *,
    hold: frozenset[str] = frozenset(),
) -> list[str]:
    """The `upgrade-required` nodes that may start now (move to `cordon-required`).

    Nodes with the skip label never start, nor do those in `hold` (pre-flight: their
    image is not known to exist); neither takes a slot. Nodes already unavailable go first
    (they cost no unavailability), then by name, so the order is stable across restarts.
    """
    c = counts(nodes, policy)
    slots = math.inf if c.max_parallel == 0 else c.max_parallel - c.in_progress
    budget = c.max_unavailable - c.unavailable
    candidates = sorted(
        (n for n in nodes if n.state is S.UPGRADE_REQUIRED and not n.skip and n.name not in hold),
        key=lambda n: (not n.unavailable, n.name),
    )
    chosen: list[str] = []
    for node in candidates:
        if slots <= 0:
            break
        if node.unavailable:
            chosen.append(node.name)
            slots -= 1
        elif budget > 0:
            chosen.append(node.name)
            slots -= 1
            budget -= 1
    return chosen
