"""A policy's turn to `ready` waits until what it reports then is final.

A DaemonSet that finishes rolling out reconciles its policy at once: at 100 nodes the
paced turn left `ready` 0.2-4.7 s behind the rollout, and `kubectl wait` with it. But the
driver upgrade keeps its own account of the same rollout (each node's upgrade-state label,
the policy's `status.upgrade` counts), and that may still be on its way at that moment. A
`ready` written before it is a `ready` followed by more writes: a user who waits for
`ready` and then reads the policy sees it change under them. So the first `ready` waits
while anything else that reports into the policy has work under way, rechecked every
`RECHECK_SECONDS` without a reconcile, for at most `HOLD_SECONDS`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

RECHECK_SECONDS = 0.1
"""How often a held `ready` asks again (a few integer reads)."""
HOLD_SECONDS = 10.0
"""The longest a `ready` waits: past it, it is written anyway (work that never settles, a
node whose reconcile keeps failing, must not keep the policy from saying what it is)."""


class ReadyHold:
    def __init__(
        self,
        settling: Callable[[], bool] | None,
        poke: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`settling`: whether other work that reports into the policy is under way (None:
        nothing to wait for). `poke`: reconcile the policy again now, once it is not."""
        self.settling = settling
        self.poke = poke
        self.clock = clock
        self._since: float | None = None
        self._armed = False

    def holds(self, *, was_ready: bool, is_ready: bool) -> bool:
        """Whether a status that turns the policy `ready` must wait (a poke comes when it
        may go). Only the turn waits: a policy already ready writes its changes at once."""
        if self.settling is None or was_ready or not is_ready:
            self._since = None
            return False
        now = self.clock()
        if self._since is None:
            self._since = now
        if now - self._since >= HOLD_SECONDS or not self.settling():
            self._since = None
            return False
        self._arm()
        return True

    def seconds_left(self) -> float:
        """Until a held `ready` is written anyway (the reconcile's own requeue, should the
        recheck's poke never come)."""
        since = self._since
        return HOLD_SECONDS if since is None else max(0.0, since + HOLD_SECONDS - self.clock())

    def _arm(self) -> None:
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_later(RECHECK_SECONDS, self._check)

    def _check(self) -> None:
        since = self._since
        if (
            since is not None
            and self.settling is not None
            and self.settling()
            and self.clock() - since < HOLD_SECONDS
        ):
            asyncio.get_running_loop().call_later(RECHECK_SECONDS, self._check)
            return
        self._armed = False
        self.poke()
