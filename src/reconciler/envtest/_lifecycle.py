"""What every piece of a test cluster shares: `start()` brings it up, `stop()` tears it down,
and a with-block does both, so a test that fails half-way leaves no process behind."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Self


class Lifecycle(ABC):
    started_seconds: float = 0.0
    """How long the last `start()` took."""

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None:
        """Safe to call twice, and after a `start()` that failed."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _started(self, began: float, steps: Callable[[], object]) -> Self:
        """Run `steps`, the part of `start()` that leaves processes behind: if one fails,
        `stop()` ends those the others started before the error goes on."""
        try:
            steps()
        except BaseException:
            self.stop()
            raise
        self.started_seconds = time.monotonic() - began
        return self
