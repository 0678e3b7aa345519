"""What every piece of a test cluster shares: `start()` brings it up, `stop()` tears it down,
and a with-block does both, so a test that fails half-way leaves no process behind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Lifecycle(ABC):
    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> None:
        """Safe to call twice, and after a `start()` that failed."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
