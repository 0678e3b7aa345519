"""Transitions taken back to back, sent as one write.

A step that is only a transition often leads to a state that asks for nothing but another
transition: cordoned, no jobs to wait for, no GPU pods to delete. Written one by one, the
node passes through states nobody acts on, each costing a PATCH, a watch event and a
reconcile. Here the walk plans on the node as each patch will leave it and sends the
patches together: JSON Patch applies its operations in order and all or nothing, so one
request takes the same steps, atomically, each step's `test` checked against the state the
one before it set. A step with side effects (pods deleted or evicted, a kernel recorded, a
pin moved, a takeover released) ends the fold: it must see the node written first (pods go
only from a node already cordoned on the server).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from components.upgrade._model import NodeView, node_view
from components.upgrade._patches import Op, transition_patch
from components.upgrade._step import Step, Transition
from reconciler import Object

MAX_FOLDED = 8
"""Transitions in one write at most (the walk has fewer states than that in a row)."""


@dataclass(frozen=True, slots=True)
class Fold:
    """Transitions and the one JSON patch that takes them all."""

    ops: list[Op]
    steps: tuple[tuple[NodeView, Transition], ...]
    """Each transition with the node as it was when it was planned (for its log line)."""


def fold(
    obj: Object,
    node: NodeView,
    first: Transition,
    plan: Callable[[NodeView], Step],
    now: float,
) -> Fold:
    """`first`, and after it every transition `plan` gives for the node as the patch so far
    leaves it, while each is a transition and nothing else."""
    ops = transition_patch(node, first, now)
    steps = [(node, first)]
    last_ops, current = ops, obj
    while last_ops and len(steps) < MAX_FOLDED:
        after = patched(current, last_ops)
        if after is None:
            break
        view = node_view(after)
        t = _foldable(plan(view))
        if t is None:
            break
        last_ops = transition_patch(view, t, now)
        if not last_ops:
            break
        ops = ops + last_ops
        steps.append((view, t))
        current = after
    return Fold(ops=ops, steps=tuple(steps))


def _foldable(step: Step) -> Transition | None:
    """The step's transition when it is all the step does, and changes nothing but the node."""
    t = step.transition
    if t is None or step.delete or step.evict or step.record_kernel:
        return None
    return t if t.pin_kernel is None and not t.release_takeover else None


def patched(obj: Object, ops: list[Op]) -> Object | None:
    """`obj` after `ops`, as the API server applies a JSON patch (in order, all or
    nothing); None when a `test` fails or a removed path is missing."""
    work = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = work
        for part in parts[:-1]:
            parent = parent.setdefault(part, {})
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            if parent.get(last) != op["value"]:
                return None
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in parent:
                return None
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if last not in parent:
                return None
            del parent[last]
        else:
            raise ValueError(f"JSON patch op {kind!r} is not one the walk writes")
    return work
