"""Verdicts per image, cached: a thousand nodes that pull one image cost one request.

Each entry lives for a short time that depends on what it says: a missing image is asked
again soon (pushing it should let the walk go on within seconds), a present one seldom, an
unreachable registry in between (an air-gapped cluster is not asked every reconcile). An
expired entry is still answered while its refresh runs, so a node never flips from
blocked to "not checked yet" and back. At most one request per image is in flight; the
cache holds a bounded number of images, dropping the oldest first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from components.preflight._auth import BasicAuth
from components.preflight._client import Check, RegistryClient, Verdict
from components.preflight._reference import ImageRef, ReferenceError, parse_reference

log = logging.getLogger("components.preflight")

Credentials = Callable[[ImageRef], Awaitable[BasicAuth | None]]
"""Finds the pull secret's credentials for an image's registry (read only when asked)."""


@dataclass(frozen=True, slots=True)
class TTL:
    present: float = 300.0
    missing: float = 10.0
    unreachable: float = 60.0

    def of(self, verdict: Verdict) -> float:
        if verdict is Verdict.PRESENT:
            return self.present
        if verdict is Verdict.MISSING:
            return self.missing
        return self.unreachable


class ImageChecker:
    """Cached, deduplicated checks; `on_change` is called when an answer comes in."""

    def __init__(
        self,
        client: RegistryClient | None = None,
        *,
        ttl: TTL = TTL(),
        limit: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.client = client or RegistryClient()
        self.ttl, self.limit, self.clock = ttl, limit, clock
        self.on_change = on_change
        self._entries: OrderedDict[tuple[str, str], tuple[Check, float]] = OrderedDict()
        self._inflight: dict[tuple[str, str], asyncio.Task[Check]] = {}
        self.requests = 0
        """Checks sent to registries (each may be a few HTTP requests)."""

    def lookup(self, image: str, credentials: Credentials, *, secrets: str = "") -> Check | None:
        """The newest verdict for `image` (perhaps expired, then being refreshed), or None
        while the first check runs. `secrets` names the pull secrets used: another set of
        credentials is another question."""
        key = (image, secrets)
        found = self._entries.get(key)
        if found is not None and found[1] > self.clock():
            return found[0]
        if key not in self._inflight:
            task = asyncio.get_running_loop().create_task(self._run(key, credentials))
            self._inflight[key] = task
        return found[0] if found is not None else None

    async def check(self, image: str, credentials: Credentials, *, secrets: str = "") -> Check:
        """The verdict for `image`, waiting for a check when none is fresh."""
        found = self.lookup(image, credentials, secrets=secrets)
        key = (image, secrets)
        entry = self._entries.get(key)
        if found is not None and entry is not None and entry[1] > self.clock():
            return found
        return await asyncio.shield(self._inflight[key])

    def next_expiry(self) -> float | None:
        """Seconds until the first verdict other than PRESENT is due again (None: none).
        One already due is left out: a lookup is refreshing it (and its answer calls
        `on_change`), or nothing needs that image any more."""
        now = self.clock()
        due = [
            at
            for check, at in self._entries.values()
            if check.verdict is not Verdict.PRESENT and at > now
        ]
        return min(due) - now if due else None

    async def _run(self, key: tuple[str, str], credentials: Credentials) -> Check:
        image = key[0]
        try:
            try:
                ref = parse_reference(image)
            except ReferenceError as exc:
                result = Check(image, Verdict.UNREACHABLE, str(exc))
            else:
                self.requests += 1
                result = await self.client.check(ref, await credentials(ref))
            previous = self._entries.pop(key, None)
            self._entries[key] = (result, self.clock() + self.ttl.of(result.verdict))
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)
            if previous is None or previous[0] != result:
                log.debug("pre-flight %s: %s %s", image, result.verdict, result.detail)
            # Every answer, changed or not: whoever waits on it looks again (and learns when
            # it is due next).
            if self.on_change is not None:
                self.on_change()
            return result
        finally:
            self._inflight.pop(key, None)

    async def close(self) -> None:
        for task in list(self._inflight.values()):
            task.cancel()
        await self.client.close()
