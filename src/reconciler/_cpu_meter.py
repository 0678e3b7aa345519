"""The CPU a coroutine spends itself, not counting what other tasks spend while it awaits.

A paced controller waits in proportion to what its last reconcile cost. Reading the
thread's CPU clock before and after a reconcile counts everything the event loop ran in
between: a reconcile that awaits one write while a hundred node reconciles run would look
a hundred times dearer than it is, and its next turn would come needlessly late. Metering
only the coroutine's own steps (each `send` into it) counts what it did.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class CpuMeter(Generic[T]):
    """Awaits an awaitable and adds the CPU seconds of each of its steps to `seconds`."""

    __slots__ = ("_awaitable", "seconds")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._awaitable = awaitable
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._awaitable.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            began = time.thread_time()
            try:
                yielded = coro.send(sent) if thrown is None else coro.throw(thrown)
            except StopIteration as stop:
                return cast(T, stop.value)
            finally:
                self.seconds += time.thread_time() - began
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go on into the coroutine
                sent, thrown = None, exc
