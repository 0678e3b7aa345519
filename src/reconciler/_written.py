"""Read-your-writes over a lagging cache.

The cache learns of our own write only when its watch event arrives, a few milliseconds to
a second later. A reconcile in between reads the copy from before the write; if what it
wants equals that older copy it writes nothing, and the server keeps our previous,
different write, which no event will ever correct (it is ours). So each write's returned
object is kept until the cache has seen that version or a newer one, and read instead of
the cache's copy until then. Versions compare as numbers (KEP-5504, stable since 1.35).
"""

from __future__ import annotations

from collections.abc import Hashable

from reconciler._objects import Object, revision_of


class WrittenCopies:
    """Per key, the object our last write of it returned, while the cache is behind it."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, Object] = {}

    def remember(self, key: Hashable, returned: Object) -> None:
        if revision_of(returned) is not None:
            self._kept[key] = returned

    def holds(self, key: Hashable) -> bool:
        """Whether a write of `key` is kept: only then is the cache's version worth reading."""
        return key in self._kept

    def forget(self, key: Hashable) -> None:
        self._kept.pop(key, None)

    def latest(self, key: Hashable, current: Object | None, seen: int | None) -> Object | None:
        """`current` (the cache's copy), or our kept write while the cache has only seen up
        to version `seen` and that is older (None: it has caught up, or cannot tell)."""
        ours = self._kept.get(key)
        if ours is None:
            return current
        written = revision_of(ours)
        if seen is not None and written is not None and seen < written:
            return ours
        del self._kept[key]
        return current
