"""From a watched object to the requests it should trigger.

A controller for ClusterPolicy also watches the DaemonSets it owns: a change to one
DaemonSet must reconcile its owner, not the DaemonSet. A mapping says which requests an
object stands for; the handler applies predicates, maps, and adds to the queue, and
nothing else: informer handlers run inline and must be quick.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from reconciler._objects import GVK, Object, Request, namespace_of, owner_references_of
from reconciler._predicates import Predicate

MapFunc = Callable[[Object], Iterable[Request]]
"""Which requests an object stands for."""


def enqueue_object(obj: Object) -> Iterable[Request]:
    """The object itself (the default: a controller watching its primary kind)."""
    return (Request.of(obj),)


def enqueue_owner(owner: GVK, *, namespaced: bool, only_controller: bool = True) -> MapFunc:
    """The owners of the object of kind `owner` (matched on group and kind, any version).

    `namespaced` says whether the owner kind is namespaced (then it lives in the object's
    namespace) or cluster-scoped. With `only_controller`, only the managing owner counts.
    """

    def mapping(obj: Object) -> Iterable[Request]:
        out = []
        for ref in owner_references_of(obj):
            if only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != owner.kind:
                continue
            if GVK.from_api_version(str(ref.get("apiVersion", "")), "").group != owner.group:
                continue
            out.append(Request(namespace_of(obj) if namespaced else "", str(ref["name"])))
        return out

    return mapping


def enqueue_mapped(func: Callable[[Object], Iterable[Request]]) -> MapFunc:
    """Any function of the object: e.g. a Node change reconciles the one ClusterPolicy."""
    return func


class RequestSink(Protocol):
    """Where a handler's requests go: a controller's queue, or what adds to it a request
    that skips its pacing turn."""

    def add(self, item: Request) -> None: ...


class WatchHandler:
    """Informer event handler that feeds one controller's queue."""

    def __init__(
        self,
        queue: RequestSink,
        mapping: MapFunc,
        predicates: Sequence[Predicate] = (),
        *,
        map_old: bool = True,
    ) -> None:
        self._queue = queue
        self._mapping = mapping
        self._predicates = tuple(predicates)
        self._map_old = map_old

    def on_add(self, obj: Object) -> None:
        if all(p.create(obj) for p in self._predicates):
            for request in self._mapping(obj):
                self._queue.add(request)

    def on_update(self, old: Object, new: Object) -> None:
        if all(p.update(old, new) for p in self._predicates):
            # An owner reference or label that went away still concerns the old target.
            sides = (new, old) if self._map_old else (new,)
            for request in dict.fromkeys(r for side in sides for r in self._mapping(side)):
                self._queue.add(request)

    def on_delete(self, obj: Object) -> None:
        if all(p.delete(obj) for p in self._predicates):
            for request in self._mapping(obj):
                self._queue.add(request)
