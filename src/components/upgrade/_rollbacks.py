"""The pool reconcile's side of a rollback: its node writes (marks, and clearing them when
it ends), its conditions (the `RollingBack` condition also binds the request to the spec:
`components.api.rollback_request`), and one INFO line and one Event per change.

The decisions are `_rollback.rollback_plan`'s; this only carries them out. The operator
never writes the policy itself, only its status: the binding is written with the rest of
`status.upgrade`, once the cache shows every mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from components.api import (
    ROLLBACK_ANNOTATION,
    ROLLBACK_NODE,
    Condition,
    rollback_condition,
    rollback_request,
)
from components.upgrade._budget import CONDITION as HALTED_CONDITION
from components.upgrade._budget import failing
from components.upgrade._model import NodeView, template_image
from components.upgrade._names import DAEMONSET, NODE
from components.upgrade._pods import is_driver_pod
from components.upgrade._reader import ClusterReader, Pool, PoolKey, template_labels
from components.upgrade._rollback import (
    CONDITION,
    ENDED,
    HALTED_REASON,
    INVALID,
    RollbackPlan,
    halted_message,
    rollback_plan,
    rolling_back_message,
)
from components.upgrade._times import format_time
from reconciler import EventRecorder, Object
from reconciler.errors import NotFound

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
        self._said: dict[PoolKey, Condition] = {}
        """Per pool: its `RollingBack` condition as last written (the cache may lag)."""
        self._events: set[asyncio.Task[None]] = set()

    def plan(self, pool: Pool, views: list[NodeView]) -> RollbackPlan | None:
        """None: the pool has no request, nothing bound, nothing to say."""
        said = self._said.get(pool.key)
        stored = said.model_dump(by_alias=True, exclude_none=True) if said is not None else True
        request = rollback_request(pool.obj, stored)
        if request.mode is None and request.bound is None and not request.problem:
            self._forget(pool)
            return None
        return rollback_plan(
            request, views, (n for n, _ in failing(views)), images=self._images(pool)
        )

    def holds(self, plan: RollbackPlan | None) -> bool:
        """The rollback decides admission (instead of the halt and the canaries)."""
        request = plan.request if plan is not None else None
        return request is not None and (request.active or request.to_bind)

    def writes(self, pool: Pool, plan: RollbackPlan | None) -> list[Write]:
        if plan is None:
            return []
        if plan.clear:
            return [self._marks(pool, plan.clear, None)]
        if plan.mark:
            return [self._marks(pool, plan.mark, "true")]
        return []

    def conditions(self, pool: Pool, plan: RollbackPlan, version: str) -> list[Condition]:
        """`RollingBack`, and while the rollback holds, `UpgradeHalted` saying why."""
        request = plan.request
        if request.problem:
            return [self._condition(pool, "False", INVALID, request.problem, warning=True)]
        if request.ended or request.spent:
            gen = request.bound or _observed(self._said.get(pool.key))
            message = (
                "the rollback ended: the spec changed (or the request was withdrawn); remove "
                f"the annotation {ROLLBACK_ANNOTATION} and set it again to ask for another"
            )
            return [self._condition(pool, "False", ENDED, message, generation=gen)]
        if not self.holds(plan):
            return []
        rolling, reason, message = rolling_back_message(plan, version)
        bound = request.active or plan.bind
        generation = request.generation if bound else None
        condition = self._condition(
            pool, "True" if rolling else "False", reason, message, generation=generation
        )
        return [
            condition,
            Condition(
                type=HALTED_CONDITION,
                status="True",
                reason=HALTED_REASON,
                message=halted_message(plan, version),
                last_transition_time=condition.last_transition_time,
            ),
        ]

    def rolling_back(self) -> int:
        """Pools whose rollback still walks nodes back (the gauge)."""
        return sum(1 for c in self._said.values() if c.status == "True")

    # -- internals -----------------------------------------------------------------------

    def _images(self, pool: Pool) -> frozenset[str]:
        """The images the pool's driver DaemonSets run now."""
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
        generation: str | None = None,
        warning: bool = False,
    ) -> Condition:
        said = self._said.get(pool.key) or _stored(pool.obj)
        if said is not None and (said.status, said.reason) == (status, reason):
            since = said.last_transition_time
        else:
            since = format_time(self.clock())
            self._announce(pool, reason, message, warning=warning)
        condition = Condition(
            type=CONDITION,
            status=status,
            reason=reason,
            message=message[:32768],
            last_transition_time=since,
            observed_generation=int(generation) if generation else None,
        )
        self._said[pool.key] = condition
        return condition

    def _forget(self, pool: Pool) -> None:
        self._said.pop(pool.key, None)

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

    async def _marks(self, pool: Pool, nodes: tuple[str, ...], value: str | None) -> None:
        await asyncio.gather(*(self._patch_node(n, value) for n in nodes))
        what = "marked" if value else "unmarked"
        log.info("%s %s: rollback: %s %s", pool.kind, pool.name, what, ", ".join(nodes))

    async def _patch_node(self, name: str, value: str | None) -> None:
        patch = {"metadata": {"annotations": {ROLLBACK_NODE: value}}}
        with contextlib.suppress(NotFound):  # a node gone has nothing to go back to
            await self.client.patch(NODE, name, patch)


def _observed(condition: Condition | None) -> str | None:
    if condition is None or condition.observed_generation is None:
        return None
    return str(condition.observed_generation)


def _stored(obj: Object) -> Condition | None:
    """The `RollingBack` condition as the policy's status holds it (after a restart)."""
    found = rollback_condition(obj)
    if found is None:
        return None
    try:
        return Condition.model_validate(found)
    except ValueError:
        return None
