"""The policy's turn to `ready` waits while the upgrade still reports into it."""

from __future__ import annotations

import asyncio

from components.controllers._status_writer import (
    HOLD_SECONDS,
    RECHECK_SECONDS,
    ReadyHold,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_turn_to_ready_waits_for_the_upgrade_and_is_poked_when_it_settles() -> None:
    busy = True
    pokes: list[int] = []
    hold = ReadyHold(lambda: busy, lambda: pokes.append(1), clock=Clock())
    assert hold.holds(was_ready=False, is_ready=True)
    assert hold.holds(was_ready=False, is_ready=True), "still under way: still held"
    await asyncio.sleep(RECHECK_SECONDS * 3)
    assert pokes == [], "no reconcile while the upgrade works"
    busy = False
    await asyncio.sleep(RECHECK_SECONDS * 3)
    assert pokes == [1], "one reconcile once it settles"
    assert not hold.holds(was_ready=False, is_ready=True)


async def test_only_the_turn_waits() -> None:
    pokes: list[int] = []
    hold = ReadyHold(lambda: True, lambda: pokes.append(1), clock=Clock())
    assert not hold.holds(was_ready=True, is_ready=True), "already ready: changes go at once"
    assert not hold.holds(was_ready=False, is_ready=False), "not ready: nothing to hold"
    assert not hold.holds(was_ready=True, is_ready=False), "leaving ready is news at once"
    assert not ReadyHold(None, lambda: None).holds(was_ready=False, is_ready=True)


async def test_a_ready_held_past_its_limit_is_written_anyway() -> None:
    """An upgrade that never settles (a node whose reconcile keeps failing) must not keep
    the policy from saying it is ready."""
    clock = Clock()
    pokes: list[int] = []
    hold = ReadyHold(lambda: True, lambda: pokes.append(1), clock=clock)
    assert hold.holds(was_ready=False, is_ready=True)
    clock.now += 4
    assert hold.seconds_left() == HOLD_SECONDS - 4, "the reconcile's own requeue, as a fallback"
    clock.now += HOLD_SECONDS - 4
    await asyncio.sleep(RECHECK_SECONDS * 3)
    assert pokes == [1], "the recheck gives up and reconciles"
    assert not hold.holds(was_ready=False, is_ready=True)
