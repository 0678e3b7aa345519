"""The work queue: what a controller relies on, stated as properties."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reconciler.lowlevel import Queue, ShutDown

pytestmark = pytest.mark.unit

KEYS = st.sampled_from("abcdef")


def test_burst_of_adds_collapses_into_one_item() -> None:
    q: Queue[str] = Queue()
    for _ in range(100):
        q.add("a")
    assert len(q) == 1
    assert q.get_nowait() == "a"
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()


def test_add_while_processing_requeues_at_done_not_before() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed to a second worker"
    q.done("a")
    assert q.get_nowait() == "a"


def test_distinct_keys_come_out_in_the_order_they_went_in() -> None:
    q: Queue[str] = Queue()
    for key in "cab":
        q.add(key)
    assert [q.get_nowait() for _ in range(3)] == ["c", "a", "b"]


async def test_get_waits_for_an_add() -> None:
    q: Queue[str] = Queue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    assert await getter == "x"


async def test_shutdown_hands_out_what_is_queued_then_stops_workers() -> None:
    q: Queue[str] = Queue()
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")
    q.add("b")
    assert await waiting == "a"
    q.shut_down()
    q.add("c")  # refused after shutdown
    assert await q.get() == "b"
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_wakes_idle_workers() -> None:
    q: Queue[str] = Queue()
    workers = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.shut_down()
    results = await asyncio.gather(*workers, return_exceptions=True)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_drain_waits_for_items_in_flight() -> None:
    q: Queue[str] = Queue()
    q.add("a")
    item = await q.get()
    drained = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    assert not drained.done(), "drain must wait for the key still being processed"
    q.done(item)
    await asyncio.wait_for(drained, 5)


async def test_a_cancelled_getter_does_not_swallow_an_item() -> None:
    q: Queue[str] = Queue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 5) == "a"


class QueueModel(RuleBasedStateMachine):
    """The queue against a plain model of client-go's semantics, operation by operation."""

    def __init__(self) -> None:
        super().__init__()
        self.q: Queue[str] = Queue()
        self.queue: deque[str] = deque()
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.shutting_down = False

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.q.add(key)
        if self.shutting_down or key in self.dirty:
            return
        self.dirty.add(key)
        if key not in self.processing:
            self.queue.append(key)

    @rule()
    def get(self) -> None:
        if not self.queue:
            with pytest.raises(ShutDown if self.shutting_down else asyncio.QueueEmpty):
                self.q.get_nowait()
            return
        got = self.q.get_nowait()
        expected = self.queue.popleft()
        assert got == expected
        assert got not in self.processing, "a key was handed out twice at once"
        self.processing.add(got)
        self.dirty.discard(got)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(key)
        self.processing.discard(key)
        if key in self.dirty:
            self.queue.append(key)

    @rule()
    def shut_down(self) -> None:
        self.q.shut_down()
        self.shutting_down = True

    @invariant()
    def same_length(self) -> None:
        assert len(self.q) == len(self.queue)

    @invariant()
    def no_duplicates_queued(self) -> None:
        assert len(set(self.queue)) == len(self.queue)


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


async def _run_workers(
    adds: list[tuple[str, int]], workers: int, work_steps: list[int]
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Adders and workers interleaved by awaits; returns the logs of adds and gets."""
    q: Queue[str] = Queue()
    seq = 0
    add_log: list[tuple[int, str]] = []
    get_log: list[tuple[int, str]] = []
    in_progress: set[str] = set()

    async def adder() -> None:
        nonlocal seq
        for key, pause in adds:
            q.add(key)
            seq += 1
            add_log.append((seq, key))
            for _ in range(pause):
                await asyncio.sleep(0)

    async def worker(index: int) -> None:
        nonlocal seq
        n = 0
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            assert key not in in_progress, f"{key} processed by two workers at once"
            in_progress.add(key)
            seq += 1
            get_log.append((seq, key))
            for _ in range(work_steps[(index + n) % len(work_steps)]):
                await asyncio.sleep(0)
            n += 1
            in_progress.discard(key)
            q.done(key)

    tasks = [asyncio.create_task(worker(i)) for i in range(workers)]
    await adder()
    await asyncio.wait_for(q.shut_down_with_drain(), 10)
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    return add_log, get_log


@settings(max_examples=150, deadline=None)
@given(
    adds=st.lists(st.tuples(KEYS, st.integers(0, 3)), max_size=60),
    workers=st.integers(1, 6),
    work_steps=st.lists(st.integers(0, 4), min_size=1, max_size=8),
)
def test_no_key_concurrent_and_no_add_lost(
    adds: list[tuple[str, int]], workers: int, work_steps: list[int]
) -> None:
    add_log, get_log = asyncio.run(_run_workers(adds, workers, work_steps))
    # Every add is followed by a get of that key: work asked for is never lost.
    for add_seq, key in add_log:
        assert any(get_seq > add_seq and k == key for get_seq, k in get_log), (key, add_seq)


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.text("abcdefgh", min_size=1, max_size=2), min_size=1, max_size=30))
def test_a_hot_key_cannot_starve_the_others(keys: list[str]) -> None:
    """A key re-added on every reconcile still waits its turn behind the others."""
    q: Queue[str] = Queue()
    hot = "HOT"
    q.add(hot)
    for key in keys:
        q.add(key)
    distinct = list(dict.fromkeys(keys))
    order: list[str] = []
    while len(order) < 3 * (len(distinct) + 1):
        key = q.get_nowait()
        order.append(key)
        if key == hot:
            q.add(hot)  # re-added while processing: goes to the back at done
        q.done(key)
        if set(distinct) <= set(order):
            break
    # Every independent key ran before the hot key ran a second time.
    second_hot = [i for i, k in enumerate(order) if k == hot][1:2]
    before = order[: second_hot[0]] if second_hot else order
    assert set(distinct) <= set(before)
    # And in the order they were first added.
    assert [k for k in order if k != hot][: len(distinct)] == distinct
