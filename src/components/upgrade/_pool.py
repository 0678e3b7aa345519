"""The pool reconcile: admission, the one step that weighs nodes against each other
(maxParallelUpgrades, maxUnavailable), then each policy's `status.upgrade` and the metrics.

Being a single request, two admissions never run at once; and it waits until the cache
shows every node it admitted before, so it never counts from a view older than its own
last decision. Every other step keeps or lowers what the limits count, so a view that lags
behind those can only make admission more careful, never less.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from components.api import Condition, UpgradeState
from components.upgrade._budget import CONDITION as HALTED_CONDITION
from components.upgrade._budget import HALTED_REASON, WITHIN_REASON, Halt, halt
from components.upgrade._canary import OPEN, CanaryGate, canary_gate
from components.upgrade._fold import Fold
from components.upgrade._limits import Counts, admit, counts
from components.upgrade._metrics import UpgradeMetrics
from components.upgrade._model import NodeView
from components.upgrade._names import NODE, STATE_LABEL, STATUS_FIELD_MANAGER
from components.upgrade._preflight import AdmissionPreflight
from components.upgrade._reader import ClusterReader, Pool, PoolKey
from components.upgrade._rollbacks import Rollbacks
from components.upgrade._status import Entries, Waits, status_body, upgrade_status
from components.upgrade._step import Transition
from components.upgrade._times import format_time
from components.upgrade._window_gate import WindowGate
from components.upgrade._writer import NodeWriter
from reconciler import Object, Request, Result, label_index_name, paced_interval
from reconciler.errors import Conflict as ApiConflict
from reconciler.errors import Invalid, NotFound

log = logging.getLogger("components.upgrade")

S = UpgradeState

AdmissionFold = Callable[[Object, Transition], Awaitable[Fold | None]]
StatusSink = Callable[[Object], Awaitable[object]]
"""Writes a `status.upgrade` body (`status_body`): the writer of the policy's status, where
an operator runs both (`components.controllers`); by default a server-side apply of that
part alone under `STATUS_FIELD_MANAGER`."""


class PoolReconciler:
    def __init__(
        self,
        reader: ClusterReader,
        writer: NodeWriter,
        waits: Waits,
        metrics: UpgradeMetrics,
        *,
        admission_fold: AdmissionFold | None = None,
        preflight: AdmissionPreflight | None = None,
        status_sink: StatusSink | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        """Wall time, as the walk writes it on nodes (a canary's soak counts from it)."""
        self.cache = reader.cache
        self.reader, self.writer, self.waits, self.metrics = reader, writer, waits, metrics
        self.admission_fold = admission_fold
        """The node reconcile's plan for what an admitted node does at once (None: admission
        writes only its own transition)."""
        self.preflight = preflight
        """Which waiting nodes must stay out of the walk (their image is not known to
        exist); None: no check."""
        client = writer.client
        self.status_sink: StatusSink = status_sink or (
            lambda body: client.apply_status(body, field_manager=STATUS_FIELD_MANAGER)
        )
        self._status_writers: dict[PoolKey, _StatusWriter] = {}
        self._entries = Entries()
        self._summary_due = 0.0
        self._canary_due: float | None = None
        """When a canary's soak ends or its health is looked at again (None: no canary holds
        any node back)."""
        self.rollbacks = Rollbacks(reader, client, writer.recorder, clock)
        """Each pool's rollback request (`_rollback`): its marks, binding and conditions."""
        self._halted: dict[PoolKey, tuple[bool, str]] = {}
        self._events: set[asyncio.Task[None]] = set()
        """Per pool with a failure budget: halted or not, and since when (RFC 3339)."""
        self._canary_waits: dict[PoolKey, str] = {}
        self.windows = WindowGate(writer.recorder, clock)
        """Maintenance windows: outside them no waiting node is admitted."""
        self._window_due: float | None = None
        """Per pool, why its other nodes wait for the canaries (logged once per change)."""
        """When the counts may be taken again while no node waits for a slot."""

    async def reconcile(self, request: Request) -> Result | None:
        # Admission is the only step that adds to what the limits count (every other step
        # keeps or lowers in-progress and unavailable), so a cache that shows every earlier
        # admission can only overcount: decide once it does. The events of those writes
        # requeue us; the requeue below only fires if an event was lost.
        if self.writer.admissions.pending(lambda n: self.cache.get(NODE, n)):
            return Result(requeue_after=self.writer.admissions.seconds_left() + 0.05)
        now = time.monotonic()
        if not self._waiting_for_a_slot() and now < self._summary_due:
            # Nothing to admit: the counts, status and metrics are all this reconcile would
            # do, and they can wait their (slower) turn.
            return Result(requeue_after=self._summary_due - now)
        began = time.thread_time()
        if self.preflight is not None:
            self.preflight.begin()
        pools, members = self.reader.members()
        totals = {"in_progress": 0, "done": 0, "failed": 0, "available": 0, "pending": 0}
        writes: list[Any] = []
        halted = 0
        self._canary_due = self._window_due = None
        for key, pool in pools.items():
            views = sorted(members.get(key, {}).values(), key=lambda n: n.name)
            c = counts(views, pool.policy)
            gate = canary_gate(views, pool.policy, self.clock()) if pool.enabled else OPEN
            self._note_canaries(pool, gate)
            stop = halt(views, pool.policy, _version(pool)) if pool.enabled else None
            if stop is not None:
                halted += 1
                waiting = frozenset(v.name for v in views if v.state is S.UPGRADE_REQUIRED)
                gate = CanaryGate(hold=waiting, wait=f"upgrade halted: {stop.message()}")
            window = self.windows.decide(pool, views)
            if stop is None and window.gate is not None:
                gate = window.gate  # every waiting node: the canaries' hold is within it
            if window.requeue_after is not None:
                self._window_due = min(
                    self._window_due or window.requeue_after, window.requeue_after
                )
            rollback = self.rollbacks.plan(pool, views) if pool.enabled else None
            if rollback is not None and self.rollbacks.holds(rollback):
                # The rollback decides who walks (a maintenance window still closes the
                # door); the rollout stays halted meanwhile.
                halted += stop is None
                self._halted.pop(pool.key, None)
                gate = CanaryGate(
                    hold=rollback.hold
                    | (window.gate.hold if window.gate is not None else frozenset()),
                    wait=rollback.wait,
                )
                conditions = self.rollbacks.conditions(pool, rollback, _version(pool))
                conditions += window.conditions
            else:
                conditions = self._halt_conditions(pool, stop) + window.conditions
                if rollback is not None:
                    conditions += self.rollbacks.conditions(pool, rollback, _version(pool))
            writes.extend(self.rollbacks.writes(pool, rollback))
            if pool.enabled:
                for k in totals:
                    totals[k] += getattr(c, k)
                writes.extend(self._admit(pool, views, c, gate))
            self._write_status(pool, views, c, gate, conditions)
        self._summary_due = now + paced_interval(
            time.thread_time() - began,
            minimum=SUMMARY_INTERVAL,
            share=SUMMARY_SHARE,
            maximum=SUMMARY_MAX_INTERVAL,
        )
        await asyncio.gather(*writes)
        self.metrics.set(enabled=any(p.enabled for p in pools.values()), **totals)
        self.metrics.halted.set(halted)
        self.metrics.rolling_back.set(self.rollbacks.rolling_back())
        due = self.preflight.requeue_after() if self.preflight is not None else None
        for later in (self._canary_due, self._window_due):
            if later is not None:
                due = later if due is None else min(due, later)
        # A held node or a reported image is looked at again when its verdict is due.
        return Result(requeue_after=due + 0.05) if due is not None else None

    def status_writes_pending(self) -> bool:
        """Whether a policy's `status.upgrade` is still to be written or being written (the
        writes run off the reconcile's path, so an empty queue does not say it)."""
        return any(w.pending() for w in self._status_writers.values())

    def _waiting_for_a_slot(self) -> bool:
        """Whether any node is `upgrade-required` (from the state label's index: no view of
        every node is built to answer it)."""
        index = (label_index_name(STATE_LABEL), S.UPGRADE_REQUIRED.value)
        return bool(self.cache.list(NODE, index=index))

    def _admit(self, pool: Pool, views: list[NodeView], c: Counts, gate: CanaryGate) -> list[Any]:
        hold = self.preflight.held(pool, views) if self.preflight is not None else frozenset()
        chosen = admit(views, pool.policy, hold=hold | gate.hold)
        by_name = {v.name: v for v in views}
        cap = c.max_parallel or "unlimited"
        writes = []
        for i, name in enumerate(chosen):
            reason = (
                f"upgrade started ({c.in_progress + i + 1} in progress, maxParallelUpgrades "
                f"{cap}, maxUnavailable {c.max_unavailable})"
            )
            node = by_name[name]
            obj = self.cache.get(NODE, name)
            if obj is None:
                continue
            writes.append(self._start(obj, node, reason, pool))
        return writes

    def _note_canaries(self, pool: Pool, gate: CanaryGate) -> None:
        """When to look again while canaries hold nodes back; an INFO line when they begin
        or stop holding them."""
        if gate.requeue_after is not None:
            due = self._canary_due
            self._canary_due = gate.requeue_after if due is None else min(due, gate.requeue_after)
        wait = gate.wait
        if self._canary_waits.get(pool.key, "") == wait:
            return
        before = self._canary_waits.pop(pool.key, "")
        if wait:
            self._canary_waits[pool.key] = wait
            if not before:
                log.info("%s %s: the other nodes wait for the canaries", pool.kind, pool.name)
            else:
                log.debug("%s %s: %s", pool.kind, pool.name, wait)
        else:
            log.info("%s %s: the canaries no longer hold the others back", pool.kind, pool.name)

    async def _start(self, obj: Object, node: NodeView, reason: str, pool: Pool) -> None:
        """Admit one node (upgrade-required -> cordon-required, and on in the same write
        as far as the node can go at once), remembered as an admission: the next admission
        waits until the cache shows it."""
        t = Transition(S.CORDON_REQUIRED, reason)
        folded = await self.admission_fold(obj, t) if self.admission_fold else None
        if folded is None:
            await self.writer.transition(obj, node, t, pool, admission=True)
        else:
            await self.writer.write_fold(obj, folded, pool, admission=True)

    def _halt_conditions(self, pool: Pool, stop: Halt | None) -> list[Condition]:
        """The `UpgradeHalted` condition of a pool with a failure budget (none without one),
        its transition time kept while its status holds; an INFO line and an Event when it
        turns."""
        if pool.policy.failure_budget is None or not pool.enabled:
            self._halted.pop(pool.key, None)
            return []
        halted = stop is not None
        previous = self._halted.get(pool.key) or _stored_halt(pool.obj)
        if previous is not None and previous[0] == halted:
            since = previous[1]
        else:
            since = format_time(self.clock())
            if halted or previous is not None:
                self._announce(pool, stop)
        self._halted[pool.key] = (halted, since)
        message = (
            stop.message()
            if stop is not None
            else f"failed nodes within the failure budget ({pool.policy.failure_budget})"
        )
        return [
            Condition(
                type=HALTED_CONDITION,
                status="True" if halted else "False",
                reason=HALTED_REASON if halted else WITHIN_REASON,
                message=message[:32768],
                last_transition_time=since,
            )
        ]

    def _announce(self, pool: Pool, stop: Halt | None) -> None:
        if stop is None:
            log.info("%s %s: upgrade resumes: failures within the budget", pool.kind, pool.name)
            return
        log.info("%s %s: upgrade halted: %s", pool.kind, pool.name, stop.message())
        task = asyncio.get_running_loop().create_task(
            self.writer.recorder.event(pool.obj, "Warning", HALTED_CONDITION, stop.message())
        )
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    def _write_status(
        self,
        pool: Pool,
        views: list[NodeView],
        c: Counts,
        gate: CanaryGate,
        conditions: list[Condition],
    ) -> None:
        """Hands the status to its writer, which builds it when its turn comes: admission
        never pays for a status over every node, and a burst of events builds one. A node
        the canaries hold back says so instead of waiting for a slot."""
        waits = dict(self.waits.by_node)
        waits.update(dict.fromkeys(gate.hold, gate.wait))

        def body() -> Object | None:
            status = upgrade_status(
                views,
                c,
                auto_upgrade=pool.enabled,
                waits=waits,
                entries=self._entries,
                conditions=conditions,
            )
            return status_body(pool.obj, status)

        writer = self._status_writers.get(pool.key)
        if writer is None:
            writer = self._status_writers[pool.key] = _StatusWriter(self.status_sink, pool)
        writer.submit(body)


def _version(pool: Pool) -> str:
    """The driver version the pool's policy asks for ("" when it names none)."""
    spec = pool.obj.get("spec") or {}
    driver = spec.get("driver") if pool.kind == "ClusterPolicy" else spec
    return str((driver or {}).get("version") or "")


def _stored_halt(obj: Object) -> tuple[bool, str] | None:
    """The `UpgradeHalted` condition as the policy's status holds it (after a restart)."""
    upgrade = (obj.get("status") or {}).get("upgrade") or {}
    for c in upgrade.get("conditions") or []:
        if c.get("type") == HALTED_CONDITION:
            return c.get("status") == "True", str(c.get("lastTransitionTime") or "")
    return None


SUMMARY_INTERVAL = 0.25
SUMMARY_SHARE = 0.002
SUMMARY_MAX_INTERVAL = 5.0
"""While no node waits for a slot, the pool's counts (its status and metrics) are taken at
most every 0.25 s, and at about 0.2% of a core: during a first rollout every node event
would otherwise rebuild the view of every node at 2% of a core for as long as the rollout
lasts (a seventh of the operator's CPU at 2,000 nodes). At 0.5% these turns were still a
twelfth of the operator's CPU in a 1,000-node rollout, where a view costs ~4 ms: they now
come every ~2 s there (at most every 5 s). A node that turns `upgrade-required` is
admitted at once, at the controller's own pace."""
STATUS_WRITE_INTERVAL = 1.0
"""Seconds between two writes of one policy's `status.upgrade`: a change after a quiet spell
is written at once, the changes of a busy walk once a second (at four a second, a 100-node
walk wrote 58 status patches in 15 s, each one more event for every watcher of policies)."""
STATUS_SHARE = 0.02
"""And building the status (over every node of the pool) takes at most about this share of
a core: at 5,000 nodes a status costs tens of milliseconds, and comes every second or two."""
STATUS_MAX_INTERVAL = 5.0


class _StatusWriter:
    """Builds and writes one policy's `status.upgrade` off the reconcile's path: at most one
    write in flight, paced by `STATUS_WRITE_INTERVAL` and `STATUS_SHARE`; meanwhile only the
    newest view waits for its turn."""

    def __init__(self, sink: StatusSink, pool: Pool) -> None:
        self._sink = sink
        self._name = f"{pool.kind} {pool.name}"
        self._pending: Callable[[], Object | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._writing = False

    def pending(self) -> bool:
        return self._pending is not None or self._writing

    def submit(self, body: Callable[[], Object | None]) -> None:
        self._pending = body
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending is not None:
            build, self._pending = self._pending, None
            self._writing = True
            began = time.thread_time()
            body = build()
            cost = time.thread_time() - began
            try:
                if body is not None:
                    await self._sink(body)
            except (NotFound, Invalid, ApiConflict) as exc:
                log.debug("%s: status not written: %s", self._name, exc)
            except Exception as exc:  # a status write must never take anything down
                log.warning("%s: status not written: %s", self._name, exc)
            finally:
                self._writing = False
            await asyncio.sleep(
                paced_interval(
                    cost,
                    minimum=STATUS_WRITE_INTERVAL,
                    share=STATUS_SHARE,
                    maximum=STATUS_MAX_INTERVAL,
                )
            )
