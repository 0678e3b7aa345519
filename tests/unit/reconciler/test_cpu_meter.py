"""The paced controller's meter: a coroutine's own CPU, and nothing lost through it."""

from __future__ import annotations

import asyncio
import time

import pytest

from reconciler._cpu_meter import CpuMeter


def _burn(seconds: float) -> None:
    began = time.thread_time()
    while time.thread_time() - began < seconds:
        pass


async def test_counts_the_coroutines_own_steps_and_not_what_runs_while_it_awaits() -> None:
    async def neighbour() -> None:
        _burn(0.05)

    async def work() -> str:
        _burn(0.02)
        await asyncio.create_task(neighbour())
        _burn(0.02)
        return "done"

    meter = CpuMeter(work())
    assert await meter == "done"
    assert 0.04 <= meter.seconds < 0.07


async def test_exceptions_and_cancellation_pass_through() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await CpuMeter(fails())

    cleaned_up = asyncio.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned_up.set()

    async def metered() -> None:
        await CpuMeter(waits())

    task = asyncio.create_task(metered())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned_up.is_set()


async def test_a_timeout_reaches_the_metered_coroutine() -> None:
    async def slow() -> None:
        await asyncio.sleep(60)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await CpuMeter(slow())
