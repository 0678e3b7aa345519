"""Whether the informers can reach the API server, said once per outage, not once per retry.

Every reflector retries on its own, about once a second while the server is gone; if each
said so at WARNING, a 20-second outage with fifteen informers would print three hundred
lines. The reflectors report here instead: the first failure of an outage is one WARNING
with its cause, a long outage repeats it at most every `repeat_every` seconds, and the
last informer back says INFO once. Controllers subscribe to the return so that work which
failed only because the server was gone runs again at once, not after its backoff; the
manager reads `down_for` to turn not-ready during a long outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("reconciler.connectivity")


class Connectivity:
    def __init__(self, repeat_every: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.repeat_every = repeat_every
        self._clock = clock
        self._down: set[str] = set()
        self._since: float | None = None
        self._last_warning = 0.0
        self._listeners: list[Callable[[], None]] = []
        self.outages = 0
        """Outages seen (each one is a WARNING and an INFO): tests and metrics read it."""

    @property
    def down(self) -> bool:
        return self._since is not None

    @property
    def down_for(self) -> float:
        """Seconds since the first informer lost the server; 0 while all are connected."""
        return 0.0 if self._since is None else self._clock() - self._since

    def on_restored(self, callback: Callable[[], None]) -> None:
        """Call `callback` each time every informer is connected again after an outage."""
        self._listeners.append(callback)

    def lost(self, source: str, cause: BaseException) -> None:
        """`source` (an informer) failed to reach the server; it keeps retrying."""
        now = self._clock()
        self._down.add(source)
        if self._since is None:
            self._since = self._last_warning = now
            self.outages += 1
            log.warning("API server unreachable, retrying every second: %s", cause)
        elif now - self._last_warning >= self.repeat_every:
            self._last_warning = now
            log.warning(
                "API server still unreachable after %.0fs (%d informers waiting): %s",
                now - self._since,
                len(self._down),
                cause,
            )

    def forget(self, source: str) -> None:
        """`source` stopped (not reconnected): it no longer keeps an outage open."""
        self._down.discard(source)
        if not self._down:
            self._since = None

    def restored(self, source: str) -> None:
        """`source` listed or opened a watch: it has the server again."""
        if source not in self._down:
            return
        self._down.discard(source)
        if self._down or self._since is None:
            return
        log.info("API server reachable again after %.1fs; catching up", self._clock() - self._since)
        self._since = None
        for callback in list(self._listeners):
            try:
                callback()
            except Exception:
                log.exception("connectivity listener %r failed", callback)
