"""A way back (issue 52, item 3): what a pool's rollback request asks of admission, which
nodes it marks, and what the policy's status says about it.

A pure function of one pool's nodes, its request (`components.api.rollback_request`) and,
before the request is bound, the images the pool's driver DaemonSets run now. Each step is
stored in the cluster, in an order that keeps a crash harmless:

1. request seen, not yet bound: the nodes to walk back are marked (`ROLLBACK_NODE`): the
   failing ones, and with `all` every node walked to (or walking to) the new image;
2. once the cache shows every mark, the `RollingBack` condition binds the request to the
   spec (its `observedGeneration`) and the renderer pins each driver DaemonSet back to its
   nodes' last good image;
3. a marked node walks back: from `upgrade-failed` through the walk's own steps (the
   planner), otherwise admitted as any node is, under maxParallelUpgrades and
   maxUnavailable; an unmarked `upgrade-required` node is held (a healthy walked node under
   `failed`, or an unwalked one until the pin lands); validated, it is marked `back`;
4. the spec changes (or the request is withdrawn): the marks go, the condition says
   `RollbackEnded`, and the walk follows the policy again.

While the request holds, the rollout stays halted whatever the budget counts: the pin keeps
the failing version off every node, and `UpgradeHalted` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from components.api import (
    LAST_GOOD_IMAGE,
    ROLLBACK_ANNOTATION,
    ROLLBACK_CONDITION,
    ROLLBACK_ENDED,
    ROLLBACK_NODE,
    RollbackMode,
    RollbackRequest,
    UpgradeState,
)
from components.upgrade._listing import listed
from components.upgrade._model import NodeView
from components.upgrade._names import IN_PROGRESS

S = UpgradeState

CONDITION = ROLLBACK_CONDITION
ROLLING_BACK = "RollingBack"
ROLLED_BACK = "RolledBack"
ENDED = ROLLBACK_ENDED
INVALID = "InvalidRollbackRequest"
HALTED_REASON = "RollbackRequested"


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    request: RollbackRequest
    mark: tuple[str, ...] = ()
    """Nodes to mark now (`ROLLBACK_NODE`)."""
    bind: bool = False
    """Bind the request to the spec now: the cache shows every mark."""
    clear: tuple[str, ...] = ()
    """Nodes whose mark goes (the rollback ended)."""
    hold: frozenset[str] = frozenset()
    wait: str = ""
    remaining: tuple[tuple[str, str], ...] = ()
    """(node, state) of marked nodes not yet back, by name."""
    images: tuple[str, ...] = ()
    """The images the marked nodes go back to (once bound)."""
    done: tuple[str, ...] = ()


def marked(node: NodeView) -> bool:
    return node.annotations.get(ROLLBACK_NODE) in ("true", "back")


def _back(node: NodeView) -> bool:
    """Validated on its last good driver since the rollback marked it, and done."""
    return node.annotations.get(ROLLBACK_NODE) == "back" and node.state is S.UPGRADE_DONE


def _walked(node: NodeView, new_images: frozenset[str]) -> bool:
    """Walked to (or walking to) the new image: the walk recorded it as the node's last good
    image, or the node is in the walk now."""
    if node.state in IN_PROGRESS or node.state is S.UPGRADE_FAILED:
        return True
    return node.annotations.get(LAST_GOOD_IMAGE) in new_images


def rollback_plan(
    request: RollbackRequest,
    nodes: Sequence[NodeView],
    failing: Iterable[str],
    *,
    images: frozenset[str] = frozenset(),
) -> RollbackPlan:
    """What the pool does about its rollback request. `failing`: the nodes the failure
    budget counts; `images`: the images the pool's driver DaemonSets run now (before the
    request is bound, the new ones: who was walked to them; once bound, the pinned ones:
    what the nodes go back to)."""
    if request.ended:
        return RollbackPlan(request, clear=tuple(n.name for n in nodes if marked(n)))
    if request.mode is None or request.spent:
        return RollbackPlan(request)
    failed = set(failing)
    if request.to_bind:
        every = request.mode is RollbackMode.ALL
        wanted = {n.name for n in nodes if n.name in failed or (every and _walked(n, images))}
    else:
        wanted = failed  # a node that fails during the rollback goes back too
    by_name = {n.name: n for n in nodes}
    mark = tuple(sorted(n for n in wanted if n in by_name and not marked(by_name[n])))
    chosen = [n for n in nodes if marked(n) or n.name in wanted]
    remaining = tuple((n.name, n.state.value) for n in chosen if not _back(n))
    hold = frozenset(n.name for n in nodes if n.state is S.UPGRADE_REQUIRED and not marked(n))
    mode = request.mode.value
    wait = (
        f"held by the rollback ({mode}): the node keeps its driver until the spec changes"
        if request.mode is RollbackMode.FAILED
        else f"held by the rollback ({mode}) until its driver DaemonSet is pinned back"
    )
    return RollbackPlan(
        request,
        mark=mark,
        bind=request.to_bind and not mark,
        hold=hold,
        wait=wait,
        remaining=remaining,
        images=tuple(sorted(images)) if request.active else (),
        done=tuple(sorted(n.name for n in chosen if _back(n))),
    )


def rolling_back_message(plan: RollbackPlan, version: str) -> tuple[bool, str, str]:
    """(still rolling back, reason, message) of the `RollingBack` condition."""
    mode = plan.request.mode.value if plan.request.mode else ""
    to = f" ({', '.join(plan.images)})" if plan.images else ""
    of = f"driver {version}" if version else "the rollout"
    if plan.remaining:
        shown = listed([f"{n} ({s})" for n, s in plan.remaining], ", ")
        return (
            True,
            ROLLING_BACK,
            f"rollback ({mode}) of {of}: {len(plan.remaining)} nodes going back to their last "
            f"good driver{to}: {shown}",
        )
    return (
        False,
        ROLLED_BACK,
        f"rollback ({mode}) of {of}: {len(plan.done)} nodes back on their last good driver{to}; "
        "the rollout stays halted until the spec changes",
    )


def halted_message(plan: RollbackPlan, version: str) -> str:
    of = f"driver {version}" if version else "the new driver"
    mode = plan.request.mode.value if plan.request.mode else ""
    return (
        f"a rollback ({mode}) was requested ({ROLLBACK_ANNOTATION}): no node is admitted to "
        f"{of} until the spec changes"
    )
