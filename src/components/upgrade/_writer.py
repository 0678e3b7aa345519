"""Every write the upgrade makes to a node, and the log line and events that tell of it.

A state transition is one JSON patch that tests the state label it was planned from, so a
node that moved since the cache showed it is never written from a stale plan (the patch
is refused and the node read again). Each write is remembered (`WriteTracker`) until the
cache shows it; events go out in the background, never slowing a step down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from components.api import DRIVER_KERNEL_PIN_LABEL, DRIVER_TAKEOVER_LABEL
from components.upgrade._fold import Fold
from components.upgrade._model import NodeView
from components.upgrade._names import EVENT_REASON, NODE
from components.upgrade._node_requests import node_ref
from components.upgrade._patches import client_changes, transition_patch
from components.upgrade._pin import PinChange
from components.upgrade._reader import Pool
from components.upgrade._step import Transition
from components.upgrade._tracker import WriteTracker
from reconciler import (
    NORMAL,
    WARNING,
    Client,
    EventRecorder,
    Object,
    PatchType,
    resource_version_of,
)
from reconciler.errors import Conflict as ApiConflict
from reconciler.errors import Invalid, NotFound

log = logging.getLogger("components.upgrade")


class NodeWriter:
    def __init__(
        self,
        client: Client,
        recorder: EventRecorder,
        *,
        clock: Callable[[], float],
        expectation_timeout: float,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.tracker = WriteTracker(timeout=expectation_timeout)
        """Every node write: a node's reconcile waits until its cache shows its last one."""
        self.admissions = WriteTracker(timeout=expectation_timeout)
        """Admission's writes: the next admission waits until the cache shows them all."""
        self.blocked: dict[str, str] = {}
        """Node -> why its last evictions were refused (until it moves on)."""
        self._tasks: set[asyncio.Task[None]] = set()

    async def transition(
        self,
        obj: Object,
        node: NodeView,
        t: Transition,
        pool: Pool | None,
        *,
        admission: bool = False,
    ) -> Object | None:
        """The node as written; `obj` itself when there was nothing to write; None when
        the server refused (the node changed since it was read) or the node is gone."""
        steps = ((node, t),)
        return await self.write_fold(
            obj, Fold(transition_patch(node, t, self.clock()), steps), pool, admission=admission
        )

    async def write_fold(
        self, obj: Object, f: Fold, pool: Pool | None, *, admission: bool = False
    ) -> Object | None:
        """`transition` for transitions folded into one patch (`_fold`): one request, one
        log line and one event for all of them."""
        node = f.steps[0][0]
        if not f.ops:
            return obj
        try:
            written = await self.client.patch(
                NODE, node.name, f.ops, patch_type=PatchType.JSON, quiet=True
            )
        except Invalid as exc:
            # The state label (or an annotation) changed since we read it: re-read.
            to = f.steps[-1][1].to
            log.debug("node %s: transition to %s refused: %s", node.name, to, exc)
            return None
        except NotFound:
            return None
        self.tracker.record(written)
        if admission:
            self.admissions.record(written)
        self.blocked.pop(node.name, None)
        if any(_changes(view, t) for view, t in f.steps):
            before = f.steps[0][0].state.value or "unknown"
            path = [before]
            for _, t in f.steps:
                after = t.to.value if t.to is not None else "(none)"
                if after != path[-1]:
                    path.append(after)
            change = " -> ".join(path)
            reasons = "; ".join(t.reason for _, t in f.steps if t.reason)
            message = f"{change}: {reasons}" if reasons else change
            log.info("node %s: %s", node.name, message)
            type_ = WARNING if any(t.warning for _, t in f.steps) else NORMAL
            self.event_node(node, type_, message)
            if pool is not None:
                self.event(pool.obj, type_, f"node {node.name}: {message}")
        return written

    async def write_pin(self, obj: Object, node: NodeView, change: PinChange) -> Object | None:
        """One merge patch of the pin, refused (409) if the node changed since we read it."""
        body = {
            "metadata": {
                "resourceVersion": resource_version_of(obj) or None,
                "labels": {DRIVER_KERNEL_PIN_LABEL: change.value},
            }
        }
        try:
            written = await self.client.patch(NODE, node.name, body, quiet=True)
        except (ApiConflict, NotFound):
            return None
        self.tracker.record(written)
        if change.value is None:
            message = f"removed the precompiled driver kernel pin: {change.reason}"
        else:
            message = f"pinned to the precompiled driver for kernel {change.value}: {change.reason}"
        log.info("node %s: %s", node.name, message)
        self.event_node(node, NORMAL, message)
        return written

    async def write_release(self, obj: Object, node: NodeView, reason: str) -> Object | None:
        """Remove the takeover label (one merge patch, refused (409) if the node changed
        since we read it): the node leaves the reference's driver for ours."""
        body = {
            "metadata": {
                "resourceVersion": resource_version_of(obj) or None,
                "labels": {DRIVER_TAKEOVER_LABEL: None},
            }
        }
        try:
            written = await self.client.patch(NODE, node.name, body, quiet=True)
        except (ApiConflict, NotFound):
            return None
        self.tracker.record(written)
        message = f"handed from the reference operator's driver to ours: {reason}"
        log.info("node %s: %s", node.name, message)
        self.event_node(node, NORMAL, message)
        return written

    def event_node(self, node: NodeView, type_: str, message: str) -> None:
        self.event(node_ref(node.name, node.uid), type_, message)

    def event(self, obj: Object, type_: str, message: str) -> None:
        """Fire and forget: an event must never slow a step down."""
        task = asyncio.get_running_loop().create_task(
            self.recorder.event(obj, type_, EVENT_REASON, message)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _changes(node: NodeView, t: Transition) -> bool:
    """Whether `t` changes what the log tells of `node`: its state, the kernel pin, the
    takeover or the driver's clients."""
    before = node.state.value or "unknown"
    after = t.to.value if t.to is not None else "(none)"
    moved_pin = t.pin_kernel is not None and (t.pin_kernel or None) != node.pinned_kernel
    handed_over = t.release_takeover and node.taken_over
    return before != after or moved_pin or handed_over or bool(client_changes(node, t))
