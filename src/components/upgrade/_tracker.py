"""Expectations: do not decide from a cache that has not yet seen our own last write.

After the operator writes a node, the cache shows the old node until the watch event
arrives. A decision taken in that window could count a node twice or not at all, and the
limits are exactly such counts. So each write is remembered with the resourceVersion the
server answered, and a reconcile that finds its cache behind any of them stops: the watch
event it is waiting for will enqueue it again. client-go's controllers keep the same kind of
expectations; an entry gives up after `timeout` seconds, so a lost event cannot stall the
upgrade for good.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reconciler import Object, name_of, resource_version_of


def _newer_or_equal(cached: str, expected: str) -> bool:
    # resourceVersions are opaque to clients, but etcd-backed servers make them increasing
    # integers; anything else is caught up when equal (or when the entry times out).
    try:
        return int(cached) >= int(expected)
    except ValueError:
        return cached == expected


class _Expectations:
    """Per key, the resourceVersion the cache should show and when to stop waiting for it
    (`timeout` seconds after it was recorded)."""

    def __init__(
        self, *, timeout: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeout = timeout
        self._clock = clock
        self._expected: dict[str, tuple[str, float]] = {}


class WriteTracker(_Expectations):
    def record(self, written: Object) -> None:
        """Remember a write (the object the server returned)."""
        rv = resource_version_of(written)
        if rv:
            self._expected[name_of(written)] = (rv, self._clock() + self.timeout)

    def behind(self, name: str, cached: Object | None) -> bool:
        """Whether the cache has not yet caught up with our last write of `name`."""
        entry = self._expected.get(name)
        if entry is None:
            return False
        rv, deadline = entry
        if cached is not None and _newer_or_equal(resource_version_of(cached), rv):
            del self._expected[name]
            return False
        if cached is None or self._clock() > deadline:
            # Deleted, or the event never came: stop waiting for it.
            del self._expected[name]
            return False
        return True

    def pending(self, lookup: Callable[[str], Object | None]) -> list[str]:
        """Names whose last write the cache has not caught up with yet."""
        return [n for n in list(self._expected) if self.behind(n, lookup(n))]

    def seconds_left(self) -> float:
        """Until the earliest expectation gives up (for a safety requeue)."""
        if not self._expected:
            return 0.0
        return max(0.0, min(d for _, d in self._expected.values()) - self._clock())


class DeleteTracker(_Expectations):
    """Pods we asked to delete, until the cache shows the deletion.

    A node's reconcile that runs again before the pod's event arrives would see the pod as
    it was and delete it again: a read of the node's pods from the server and a DELETE that
    the server refuses (409), on most nodes of a walk, where several pods go at once and
    each of their events requeues the node. Keyed by the pod's uid; the cache has caught up
    when it shows the pod changed (terminating) or gone. An entry gives up after `timeout`."""

    def record(self, uid: str, resource_version: str) -> None:
        """The pod `uid`, as the cache showed it at `resource_version`, was asked to go."""
        now = self._clock()
        if len(self._expected) > 1_000:
            self._expected = {u: e for u, e in self._expected.items() if e[1] > now}
        self._expected[uid] = (resource_version, now + self.timeout)

    def behind(self, uid: str, resource_version: str, *, terminating: bool) -> bool:
        """Whether the cache still shows pod `uid` as it was when we asked it to go."""
        entry = self._expected.get(uid)
        if entry is None:
            return False
        rv, deadline = entry
        if terminating or resource_version != rv or self._clock() > deadline:
            del self._expected[uid]
            return False
        return True
