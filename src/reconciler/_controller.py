"""A controller: a queue of requests, N workers, and the watches that fill the queue.

Reconciles are level-based: a request names an object, never an event, and the reconcile
computes everything from the cache. That is what makes collapsing bursts, dropping
unneeded events and retrying after errors all safe.

Result semantics follow controller-runtime: an exception requeues with backoff (the key's
failures grow), `requeue_after` forgets the failures and comes back after that delay, and
success forgets. There is no bare "requeue": a reconcile that wants to come back says when
(controller-runtime deprecated its `Requeue` flag for the same reason). A reconcile that
raises or times out never takes its worker down with it.

A reconcile that failed only because the API server was unreachable is not retried on its
growing backoff: twenty seconds of outage would otherwise leave it waiting as long again
after the server is back. While the informers know the server is gone, such keys wait
for the cache's `Connectivity` to report its return and are then queued at once, their
failures forgotten; when the informers have not noticed (a blip), they retry within
`UNREACHABLE_RETRY` seconds.

A controller whose one reconcile reads the whole cluster (a status summed over every node)
can be paced: `min_interval` and `busy_fraction` keep a request from being reconciled again
too soon after its last reconcile; the events that arrive meanwhile are collapsed into one
reconcile when its time comes. Under a burst of events such a reconcile then costs a
bounded share of the time, whatever the size of the cluster, instead of once per event.
A reconcile that waits for one particular event (the last of a burst) is queued by whoever
sees it with `enqueue(request, unpaced=True)`, and skips its turn once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypedDict

import anyio
from prometheus_client import CollectorRegistry

from reconciler._clock import Clock, MonotonicClock
from reconciler._connectivity import Connectivity
from reconciler._cpu_meter import CpuMeter
from reconciler._exceptions import (
    ApiError,
    ApiUnreachable,
    Conflict,
    LeaderElectionLost,
    ShutDown,
    TerminalError,
)
from reconciler._handlers import MapFunc, WatchHandler, enqueue_object
from reconciler._informer import Informer
from reconciler._logging import reconciling
from reconciler._metrics import Metrics, metrics_for
from reconciler._objects import Request
from reconciler._predicates import Predicate
from reconciler._queue_metrics import PrometheusQueueMetrics
from reconciler._rate_limiters import RateLimiter
from reconciler._rate_limiting_queue import RateLimitingQueue

log = logging.getLogger("reconciler.controller")

_TIME_SLICE = 0.002
"""Seconds a worker may keep the event loop before yielding between reconciles."""

UNREACHABLE_RETRY = 1.0
"""Longest wait before retrying a key that found the API server unreachable during a blip."""


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next; `None` (or `Result()`) means "done until a change".

    `requeue_after` > 0: reconcile again after that many seconds, unless an event does first.
    """

    requeue_after: float = 0.0


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None: ...


ReconcileFunc = Callable[[Request], Awaitable[Result | None]]


def paced_interval(cost: float, *, minimum: float, share: float, maximum: float) -> float:
    """Seconds from one run of something paced to the next: at least `minimum`, long
    enough that a run costing `cost` CPU seconds takes about `share` of a core, at most
    `maximum`."""
    return min(maximum, max(minimum, cost / share))


class ControllerOptions(TypedDict, total=False):
    """How a controller runs and paces its reconciles (`Controller.__init__` says what
    each does); what a manager's caller may choose, the manager supplying the rest."""

    max_concurrent_reconciles: int
    reconcile_timeout: float | None
    rate_limiter: RateLimiter | None
    min_interval: float
    busy_fraction: float
    max_interval: float


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: ReconcileFunc | Reconciler,
        *,
        max_concurrent_reconciles: int = 1,
        reconcile_timeout: float | None = None,
        rate_limiter: RateLimiter | None = None,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        connectivity: Connectivity | None = None,
        min_interval: float = 0.0,
        busy_fraction: float = 1.0,
        max_interval: float = float("inf"),
    ) -> None:
        """`min_interval`: seconds from the start of one reconcile of a request to the start
        of the next; `busy_fraction` (0 < f <= 1): also wait, after a reconcile that cost d
        seconds of CPU, until d / f seconds have passed since it started (so it takes at most
        that share of a core). Requests that come sooner wait for their turn, collapsed into
        one. The cost is the CPU the reconcile itself spent (`CpuMeter`): waiting on the API
        server costs nothing, and neither does what other tasks run meanwhile (counting
        theirs paced a reconcile that awaits one write by the whole process's load).
        `max_interval` bounds the wait, so a status never lags by more.
        """
        if not 0 < busy_fraction <= 1:
            raise ValueError(f"busy_fraction must be in (0, 1], not {busy_fraction}")
        self.name = name
        self._reconcile: ReconcileFunc = (
            reconcile if not hasattr(reconcile, "reconcile") else reconcile.reconcile
        )
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.reconcile_timeout = reconcile_timeout
        self._metrics = metrics if metrics is not None else metrics_for(CollectorRegistry())
        self._clock: Clock = clock if clock is not None else MonotonicClock()
        self.queue: RateLimitingQueue[Request] = RateLimitingQueue(
            name, rate_limiter, PrometheusQueueMetrics(self._metrics, name), self._clock
        )
        self._min_interval = min_interval
        self._busy_fraction = busy_fraction
        self._max_interval = max(max_interval, min_interval)
        self._paced = min_interval > 0 or busy_fraction < 1
        self._not_before: dict[Request, float] = {}
        self._unpaced: set[Request] = set()
        self._runner: asyncio.Task[None] | None = None
        self._cancel = anyio.CancelScope()
        self._finished = anyio.Event()
        self._in_flight = 0
        self._watches: list[tuple[Informer, WatchHandler]] = []
        self._connectivity = connectivity
        self._unreachable: set[Request] = set()
        """Keys whose last reconcile failed because the API server could not be reached."""
        if connectivity is not None:
            connectivity.on_restored(self._retry_unreachable)
        m = self._metrics
        self._total = {
            r: m.reconcile_total.labels(controller=name, result=r)
            for r in ("success", "error", "requeue_after")
        }
        self._errors = m.reconcile_errors_total.labels(controller=name)
        self._terminal = m.terminal_reconcile_errors_total.labels(controller=name)
        self._time = m.reconcile_time_seconds.labels(controller=name)
        self._active = m.active_workers.labels(controller=name)
        m.max_concurrent_reconciles.labels(controller=name).set(max_concurrent_reconciles)
        self._active.set(0)

    @property
    def started(self) -> bool:
        return self._runner is not None

    @property
    def busy(self) -> bool:
        """Whether any request is queued or being reconciled: another controller that must
        not report a half-done picture of this one's work asks this (and `queue.waiting`
        for the requests that wait for their time: a requeue, a pacing turn, a retry)."""
        return bool(len(self.queue) or self._in_flight)

    def watch(
        self,
        informer: Informer,
        mapping: MapFunc = enqueue_object,
        *predicates: Predicate,
        unpaced: bool = False,
        map_old: bool = True,
    ) -> None:
        """Reconcile `mapping(obj)` when an object of `informer`'s kind changes; with
        `unpaced`, without waiting for the request's pacing turn (`enqueue`): for events
        that mean work to do now (an admin's edit, an object of ours deleted), where the
        pacing is for those that only report progress.

        An update maps the new object and the old one (an owner reference or label that
        went away still concerns its old target). `map_old=False` maps the new one only:
        for mappings whose answer no change of the object can move (its name, a constant
        such as "every policy"), where mapping it twice is wasted work on every event."""
        sink = _Unpaced(self) if unpaced else self.queue
        handler = WatchHandler(sink, mapping, predicates, map_old=map_old)
        self._watches.append((informer, handler))
        informer.add_handler(handler)

    def enqueue(self, request: Request, *, unpaced: bool = False) -> None:
        """`unpaced`: its next reconcile does not wait for its pacing turn (what it waited
        for has happened), also when one is in flight now."""
        if unpaced and self._paced:
            self._unpaced.add(request)
        self.queue.add(request)

    def start(self) -> None:
        """Start the workers: one task group, so they are cancelled and awaited together."""
        if self._runner is not None:
            return
        self._cancel = anyio.CancelScope()
        self._finished = anyio.Event()
        self._runner = asyncio.create_task(self._run_workers(), name=f"{self.name} workers")
        log.debug("controller %s: started %d workers", self.name, self.max_concurrent_reconciles)

    async def _run_workers(self) -> None:
        try:
            with self._cancel:
                async with anyio.create_task_group() as workers:
                    for i in range(self.max_concurrent_reconciles):
                        workers.start_soon(self._worker, name=f"{self.name} worker {i}")
        finally:
            self._finished.set()

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking requests; let in-flight reconciles finish for up to `grace` seconds.

        Requests still queued are dropped: level-based reconciles redo them from the next
        leader's first list. `grace=0` cancels in-flight reconciles at once.
        """
        self.queue.shut_down()
        for informer, handler in self._watches:
            with contextlib.suppress(ValueError):
                informer.remove_handler(handler)
        self._watches.clear()
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if grace != 0:
            with anyio.move_on_after(grace):
                await self._finished.wait()
        if not self._finished.is_set():
            unfinished = self._in_flight
            self._cancel.cancel()
            if unfinished:
                log.info("controller %s: cancelled %d unfinished reconciles", self.name, unfinished)
        await runner

    async def _worker(self) -> None:
        queue = self.queue
        loop = asyncio.get_running_loop()
        slice_began = loop.time()
        while not queue.shutting_down:
            if not len(queue):
                slice_began = 0.0  # about to wait: the loop gets its turn anyway
            try:
                request = await queue.get()
            except ShutDown:
                return
            if not slice_began:
                slice_began = loop.time()
            if self._paced and self._wait_turn(request):
                continue
            try:
                with reconciling(self.name, request):
                    await self._process(request)
            except Exception:  # metrics or logging failed; the worker must survive it
                log.exception("controller %s: failed handling %s", self.name, request)
            finally:
                queue.done(request)
            # Reconciles that never await (cache reads only) would hold the loop for a whole
            # backlog; give it back every few milliseconds, not after every key, so a burst
            # still drains at full speed.
            if loop.time() - slice_began >= _TIME_SLICE:
                await asyncio.sleep(0)
                slice_began = loop.time()

    def _wait_turn(self, request: Request) -> bool:
        """Paced: put `request` back until its turn if it is not yet; whether it was."""
        if request in self._unpaced:
            self._unpaced.discard(request)
            self._not_before.pop(request, None)
            return False
        not_before = self._not_before.get(request)
        if not_before is None:
            return False
        wait = not_before - self._clock.now()
        if wait <= 0:
            del self._not_before[request]
            return False
        self.queue.done(request)
        self.queue.add_after(request, wait)
        return True

    def _pace(self, request: Request, began: float, cost: float) -> None:
        gap = paced_interval(
            cost, minimum=self._min_interval, share=self._busy_fraction, maximum=self._max_interval
        )
        self._not_before[request] = began + gap

    async def _process(self, request: Request) -> None:
        queue = self.queue
        self._active.inc()
        self._in_flight += 1
        started = time.perf_counter()
        began = self._clock.now()
        # Paced: the reconcile's own CPU, not what other tasks ran while it awaited.
        meter = CpuMeter(self._reconcile(request)) if self._paced else None
        try:
            async with asyncio.timeout(self.reconcile_timeout):
                result = await (meter if meter is not None else self._reconcile(request))
        except TerminalError as exc:
            self._errors.inc()
            self._terminal.inc()
            self._total["error"].inc()
            queue.forget(request)
            log.error("controller %s: %s: terminal error, not retried: %s", self.name, request, exc)
        except ApiUnreachable as exc:
            self._errors.inc()
            self._total["error"].inc()
            self._retry_when_reachable(request, exc)
        except LeaderElectionLost as exc:
            # A write refused because our lease may have run out (a process frozen past
            # it, say): the manager says so once and stops; the new leader redoes the work.
            # An ERROR with a traceback for each refused write would bury that one line.
            self._errors.inc()
            self._total["error"].inc()
            queue.forget(request)
            log.debug("controller %s: %s: %s", self.name, request, exc)
        except Exception as exc:
            self._unreachable.discard(request)
            self._errors.inc()
            self._total["error"].inc()
            queue.add_rate_limited(request)
            self._log_error(request, exc)
        else:
            self._unreachable.discard(request)
            if result is not None and result.requeue_after > 0:
                queue.forget(request)
                queue.add_after(request, result.requeue_after)
                self._total["requeue_after"].inc()
            else:
                queue.forget(request)
                self._total["success"].inc()
        finally:
            self._time.observe(time.perf_counter() - started)
            self._active.dec()
            self._in_flight -= 1
            if meter is not None:
                self._pace(request, began, meter.seconds)

    def _retry_when_reachable(self, request: Request, exc: ApiUnreachable) -> None:
        self._unreachable.add(request)
        if self._connectivity is not None and self._connectivity.down:
            # The tracker said so at WARNING once; its report of the return requeues us.
            log.debug("controller %s: %s: %s; retried when reachable", self.name, request, exc)
            self.queue.add_rate_limited(request)
        else:
            log.warning("controller %s: %s: %s", self.name, request, exc)
            self.queue.add_rate_limited(request, at_most=UNREACHABLE_RETRY)

    def _retry_unreachable(self) -> None:
        """The informers reach the server again: retry what failed for want of it, now."""
        keys, self._unreachable = self._unreachable, set()
        if self._runner is None or self.queue.shutting_down:
            return
        for request in keys:
            self.queue.forget(request)
            self.queue.add(request)
        if keys:
            log.debug("controller %s: retrying %d requests after the outage", self.name, len(keys))

    def _log_error(self, request: Request, exc: Exception) -> None:
        retries = self.queue.num_requeues(request)
        if isinstance(exc, Conflict):
            # Someone wrote first; the requeue reads the newer object. Routine.
            log.debug("controller %s: %s: conflict, requeued: %s", self.name, request, exc)
        elif isinstance(exc, ApiError | TimeoutError):
            log.warning(
                "controller %s: %s: %s (retry %d)",
                self.name,
                request,
                exc if str(exc) else type(exc).__name__,
                retries,
            )
        else:
            log.error(
                "controller %s: %s: reconcile failed (retry %d)",
                self.name,
                request,
                retries,
                exc_info=exc,
            )


class _Unpaced:
    """A watch's requests, each enqueued to skip its pacing turn."""

    __slots__ = ("_controller",)

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def add(self, item: Request) -> None:
        self._controller.enqueue(item, unpaced=True)
