"""A failure budget that halts: when more nodes of a pool fail the upgrade than
`upgradePolicy.failureBudget` allows, admission stops, and the policy says why.

A pure function of one pool's nodes and its policy. A node counts as failing while it is
`upgrade-failed` (its validation did not pass in time, its driver pod was not ready in
time: a crash loop, its pods could not be cleared) or while it is NotReady after its
driver restarted (validating or about to be uncordoned), or while it retries a failed step
(`_retry`) until it is done. Nothing is remembered: a failing
node that recovers stops counting, and the walk goes on once the count is back within the
budget. Nodes already walked and healthy are never touched by a halt; nodes in the walk
finish their step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components.api import DriverUpgradePolicySpec, UpgradeState, scaled_value
from components.upgrade._listing import listed
from components.upgrade._model import NodeView
from components.upgrade._names import IN_PROGRESS
from components.upgrade._retry import retries

S = UpgradeState

AFTER_RESTART = frozenset({S.VALIDATION_REQUIRED, S.UNCORDON_REQUIRED})
HALTED_REASON = "FailureBudgetExceeded"
WITHIN_REASON = "WithinFailureBudget"
CONDITION = "UpgradeHalted"


@dataclass(frozen=True, slots=True)
class Halt:
    budget: int
    failing: tuple[tuple[str, str], ...]
    """(node, reason), by name."""
    version: str = ""

    def message(self) -> str:
        shown = listed([f"{n}: {r}" for n, r in self.failing], "; ")
        version = f"driver {self.version}: " if self.version else ""
        return (
            f"{version}{len(self.failing)} nodes failed the upgrade, more than the failure "
            f"budget of {self.budget}; no further node is admitted. {shown}"
        )


def failing(nodes: Sequence[NodeView]) -> list[tuple[str, str]]:
    """The pool's failing nodes, each with its reason, by name."""
    out: list[tuple[str, str]] = []
    for node in nodes:
        if node.state is S.UPGRADE_FAILED:
            out.append((node.name, node.message or "upgrade failed"))
        elif node.state in AFTER_RESTART and not node.ready:
            out.append((node.name, "NotReady after its driver restarted"))
        elif (n := retries(node)) and node.state in IN_PROGRESS:
            # A retry (`_retry`) takes the node out of upgrade-failed for a while: it has
            # not recovered, so the halt must not lift and admit more nodes meanwhile.
            out.append((node.name, f"retrying the upgrade after {n} failures"))
    return sorted(out)


def budget_of(policy: DriverUpgradePolicySpec, managed: int) -> int | None:
    value = policy.failure_budget
    return None if value is None else max(0, scaled_value(value, managed))


def halt(
    nodes: Sequence[NodeView], policy: DriverUpgradePolicySpec, version: str = ""
) -> Halt | None:
    """The halt, when more nodes fail than the budget allows (None: admit as usual)."""
    budget = budget_of(policy, len(nodes))
    if budget is None:
        return None
    found = failing(nodes)
    if len(found) <= budget:
        return None
    return Halt(budget=budget, failing=tuple(found), version=version)
