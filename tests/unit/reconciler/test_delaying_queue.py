"""add_after: keys come back when their time comes, the earliest time winning."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.lowlevel import DelayingQueue, FakeClock

pytestmark = pytest.mark.unit


def drain(q: DelayingQueue[str]) -> list[str]:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except asyncio.QueueEmpty:
            return out


def test_key_is_added_only_once_its_delay_passed() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("a", 5)
    clock.advance(4.9)
    assert drain(q) == []
    clock.advance(0.2)
    assert drain(q) == ["a"]


def test_zero_delay_adds_at_once() -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=FakeClock())
    q.add_after("a", 0)
    assert drain(q) == ["a"]


def test_earlier_ready_time_wins() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("a", 600)
    q.add_after("a", 1)
    q.add_after("a", 300)
    clock.advance(1)
    assert drain(q) == ["a"]
    q.done("a")
    clock.advance(1000)
    assert drain(q) == [], "superseded later times must not fire again"


def test_keys_come_back_in_ready_time_order() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("c", 3)
    q.add_after("a", 1)
    q.add_after("b", 2)
    clock.advance(10)
    assert drain(q) == ["a", "b", "c"]


def test_shutdown_drops_waiting_keys() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("a", 1)
    q.shut_down()
    clock.advance(5)
    assert len(q) == 0
    assert q.waiting == 0


async def test_real_clock_delivers_to_a_waiting_worker() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("a", 0.01)
    assert await asyncio.wait_for(q.get(), 5) == "a"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.floats(0.001, 100)), max_size=30))
def test_each_key_fires_once_at_its_earliest_time(adds: list[tuple[str, float]]) -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    start = clock.now()
    for key, delay in adds:
        q.add_after(key, delay)
    earliest: dict[str, float] = {}
    for key, delay in adds:
        earliest[key] = min(earliest.get(key, float("inf")), delay)
    fired: dict[str, float] = {}
    for _ in range(2100):
        clock.advance(0.05)
        for key in drain(q):
            assert key not in fired
            fired[key] = clock.now() - start
            q.done(key)
        if len(fired) == len(earliest) and clock.now() - start > 100:
            break
    assert set(fired) == set(earliest)
    for key, at in fired.items():
        assert earliest[key] - 1e-6 <= at < earliest[key] + 0.05 + 1e-6
