"""Result semantics, worker survival, concurrency and metrics of a controller."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler import Controller, Request, Result, metrics_for
from reconciler.errors import LeaderElectionLost, TerminalError
from reconciler.lowlevel import FakeClock, ItemExponentialFailureRateLimiter

from ._util import wait_until

pytestmark = pytest.mark.unit

A = Request("ns", "a")
B = Request("ns", "b")


async def settle(controller: Controller) -> None:
    """Wait until nothing is queued or running (a hang guard, not a timing assertion)."""
    q = controller.queue
    await wait_until(lambda: not len(q) and not any(q.is_processing(r) for r in (A, B)))
    for _ in range(5):
        await asyncio.sleep(0)


async def test_error_requeues_with_backoff_and_worker_survives() -> None:
    clock = FakeClock()
    calls: list[Request] = []

    async def reconcile(req: Request) -> Result | None:
        calls.append(req)
        if len(calls) < 3:
            raise RuntimeError("transient")
        return None

    registry = CollectorRegistry()
    c = Controller(
        "t",
        reconcile,
        rate_limiter=ItemExponentialFailureRateLimiter(1.0, 100.0),
        metrics=metrics_for(registry),
        clock=clock,
    )
    c.start()
    c.enqueue(A)
    await settle(c)
    assert len(calls) == 1
    assert c.queue.num_requeues(A) == 1
    clock.advance(1.0)
    await settle(c)
    assert len(calls) == 2
    clock.advance(1.9)
    await settle(c)
    assert len(calls) == 2, "second retry waits 2 s"
    clock.advance(0.1)
    await settle(c)
    assert len(calls) == 3
    assert c.queue.num_requeues(A) == 0, "success forgets the failures"
    get = registry.get_sample_value
    assert get("controller_runtime_reconcile_total", {"controller": "t", "result": "error"}) == 2
    assert get("controller_runtime_reconcile_total", {"controller": "t", "result": "success"}) == 1
    assert get("controller_runtime_reconcile_errors_total", {"controller": "t"}) == 2
    assert get("controller_runtime_reconcile_time_seconds_count", {"controller": "t"}) == 3
    assert get("controller_runtime_max_concurrent_reconciles", {"controller": "t"}) == 1
    await c.stop(5)


async def test_requeue_after_forgets_then_comes_back_after_the_delay() -> None:
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        return Result(requeue_after=30) if calls == 1 else None

    c = Controller("t", reconcile, clock=clock)
    c.queue.rate_limiter.when(A)  # a failure on record, to be forgotten
    c.start()
    c.enqueue(A)
    await settle(c)
    assert calls == 1
    assert c.queue.num_requeues(A) == 0
    clock.advance(29)
    await settle(c)
    assert calls == 1
    clock.advance(1)
    await settle(c)
    assert calls == 2
    await c.stop(5)


async def test_requeue_after_comes_back_and_terminal_error_is_not_retried() -> None:
    clock = FakeClock()
    outcomes: list[str] = []

    async def reconcile(req: Request) -> Result | None:
        if req.name == "a":
            outcomes.append("a")
            return Result(requeue_after=1)
        outcomes.append("b")
        raise TerminalError("bad spec")

    c = Controller(
        "t", reconcile, rate_limiter=ItemExponentialFailureRateLimiter(1, 10), clock=clock
    )
    c.start()
    c.enqueue(A)
    c.enqueue(Request("ns", "b"))
    await settle(c)
    assert c.queue.num_requeues(A) == 0
    assert c.queue.num_requeues(Request("ns", "b")) == 0
    clock.advance(1)
    await settle(c)
    assert Counter(outcomes) == {"a": 2, "b": 1}
    await c.stop(5)


async def test_timeout_is_an_error_and_the_worker_lives_on() -> None:
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(3600)
        return None

    c = Controller(
        "t",
        reconcile,
        reconcile_timeout=0.01,
        rate_limiter=ItemExponentialFailureRateLimiter(1, 10),
        clock=clock,
    )
    c.start()
    c.enqueue(A)
    await wait_until(lambda: c.queue.num_requeues(A) > 0)
    clock.advance(1)
    await settle(c)
    assert calls == 2
    await c.stop(5)


async def test_never_two_reconciles_of_one_key_but_keys_run_in_parallel() -> None:
    running: set[str] = set()
    peak = 0
    seen = Counter[str]()
    release = asyncio.Event()

    async def reconcile(req: Request) -> Result | None:
        nonlocal peak
        assert req.name not in running
        running.add(req.name)
        peak = max(peak, len(running))
        seen[req.name] += 1
        await release.wait()
        running.discard(req.name)
        return None

    c = Controller("t", reconcile, max_concurrent_reconciles=4)
    c.start()
    for name in "abcd":
        c.enqueue(Request("ns", name))
    await wait_until(lambda: len(running) == 4)
    for _ in range(10):
        c.enqueue(Request("ns", "a"))  # collapses into one more reconcile of "a"
    release.set()
    await wait_until(lambda: seen["a"] == 2 and not running)
    assert peak == 4
    assert seen == {"a": 2, "b": 1, "c": 1, "d": 1}
    await c.stop(5)


async def test_stop_lets_in_flight_finish_within_grace_and_drops_the_backlog() -> None:
    finished: list[str] = []
    gate = asyncio.Event()

    async def reconcile(req: Request) -> Result | None:
        await gate.wait()
        finished.append(req.name)
        return None

    c = Controller("t", reconcile)
    c.start()
    c.enqueue(A)
    c.enqueue(Request("ns", "b"))
    await wait_until(lambda: bool(c.queue.is_processing(A)))
    stopping = asyncio.create_task(c.stop(grace=30))
    await asyncio.sleep(0.01)
    gate.set()
    await asyncio.wait_for(stopping, 10)
    assert finished == ["a"]


async def test_stop_cancels_what_outlives_the_grace() -> None:
    async def reconcile(req: Request) -> Result | None:
        await asyncio.sleep(3600)
        return None

    c = Controller("t", reconcile)
    c.start()
    c.enqueue(A)
    await wait_until(lambda: bool(c.queue.is_processing(A)))
    await asyncio.wait_for(c.stop(grace=0.01), 10)


async def test_class_based_reconciler() -> None:
    done = asyncio.Event()

    class R:
        async def reconcile(self, request: Request) -> Result | None:
            done.set()
            return None

    c = Controller("t", R())
    c.start()
    c.enqueue(A)
    await asyncio.wait_for(done.wait(), 10)
    await c.stop(5)


async def test_a_backlog_of_cheap_reconciles_does_not_starve_the_event_loop() -> None:
    done = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal done
        done += 1
        deadline = time.perf_counter() + 0.0005
        while time.perf_counter() < deadline:  # busy, never awaits: a cache-only reconcile
            pass
        return None

    c = Controller("t", reconcile)
    for i in range(2000):
        c.enqueue(Request("ns", str(i)))
    ticks_during_backlog = 0

    async def ticker() -> None:
        nonlocal ticks_during_backlog
        while done < 2000:
            ticks_during_backlog += 1
            await asyncio.sleep(0)

    c.start()
    await asyncio.wait_for(ticker(), 30)
    assert ticks_during_backlog > 10, "other tasks ran while the backlog drained"
    await c.stop(5)


async def reconcile_then_request_again(c: Controller) -> None:
    """Starts `c`, reconciles A once, then asks for A again right away (a paced
    controller holds the second request back)."""
    c.start()
    c.enqueue(A)
    await settle(c)
    c.enqueue(A)
    await settle(c)


async def test_paced_requests_collapse_until_their_turn() -> None:
    """A burst of events during `min_interval` becomes one reconcile when the time is up;
    other requests are not held back by it."""
    clock = FakeClock()
    calls: list[Request] = []

    async def reconcile(req: Request) -> Result | None:
        calls.append(req)
        return None

    c = Controller("t", reconcile, clock=clock, min_interval=0.5)
    c.start()
    c.enqueue(A)
    await settle(c)
    assert calls == [A], "an idle controller reconciles at once"
    for _ in range(10):
        c.enqueue(A)
        await settle(c)
    c.enqueue(B)
    await settle(c)
    assert calls == [A, B], "A waits for its turn; B does not wait for A's"
    clock.advance(0.5)
    await settle(c)
    assert calls == [A, B, A], "ten events, one reconcile"
    clock.advance(5)
    await settle(c)
    assert calls == [A, B, A]
    await c.stop(5)


async def test_an_unpaced_request_skips_its_turn_once() -> None:
    """The event a paced reconcile waited for (the last node labelled) runs it at once,
    also when it arrives while that reconcile is in flight; the pacing resumes after."""
    clock = FakeClock()
    calls: list[Request] = []
    release = asyncio.Event()

    async def reconcile(req: Request) -> Result | None:
        calls.append(req)
        if len(calls) == 2:
            await release.wait()
        return None

    c = Controller("t", reconcile, clock=clock, min_interval=10)
    c.start()
    c.enqueue(A)
    await settle(c)
    c.enqueue(A)
    await settle(c)
    assert calls == [A], "paced: waits for its turn"
    c.enqueue(A, unpaced=True)
    await wait_until(lambda: len(calls) == 2)
    c.enqueue(A, unpaced=True)  # while the second reconcile is in flight
    release.set()
    await wait_until(lambda: len(calls) == 3)
    c.enqueue(A)
    await settle(c)
    assert calls == [A, A, A], "an ordinary event waits for the turn again"
    clock.advance(10)
    await settle(c)
    assert calls == [A, A, A, A]
    await c.stop(5)


class _Events:
    """Stands in for an informer: hands the watches' handlers the events a test makes."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def remove_handler(self, handler: Any) -> None:
        self.handlers.remove(handler)

    def changed(self, obj: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler.on_update(obj, obj)


async def test_an_unpaced_watch_skips_the_turn_a_plain_one_waits_for() -> None:
    """A paced controller with two watches: progress (plain) waits for the request's
    turn, an edit (`unpaced=True`) reconciles it at once, and progress after that waits
    again."""
    clock = FakeClock()
    calls: list[Request] = []

    async def reconcile(req: Request) -> Result | None:
        calls.append(req)
        return None

    progress, edits = _Events(), _Events()
    c = Controller("t", reconcile, clock=clock, min_interval=10)
    c.watch(progress, lambda _: [A])  # type: ignore[arg-type]
    c.watch(edits, lambda _: [A], unpaced=True)  # type: ignore[arg-type]
    c.start()
    c.enqueue(A)
    await settle(c)
    progress.changed({})
    await settle(c)
    assert calls == [A], "progress waits for the turn"
    edits.changed({})
    await wait_until(lambda: len(calls) == 2)
    progress.changed({})
    await settle(c)
    assert calls == [A, A], "progress after the edit waits for the next turn"
    clock.advance(10)
    await settle(c)
    assert calls == [A, A, A]
    await c.stop(5)


async def test_busy_while_a_request_is_queued_or_in_flight() -> None:
    """`busy` is what another controller asks before it reports a finished picture: true
    while a request is queued or reconciled; a requeue waiting for its time shows in
    `queue.waiting` instead."""
    clock = FakeClock()
    release = asyncio.Event()
    results: list[Result | None] = [Result(requeue_after=5), None]

    async def reconcile(req: Request) -> Result | None:
        await release.wait()
        return results.pop(0)

    c = Controller("t", reconcile, clock=clock)
    assert not c.busy
    c.enqueue(A)
    assert c.busy, "queued"
    c.start()
    await asyncio.sleep(0.05)
    assert c.busy, "in flight"
    release.set()
    await wait_until(lambda: len(results) == 1)
    await asyncio.sleep(0.05)
    assert (c.busy, c.queue.waiting) == (False, 1), "its requeue waits for its time"
    clock.advance(5)
    await wait_until(lambda: not results)
    await wait_until(lambda: not c.busy and not c.queue.waiting)
    await c.stop(5)


async def test_busy_fraction_scales_the_wait_with_the_reconcile_cost() -> None:
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        began = time.thread_time()
        while time.thread_time() - began < 0.05:  # 50 ms of CPU
            pass
        return None

    c = Controller("t", reconcile, clock=clock, busy_fraction=0.05)
    await reconcile_then_request_again(c)
    assert calls == 1
    clock.advance(0.9)  # 50 ms of CPU at 5% of a core: at least 1 s apart
    await settle(c)
    assert calls == 1
    clock.advance(30)
    await settle(c)
    assert calls == 2
    await c.stop(5)


async def test_what_other_tasks_spend_while_a_reconcile_awaits_does_not_pace_it() -> None:
    # A reconcile that awaits one write while the rest of the process is busy (node
    # reconciles, watch events) must not wait its turn as if it had spent that CPU itself.
    clock = FakeClock()
    calls = 0

    async def busy_neighbour() -> None:
        began = time.thread_time()
        while time.thread_time() - began < 0.05:  # 50 ms of CPU, not the reconcile's
            pass

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        await asyncio.create_task(busy_neighbour())
        return None

    c = Controller("t", reconcile, clock=clock, min_interval=0.1, busy_fraction=0.05)
    await reconcile_then_request_again(c)
    assert calls == 1
    clock.advance(0.1)  # at the minimum interval; the neighbour's CPU would make it 1 s
    await settle(c)
    assert calls == 2
    await c.stop(5)


async def test_max_interval_bounds_the_wait() -> None:
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        began = time.thread_time()
        while time.thread_time() - began < 0.05:  # 50 ms of CPU: 50 s at 0.1%
            pass
        return None

    c = Controller("t", reconcile, clock=clock, busy_fraction=0.001, max_interval=2.0)
    await reconcile_then_request_again(c)
    assert calls == 1
    clock.advance(2.0)
    await settle(c)
    assert calls == 2
    await c.stop(5)


def test_busy_fraction_must_be_a_share() -> None:
    with pytest.raises(ValueError):
        Controller("t", lambda r: asyncio.sleep(0), busy_fraction=0)  # type: ignore[arg-type,return-value]


async def test_a_write_refused_for_a_lost_lease_is_not_an_error_per_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A leader frozen past its lease thaws with writes in flight; each is refused. The
    manager says once that the lease is lost; the controller must not add an ERROR with a
    traceback per refused write, nor retry it (the new leader does the work)."""
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result | None:
        nonlocal calls
        calls += 1
        raise LeaderElectionLost("not sending PATCH /api/v1/nodes/a: our lease may have expired")

    c = Controller("t", reconcile, clock=clock)
    c.start()
    with caplog.at_level(logging.DEBUG, logger="reconciler"):
        c.enqueue(A)
        c.enqueue(B)
        await settle(c)
        clock.advance(60.0)
        await settle(c)
    assert calls == 2, "each refused once, not retried"
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    await c.stop(5)
