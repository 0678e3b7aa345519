"""Writing what the renderers want: server-side apply, skipped when nothing changed, and
pruning what we own but no longer want.

Every write goes through `Client.apply` with the one field manager and the hash
annotation, so an object whose cached copy already carries the desired hash costs nothing.
Each real change (the apply says whether it created or updated) is returned as a `Change`
for the caller to report (an Event, a line).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.api import (
    COMPONENT_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
)
from components.controllers import _informers
from reconciler import (
    GVK,
    Client,
    Informer,
    Manager,
    Object,
    is_deleting,
    labels_of,
    metadata_of,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)

log = logging.getLogger("components.controllers.apply")

ObjectRef = tuple[str, str, str, str]
"""(group, kind, namespace, name): which object, whatever its API version."""


def ref_of(obj: Object) -> ObjectRef:
    gvk = GVK.of(obj)
    return (gvk.group, gvk.kind, namespace_of(obj), name_of(obj))


def describe(obj: Object) -> str:
    ns = namespace_of(obj)
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{name_of(obj)}"


@dataclass(frozen=True)
class Change:
    """One write that changed the cluster."""

    verb: str  # created | updated | deleted
    what: str  # "DaemonSet gpu-operator/nvidia-driver-daemonset-ubuntu22.04"
    component: str

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"


def controller_owner(obj: Object) -> dict[str, object] | None:
    return next((r for r in owner_references_of(obj) if r.get("controller")), None)


def component_of(obj: Object) -> str:
    return labels_of(obj).get(COMPONENT_LABEL, "")


def with_ownership_labels(obj: Object, component: str) -> Object:
    """`obj` with the labels every object we render must carry (added if missing)."""
    labels = labels_of(obj)
    if (
        labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        and labels.get(COMPONENT_LABEL) == component
    ):
        return obj
    meta = dict(metadata_of(obj))
    meta["labels"] = {**labels, MANAGED_BY_LABEL: MANAGED_BY_VALUE, COMPONENT_LABEL: component}
    return {**obj, "metadata": meta}


class Applier:
    """Applies and prunes the objects of the controllers, through one manager's client."""

    def __init__(self, manager: Manager, namespace: str) -> None:
        self.manager = manager
        self.client: Client = manager.client
        self.namespace = namespace
        self._listeners: list[Callable[[Informer], None]] = []

    def on_new_informer(self, listener: Callable[[Informer], None]) -> None:
        """Call `listener` with each owned-kind informer created from now on (a controller
        that watches what it owns watches the new kind too)."""
        self._listeners.append(listener)

    @property
    def owned_informers(self) -> list[Informer]:
        return [i for i in self.manager.cache.informers if _informers.is_owned_kind(i)]

    def ensure_informer(self, obj: Object) -> None:
        """Cache the kind of `obj` (first time it is rendered), so it can be pruned and its
        applies skipped.

        Does not wait for the new informer's first list: a worker must not sit in a
        reconcile for a cache. Until the list lands `Client.apply` reads the object from
        the server, and the list's adds bring the owners back to prune what it finds.
        """
        gvk = GVK.of(obj)
        if self.manager.cache.is_cached(gvk):
            return
        informer = _informers.owned(
            self.manager, gvk, self.namespace if namespace_of(obj) else None
        )
        log.debug("caching %s, first rendered now", gvk)
        for listener in self._listeners:
            listener(informer)

    async def write(self, obj: Object, component: str) -> Change | None:
        """Label `obj` as ours and server-side apply it; a Change when the cluster changed."""
        obj = with_ownership_labels(obj, component)
        self.ensure_informer(obj)
        applied = await self.client.apply(obj)
        if not applied.changed:
            return None
        return Change(applied.operation.value, describe(obj), component)

    def owned_objects(self, owned_by: Callable[[Object], bool]) -> list[Object]:
        """Cached objects we rendered whose controlling owner passes `owned_by`."""
        out: list[Object] = []
        for informer in self.owned_informers:
            for obj in informer.store.list():
                if component_of(obj) and owned_by(obj):
                    out.append(obj)
        return out

    async def prune(
        self,
        desired: Iterable[ObjectRef],
        owned_by: Callable[[Object], bool],
        *,
        keep: Callable[[Object], bool] = lambda _: False,
    ) -> list[Change]:
        """Delete what `owned_by` says is ours, is not `desired`, and `keep` lets go."""
        wanted = set(desired)
        changes: list[Change] = []
        for obj in self.owned_objects(owned_by):
            if ref_of(obj) in wanted or keep(obj):
                continue
            if is_deleting(obj):
                continue
            await delete_judged(self.client, obj)
            changes.append(Change("deleted", describe(obj), component_of(obj)))
        return changes


async def delete_judged(client: Client, obj: Object) -> None:
    """Delete `obj`, the very object judged (its uid a precondition: one replaced meanwhile
    under its name refuses, 409); one already gone is no error."""
    await client.delete(
        GVK.of(obj),
        name_of(obj),
        namespace=namespace_of(obj),
        uid=uid_of(obj) or None,
        missing_ok=True,
    )


def owned_by_kind(kind: str, uid: str | None = None) -> Callable[[Object], bool]:
    """Objects whose controlling owner is of `kind` (and has `uid`, when given)."""

    def test(obj: Object) -> bool:
        ref = controller_owner(obj)
        if ref is None or ref.get("kind") != kind:
            return False
        return uid is None or ref.get("uid") == uid

    return test
