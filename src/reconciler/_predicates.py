"""Predicates: which events are worth a reconcile.

Most updates a controller sees change nothing it acts on (status heartbeats, a Node's
conditions every few seconds). Filtering them out before they reach the queue keeps the
queue quiet at 5,000 nodes. Predicates see events, never decide correctness: a level-based
reconcile still computes everything from the cache when it does run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from reconciler._objects import (
    Object,
    annotations_of,
    generation_of,
    labels_of,
    resource_version_of,
)


class Predicate(Protocol):
    def create(self, obj: Object) -> bool: ...
    def update(self, old: Object, new: Object) -> bool: ...
    def delete(self, obj: Object) -> bool: ...


class _UpdateOnly:
    """Creates and deletes always pass; subclasses judge updates."""

    def create(self, obj: Object) -> bool:
        return True

    def delete(self, obj: Object) -> bool:
        return True

    def update(self, old: Object, new: Object) -> bool:
        raise NotImplementedError


class _Changed(_UpdateOnly):
    """Updates after which `read` of the object says something else."""

    read: Callable[[Object], object]

    def update(self, old: Object, new: Object) -> bool:
        return self.read(old) != self.read(new)


class GenerationChanged(_Changed):
    """Updates that changed the spec (metadata.generation); ignores status-only writes."""

    read = staticmethod(generation_of)


class LabelsChanged(_Changed):
    read = staticmethod(labels_of)


class AnnotationsChanged(_Changed):
    read = staticmethod(annotations_of)


class ResourceVersionChanged(_Changed):
    """Drops updates that are not changes at all (a relist re-delivering the same object)."""

    read = staticmethod(resource_version_of)


class Funcs:
    """A predicate from plain functions; an omitted one lets every event of its kind pass."""

    def __init__(
        self,
        *,
        create: Callable[[Object], bool] | None = None,
        update: Callable[[Object, Object], bool] | None = None,
        delete: Callable[[Object], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete

    def create(self, obj: Object) -> bool:
        return self._create is None or self._create(obj)

    def update(self, old: Object, new: Object) -> bool:
        return self._update is None or self._update(old, new)

    def delete(self, obj: Object) -> bool:
        return self._delete is None or self._delete(obj)


class Matching:
    """Only objects for which `test(obj)` holds (for updates, either side)."""

    def __init__(self, test: Callable[[Object], bool]) -> None:
        self._test = test

    def create(self, obj: Object) -> bool:
        return self._test(obj)

    def update(self, old: Object, new: Object) -> bool:
        return self._test(old) or self._test(new)

    def delete(self, obj: Object) -> bool:
        return self._test(obj)


class _Combined:
    """Predicates joined by `combine` (`any` or `all`), event by event."""

    combine: Callable[[Iterable[bool]], bool]

    def __init__(self, *predicates: Predicate) -> None:
        self.predicates = predicates

    def create(self, obj: Object) -> bool:
        return self.combine(p.create(obj) for p in self.predicates)

    def update(self, old: Object, new: Object) -> bool:
        return self.combine(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Object) -> bool:
        return self.combine(p.delete(obj) for p in self.predicates)


class Or(_Combined):
    """Passes when any predicate passes, e.g. `Or(GenerationChanged(), LabelsChanged())`."""

    combine = staticmethod(any)


class And(_Combined):
    combine = staticmethod(all)
