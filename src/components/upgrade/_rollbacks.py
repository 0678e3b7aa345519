"""The pool reconcile's side of a rollback: its writes (marks, the request bound to the
spec, the cleanup when it ends), its conditions, and one INFO line and one Event per change.

The decisions are `_rollback.rollback_plan`'s; this only carries them out, in the order
that keeps a crash harmless: marks before the binding, marks before the annotations go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from components.api import (
    ROLLBACK_ANNOTATION,
    ROLLBACK_GENERATION,
    ROLLBACK_NODE,
    ROLLBACK_SINCE,
    Condition,
    RollbackRequest,
    rollback_request,
)
from components.upgrade._budget import CONDITION as HALTED_CONDITION
from components.upgrade._budget import failing
from components.upgrade._model import NodeView, template_image
from components.upgrade._names import CLUSTER_POLICY, DAEMONSET, NODE, NVIDIA_DRIVER
from components.upgrade._pods import is_driver_pod
from components.upgrade._reader import ClusterReader, Pool, PoolKey, template_labels
from components.upgrade._rollback import (
    CONDITION,
    HALTED_REASON,
    INVALID,
    RollbackPlan,
    halted_message,
    rollback_plan,
    rolling_back_message,
)
from components.upgrade._times import format_time, parse_time
from reconciler import EventRecorder, Object
from reconciler.errors import Conflict, NotFound

log = logging.getLogger("components.upgrade")

Write = Coroutine[Any, Any, None]


class Rollbacks:
    def __init__(
        self,
        reader: ClusterReader,
        client: Any,
        recorder: EventRecorder,
        clock: Callable[[], float],
    ) -> None:
        self.reader, self.client, self.recorder, self.clock = reader, client, recorder, clock
        self._said: dict[PoolKey, tuple[str, str, str]] = {}
        """Per pool: (status, reason, since) of its `RollingBack` condition as last said."""
        self._binding: dict[PoolKey, tuple[str, str]] = {}
        """Per pool: the (generation, since) we bound its request to (a cache behind our
        write must not bind it again with another time)."""
        self._events: set[asyncio.Task[None]] = set()

    def plan(self, pool: Pool, views: list[NodeView]) -> RollbackPlan | None:
        """None: the pool has no request, nothing bound, nothing to say."""
        request = rollback_request(pool.obj)
        if request.mode is None and request.stamp is None and not request.problem:
            self._forget(pool)
            return None
        bound = self._binding.get(pool.key)
        if request.to_stamp and bound is not None and bound[0] == request.generation:
            request = _bound(request, *bound)
        new_images = self._images(pool) if request.to_stamp else frozenset()
        return rollback_plan(
            request,
            views,
            (n for n, _ in failing(views)),
            new_images=new_images,
            started=parse_time(request.since),
        )

    def holds(self, plan: RollbackPlan | None) -> bool:
        """The rollback decides admission (instead of the halt and the canaries)."""
        return plan is not None and plan.request.mode is not None and not plan.request.ended

    def writes(self, pool: Pool, plan: RollbackPlan | None) -> list[Write]:
        if plan is None:
            return []
        if plan.clear or plan.request.ended:
            return [self._end(pool, plan)]
        if plan.mark or plan.stamp:
            return [self._begin(pool, plan)]
        return []

    def conditions(self, pool: Pool, plan: RollbackPlan, version: str) -> list[Condition]:
        """`RollingBack`, and while the rollback holds, `UpgradeHalted` saying why."""
        request = plan.request
        if request.problem:
            return [self._condition(pool, "False", INVALID, request.problem, warning=True)]
        if not self.holds(plan):
            return []
        rolling, reason, message = rolling_back_message(plan, version)
        since = request.since or format_time(self.clock())
        return [
            self._condition(pool, "True" if rolling else "False", reason, message),
            Condition(
                type=HALTED_CONDITION,
                status="True",
                reason=HALTED_REASON,
                message=halted_message(plan, version),
                last_transition_time=since,
            ),
        ]

    def rolling_back(self) -> int:
        """Pools whose rollback still walks nodes back (the gauge)."""
        return sum(1 for s in self._said.values() if s[0] == "True")

    # -- internals -----------------------------------------------------------------------

    def _images(self, pool: Pool) -> frozenset[str]:
        """The images the pool's driver DaemonSets run now (before the pin)."""
        found: set[str] = set()
        for ds in self.reader.cache.list(DAEMONSET, namespace=self.reader.namespace):
            if not is_driver_pod(template_labels(ds)):
                continue
            owner = self.reader.pool_for_daemonset(ds)
            image = template_image(ds)
            if owner is not None and owner.key == pool.key and image:
                found.add(image)
        return frozenset(found)

    def _condition(
        self,
        pool: Pool,
        status: Literal["True", "False"],
        reason: str,
        message: str,
        *,
        warning: bool = False,
    ) -> Condition:
        said = self._said.get(pool.key) or _stored(pool.obj)
        if said is not None and said[:2] == (status, reason):
            since = said[2]
        else:
            since = format_time(self.clock())
            self._announce(pool, reason, message, warning=warning)
        self._said[pool.key] = (status, reason, since)
        return Condition(
            type=CONDITION,
            status=status,
            reason=reason,
            message=message[:32768],
            last_transition_time=since,
        )

    def _forget(self, pool: Pool) -> None:
        self._binding.pop(pool.key, None)
        if self._said.pop(pool.key, None) is not None:
            self._announce(pool, "RollbackEnded", "the rollback ended: the spec changed")

    def _announce(self, pool: Pool, reason: str, message: str, *, warning: bool = False) -> None:
        if warning:
            log.warning("%s %s: %s", pool.kind, pool.name, message)
        else:
            log.info("%s %s: %s", pool.kind, pool.name, message)
        task = asyncio.get_running_loop().create_task(
            self.recorder.event(pool.obj, "Warning" if warning else "Normal", reason, message)
        )
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _patch_node(self, name: str, value: str | None) -> None:
        patch = {"metadata": {"annotations": {ROLLBACK_NODE: value}}}
        with contextlib.suppress(NotFound):  # a node gone has nothing to go back to
            await self.client.patch(NODE, name, patch)

    async def _patch_policy(self, pool: Pool, annotations: dict[str, str | None]) -> None:
        gvk = CLUSTER_POLICY if pool.kind == "ClusterPolicy" else NVIDIA_DRIVER
        try:
            await self.client.patch(gvk, pool.name, {"metadata": {"annotations": annotations}})
        except (NotFound, Conflict) as exc:
            log.debug("%s %s: rollback annotations not written: %s", pool.kind, pool.name, exc)

    async def _begin(self, pool: Pool, plan: RollbackPlan) -> None:
        await asyncio.gather(*(self._patch_node(n, "true") for n in plan.mark))
        if plan.mark:
            log.info(
                "%s %s: rollback (%s): marked %s to go back to their last good driver",
                pool.kind,
                pool.name,
                plan.request.mode,
                ", ".join(plan.mark),
            )
        if not plan.stamp:
            return
        generation = plan.request.generation
        since = format_time(self.clock())
        self._binding[pool.key] = (generation, since)
        await self._patch_policy(pool, {ROLLBACK_GENERATION: generation, ROLLBACK_SINCE: since})

    async def _end(self, pool: Pool, plan: RollbackPlan) -> None:
        await asyncio.gather(*(self._patch_node(n, None) for n in plan.clear))
        await self._patch_policy(
            pool, {ROLLBACK_ANNOTATION: None, ROLLBACK_GENERATION: None, ROLLBACK_SINCE: None}
        )


def _bound(request: RollbackRequest, generation: str, since: str) -> RollbackRequest:
    return RollbackRequest(
        mode=request.mode, stamp=generation, generation=request.generation, since=since
    )


def _stored(obj: Object) -> tuple[str, str, str] | None:
    """The `RollingBack` condition as the policy's status holds it (after a restart)."""
    upgrade = (obj.get("status") or {}).get("upgrade") or {}
    for c in upgrade.get("conditions") or []:
        if c.get("type") == CONDITION:
            return (
                str(c.get("status")),
                str(c.get("reason")),
                str(c.get("lastTransitionTime") or ""),
            )
    return None
