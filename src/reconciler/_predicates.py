"""Predicates: which events are worth a reconcile.

Most updates a controller sees change nothing it acts on (status heartbeats, a Node's
conditions every few seconds). Filtering them out before they reach the queue keeps the
queue quiet at 5,000 nodes. Predicates see events, never decide correctness: a level-based
reconcile still computes everything from the cache when it does run.
"""

from __future__ import annotations

from collections.abc import Callable
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


class GenerationChanged(_UpdateOnly):
    """Updates that changed the spec (metadata.generation); ignores status-only writes."""

    def update(self, old: Object, new: Object) -> bool:
        return generation_of(old) != generation_of(new)


class LabelsChanged(_UpdateOnly):
    def update(self, old: Object, new: Object) -> bool:
        return labels_of(old) != labels_of(new)


class AnnotationsChanged(_UpdateOnly):
    def update(self, old: Object, new: Object) -> bool:
        return annotations_of(old) != annotations_of(new)


class ResourceVersionChanged(_UpdateOnly):
    """Drops updates that are not changes at all (a relist re-delivering the same object)."""

    def update(self, old: Object, new: Object) -> bool:
        return resource_version_of(old) != resource_version_of(new)


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


class Or:
    """Passes when any predicate passes, e.g. `Or(GenerationChanged(), LabelsChanged())`."""

    def __init__(self, *predicates: Predicate) -> None:
        self.predicates = predicates

    def create(self, obj: Object) -> bool:
        return any(p.create(obj) for p in self.predicates)

    def update(self, old: Object, new: Object) -> bool:
        return any(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Object) -> bool:
        return any(p.delete(obj) for p in self.predicates)


class And:
    def __init__(self, *predicates: Predicate) -> None:
        self.predicates = predicates

    def create(self, obj: Object) -> bool:
        return all(p.create(obj) for p in self.predicates)

    def update(self, old: Object, new: Object) -> bool:
        return all(p.update(old, new) for p in self.predicates)

    def delete(self, obj: Object) -> bool:
        return all(p.delete(obj) for p in self.predicates)
