"""Retrying a failed node: after a wait that doubles with each retry, up to a bound.

A node goes to `upgrade-failed` when a wait timed out or a step cannot be taken; what held
it (a job, a PodDisruptionBudget, a process on the GPU) often goes away by itself, and
nothing tells us when. So the walk tries the failed step again: at once when what it can
see of the blocker is gone (`_planner._failed`), otherwise after `Backoff.delay`. The count
of retries is on the node (`RETRIES`) and the wait counts from the time the node entered
`upgrade-failed` (`STATE_SINCE`), so an operator restarted in between keeps the backoff
instead of retrying every failed node at once. Pure: the clock comes in.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.api import UpgradeState
from components.upgrade._model import NodeView
from components.upgrade._names import RETRIES

S = UpgradeState

DEFAULT_RETRY_SECONDS = 60.0
DEFAULT_MAX_RETRY_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """`initial` seconds before the first retry, doubling with each one, never over `cap`;
    `initial` 0: no retry by time (only once what blocked is gone)."""

    initial: float = DEFAULT_RETRY_SECONDS
    cap: float = DEFAULT_MAX_RETRY_SECONDS

    @property
    def timed(self) -> bool:
        return self.initial > 0

    def delay(self, retries: int) -> float:
        """Seconds to wait before retry number `retries + 1`."""
        doubled = self.initial * float(2 ** min(retries, 32))  # capped: no overflow
        return min(doubled, max(self.cap, self.initial))


DEFAULT_BACKOFF = Backoff()


def retries(node: NodeView) -> int:
    """The retries recorded on the node (0: none, or a value we cannot read)."""
    try:
        return max(int(node.annotations.get(RETRIES, "0")), 0)
    except ValueError:
        return 0


@dataclass(frozen=True, slots=True)
class RetryDue:
    due: bool
    left: float
    """Seconds until the retry (0 when due)."""
    attempt: int
    """The retry's number (1 for the first)."""


def retry_due(node: NodeView, backoff: Backoff, now: float) -> RetryDue | None:
    """Whether the failed node's next retry is due (None: no retry by time). A node with
    no time on it (failed by another operator, say) counts from now: it waits one full
    delay."""
    if not backoff.timed:
        return None
    done = retries(node)
    since = node.since if node.since is not None else now
    left = since + backoff.delay(done) - now
    return RetryDue(left <= 0, max(left, 0.0), done + 1)


def retry_target(failed: UpgradeState) -> UpgradeState:
    """The state a retry goes back to: the one the node failed in, or (not known) the
    first step after the cordon, which every walk takes again safely."""
    if failed in (
        S.WAIT_FOR_JOBS_REQUIRED,
        S.POD_DELETION_REQUIRED,
        S.DRAIN_REQUIRED,
        S.POD_RESTART_REQUIRED,
        S.VALIDATION_REQUIRED,
    ):
        return failed
    return S.WAIT_FOR_JOBS_REQUIRED
