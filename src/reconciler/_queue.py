"""The work queue: client-go's `dirty` and `processing` sets on asyncio.

Two sets give the guarantees controllers rely on. A key is never handed to two workers at
once (a key being processed is not queued again, only marked dirty, and goes back in the
queue at `done`). A burst of adds for one key collapses into one reconcile (adding a key
that is already dirty does nothing). Order is first-in first-out over distinct keys, so one
busy key cannot starve the others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from reconciler._exceptions import ShutDown
from reconciler._queue_metrics import NoQueueMetrics, QueueMetrics

T = TypeVar("T", bound=Hashable)


class Queue(Generic[T]):
    """A FIFO of distinct keys with at-most-one-worker-per-key semantics.

    `get` hands out keys still queued after `shut_down` (so nothing accepted is dropped)
    and raises `ShutDown` once the queue is empty.
    """

    def __init__(self, name: str = "", metrics: QueueMetrics | None = None) -> None:
        self.name = name
        self._metrics: QueueMetrics = metrics if metrics is not None else NoQueueMetrics()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle: list[asyncio.Future[None]] = []
        self._shutting_down = False

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those being processed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, item: T) -> None:
        """Mark `item` as needing work. Cheap and idempotent; ignored after shutdown."""
        if self._shutting_down or item in self._dirty:
            return
        self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one()

    def get_nowait(self) -> T:
        """Take the next key; `asyncio.QueueEmpty` if none, `ShutDown` if none will come."""
        if not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            raise asyncio.QueueEmpty
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self._metrics.get(item)
        return item

    async def get(self) -> T:
        """Wait for the next key. The caller owns it until it calls `done(key)`."""
        while not self._queue and not self._shutting_down:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    # We were woken for an item we will not take: pass the wake-up on.
                    self._wake_one()
                else:
                    with contextlib.suppress(ValueError):
                        self._getters.remove(waiter)
                raise
        return self.get_nowait()

    def done(self, item: T) -> None:
        """Finish with `item`; if it was added meanwhile it goes back in the queue now."""
        self._metrics.done(item)
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()
        elif not self._processing:
            self._wake_idle()

    def shut_down(self) -> None:
        """Refuse new keys; workers get what is queued, then `ShutDown`."""
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if not self._processing:
            self._wake_idle()

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every key handed out so far is `done`."""
        self.shut_down()
        while self._processing or self._queue:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._idle:
                    self._idle.remove(waiter)

    def is_processing(self, item: T) -> bool:
        return item in self._processing

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_idle(self) -> None:
        idle, self._idle = self._idle, []
        for waiter in idle:
            if not waiter.done():
                waiter.set_result(None)
