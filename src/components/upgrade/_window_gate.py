"""Maintenance windows at admission: outside every window of a pool's policy no waiting
node is admitted (nodes already in the walk go on: only admission is gated), the policy's
`status.upgrade.conditions` says `UpgradeWaitingForWindow` with when the next window
opens, and an Event and an INFO line say it once, when nodes start waiting.

The decision is `_windows.verdict` (pure, on the walk's clock); this module only keeps
each pool's condition since its last change, so its transition time holds and the Event
is not repeated (after a restart the condition stored on the policy tells).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from components.api import Condition, UpgradeState
from components.upgrade._canary import CanaryGate
from components.upgrade._model import NodeView
from components.upgrade._reader import Pool, PoolKey
from components.upgrade._times import format_time
from components.upgrade._windows import (
    CONDITION,
    IDLE_REASON,
    INSIDE_REASON,
    INVALID_REASON,
    RECHECK_SECONDS,
    WAITING_REASON,
    WindowVerdict,
    verdict,
)
from reconciler import EventRecorder, Object

log = logging.getLogger("components.upgrade")

S = UpgradeState


@dataclass(frozen=True, slots=True)
class WindowDecision:
    gate: CanaryGate | None = None
    """The waiting nodes held back (None: the windows hold nobody)."""
    conditions: list[Condition] = field(default_factory=list)
    requeue_after: float | None = None


NONE = WindowDecision()


def describe(v: WindowVerdict, waiting: int) -> tuple[str, str, str]:
    """(status, reason, message) of the condition, for a verdict and the waiting nodes."""
    if v.problem:
        return "True", INVALID_REASON, f"no node is admitted: {v.problem}"
    if v.open:
        until = f" until {v.when(v.closes_at)}" if v.closes_at is not None else ""
        return "False", INSIDE_REASON, f"inside a maintenance window{until}"
    opens = f"the next opens at {v.when(v.opens_at)}" if v.opens_at is not None else ""
    if not waiting:
        return "False", IDLE_REASON, f"outside the maintenance windows ({opens}); no node waits"
    nodes = "1 node waits" if waiting == 1 else f"{waiting} nodes wait"
    return "True", WAITING_REASON, f"{nodes} for a maintenance window: {opens}"


def node_wait(v: WindowVerdict) -> str:
    """What a held node's entry in the status says."""
    if v.problem:
        return f"waiting: {v.problem}"
    return f"waiting for the maintenance window that opens at {v.when(v.opens_at or 0.0)}"


class WindowGate:
    def __init__(self, recorder: EventRecorder, clock: Callable[[], float]) -> None:
        self.recorder = recorder
        self.clock = clock
        self._since: dict[PoolKey, tuple[str, str, str]] = {}
        """Per pool with windows: the condition's status, reason and transition time."""
        self._events: set[asyncio.Task[None]] = set()

    def decide(self, pool: Pool, views: Sequence[NodeView]) -> WindowDecision:
        windows = pool.policy.maintenance_windows
        if not pool.enabled or not windows:
            self._since.pop(pool.key, None)
            return NONE
        now = self.clock()
        v = verdict(windows, now)
        waiting = frozenset(n.name for n in views if n.state is S.UPGRADE_REQUIRED and not n.skip)
        status, reason, message = describe(v, len(waiting))
        since = self._transition(pool, status, reason, message)
        condition = Condition(
            type=CONDITION,
            status=status,  # type: ignore[arg-type]
            reason=reason,
            message=message[:32768],
            last_transition_time=since,
        )
        if v.open:
            # Look again when it closes: the status says until when it is open.
            left = (v.closes_at - now) if v.closes_at is not None else None
            return WindowDecision(conditions=[condition], requeue_after=_capped(left))
        gate = CanaryGate(hold=waiting, wait=node_wait(v)) if waiting else None
        return WindowDecision(gate, [condition], _capped(v.seconds_to_open(now)))

    def _transition(self, pool: Pool, status: str, reason: str, message: str) -> str:
        previous = self._since.get(pool.key) or _stored(pool.obj)
        if previous is not None and previous[:2] == (status, reason):
            since = previous[2]
        else:
            since = format_time(self.clock())
            if status == "True":
                self._announce(pool, message)
            elif previous is not None and previous[0] == "True":
                log.info("%s %s: %s", pool.kind, pool.name, message)
        self._since[pool.key] = (status, reason, since)
        return since

    def _announce(self, pool: Pool, message: str) -> None:
        log.info("%s %s: %s", pool.kind, pool.name, message)
        task = asyncio.get_running_loop().create_task(
            self.recorder.event(pool.obj, "Normal", CONDITION, message)
        )
        self._events.add(task)
        task.add_done_callback(self._events.discard)


def _capped(seconds: float | None) -> float | None:
    if seconds is None:
        return None
    return min(max(seconds, 0.0) + 0.05, RECHECK_SECONDS)


def _stored(obj: Object) -> tuple[str, str, str] | None:
    """The condition as the policy's status holds it (after a restart)."""
    upgrade = (obj.get("status") or {}).get("upgrade") or {}
    for c in upgrade.get("conditions") or []:
        if c.get("type") == CONDITION:
            return (
                str(c.get("status") or ""),
                str(c.get("reason") or ""),
                str(c.get("lastTransitionTime") or ""),
            )
    return None
