"""How long a paced reconcile (or any paced run) waits before it may run again.

A paced run is held to a share of a core by its own CPU cost. `paced_interval` is the
plain rule: after a run that cost d, wait d / share. `CpuCredit` adds a burst: time that
passes with nothing to do earns credit, up to the burst, so a sparse event is served at
once instead of waiting out the cost of the run before it, while a steady stream of events
is still held to the share.
"""

from __future__ import annotations

from dataclasses import dataclass


def paced_interval(cost: float, *, minimum: float, share: float, maximum: float) -> float:
    """Seconds from one run of something paced to the next: at least `minimum`, long
    enough that a run costing `cost` CPU seconds takes about `share` of a core, at most
    `maximum`."""
    return min(maximum, max(minimum, cost / share))


@dataclass(slots=True)
class CpuCredit:
    """The CPU seconds one paced request may spend before it has to wait."""

    share: float
    burst: float
    balance: float | None = None
    """Credit at `at` (None: never run, a full burst)."""
    at: float = 0.0

    def spend(self, began: float, cost: float) -> float:
        """A run that began at `began` cost `cost`: seconds from `began` until the next
        may start. Debt is never carried past one run's own cost (a wait cut short by a
        maximum interval is forgiven), so with no burst this is `cost / share`."""
        if self.balance is None:
            earned = self.burst
        else:
            earned = min(self.burst, self.balance + self.share * (began - self.at))
        self.balance = max(0.0, earned) - cost
        self.at = began
        return max(0.0, -self.balance / self.share)
