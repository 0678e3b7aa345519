"""A way back (issue 52, item 3): what a pool's rollback request asks of admission, which
nodes it marks, and what the policy's status says about it.

A pure function of one pool's nodes, its request (`components.api.rollback_request`) and,
before the request is bound to the spec, the images the pool's driver DaemonSets run now.
Order matters for a crash at any point, and each step is stored in the cluster:

1. request seen, not yet bound: the nodes to walk back are marked (`ROLLBACK_NODE`): the
   failing ones, and with `all` every node walked to (or walking to) the new image;
2. once every mark is written, the request is bound to the spec (`ROLLBACK_GENERATION`)
   and the renderer pins each driver DaemonSet back to its nodes' last good image;
3. a marked node walks back: from `upgrade-failed` through the walk's own steps (the
   planner), otherwise admitted as any node is, under maxParallelUpgrades and
   maxUnavailable; an unmarked `upgrade-required` node is held (a healthy walked node under
   `failed`, or an unwalked one before the pin lands);
4. the spec changes (or the request is withdrawn): marks and annotations go, and the walk
   follows the policy again.

While the request holds, the rollout stays halted whatever the budget counts: the pin keeps
the failing version off every node, and `UpgradeHalted` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from components.api import (
    LAST_GOOD_IMAGE,
    ROLLBACK_ANNOTATION,
    ROLLBACK_NODE,
    RollbackMode,
    RollbackRequest,
    UpgradeState,
)
from components.upgrade._model import NodeView
from components.upgrade._names import IN_PROGRESS

S = UpgradeState

CONDITION = "RollingBack"
ROLLING_BACK = "RollingBack"
ROLLED_BACK = "RolledBack"
INVALID = "InvalidRollbackRequest"
HALTED_REASON = "RollbackRequested"
LISTED = 10


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    request: RollbackRequest
    mark: tuple[str, ...] = ()
    """Nodes to mark now (`ROLLBACK_NODE`)."""
    stamp: bool = False
    """Bind the request to the spec once the marks are written."""
    clear: tuple[str, ...] = ()
    """Nodes whose mark goes (the rollback ended)."""
    hold: frozenset[str] = frozenset()
    wait: str = ""
    remaining: tuple[tuple[str, str], ...] = ()
    """(node, state) of marked nodes not yet back, by name."""
    images: tuple[str, ...] = ()
    """The last good images the marked nodes go back to."""
    done: tuple[str, ...] = ()


def marked(node: NodeView) -> bool:
    return node.annotations.get(ROLLBACK_NODE) == "true"


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
    new_images: frozenset[str] = frozenset(),
    started: float | None = None,
) -> RollbackPlan:
    """What the pool does about its rollback request. `failing`: the nodes the failure
    budget counts; `new_images`: the images the pool's driver DaemonSets run now (read
    only before the request is bound: afterwards they are the pinned ones); `started`:
    when the rollback began (a marked node done since then is back)."""
    if request.ended:
        return RollbackPlan(request, clear=tuple(n.name for n in nodes if marked(n)))
    if request.mode is None:
        return RollbackPlan(request)
    failed = set(failing)
    if request.to_stamp:
        every = request.mode is RollbackMode.ALL
        wanted = {n.name for n in nodes if n.name in failed or (every and _walked(n, new_images))}
    else:
        wanted = failed  # a node that fails during the rollback goes back too
    by_name = {n.name: n for n in nodes}
    mark = tuple(sorted(n for n in wanted if n in by_name and not marked(by_name[n])))
    chosen = [n for n in nodes if marked(n) or n.name in wanted]
    remaining = tuple(
        (n.name, n.state.value)
        for n in chosen
        if not _back(n, started) and n.state is not S.UNKNOWN
    )
    hold = frozenset(n.name for n in nodes if n.state is S.UPGRADE_REQUIRED and not marked(n))
    mode = request.mode.value
    wait = (
        f"held by the rollback ({mode}): the node keeps its driver until the spec changes"
        if request.mode is RollbackMode.FAILED
        else f"held by the rollback ({mode}) until its driver DaemonSet is pinned back"
    )
    images = sorted({n.annotations.get(LAST_GOOD_IMAGE, "") for n in chosen} - {""})
    return RollbackPlan(
        request,
        mark=mark,
        stamp=request.to_stamp,
        hold=hold,
        wait=wait,
        remaining=remaining,
        images=tuple(images),
        done=tuple(sorted(n.name for n in chosen if _back(n, started))),
    )


def _back(node: NodeView, started: float | None) -> bool:
    """Back on its last good driver: done, and done since the rollback began."""
    if node.state is not S.UPGRADE_DONE or started is None:
        return False
    since = node.since
    return since is not None and since >= started


def rolling_back_message(plan: RollbackPlan, version: str) -> tuple[bool, str, str]:
    """(still rolling back, reason, message) of the `RollingBack` condition."""
    mode = plan.request.mode.value if plan.request.mode else ""
    to = f" ({', '.join(plan.images)})" if plan.images else ""
    of = f"driver {version}" if version else "the rollout"
    if plan.remaining:
        shown = ", ".join(f"{n} ({s})" for n, s in plan.remaining[:LISTED])
        more = f", and {len(plan.remaining) - LISTED} more" if len(plan.remaining) > LISTED else ""
        return (
            True,
            ROLLING_BACK,
            f"rollback ({mode}) of {of}: {len(plan.remaining)} nodes going back to their last "
            f"good driver{to}: {shown}{more}",
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
