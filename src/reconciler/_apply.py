"""Server-side apply of a whole desired object, skipped when its result is already there.

A hash of the desired object, kept in an annotation, lets a reconcile skip an apply whose
result it already sees in the cache: at 5,000 nodes most reconciles change nothing and
should cost nothing. The cache lags the server by the watch's delay, so what our own
applies returned is kept (`WrittenCopies`) until the cache catches up with it.
"""

from __future__ import annotations

import logging
from typing import Protocol, Unpack

from reconciler._cache import Cache
from reconciler._exceptions import NotFound
from reconciler._objects import (
    GVK,
    Object,
    annotations_of,
    display_name_of,
    metadata_of,
    name_of,
    namespace_of,
    parse_revision,
    resource_version_of,
    revision_of,
)
from reconciler._outcomes import Applied, Operation, desired_hash
from reconciler._restmapper import Resource, RESTMapper
from reconciler._transport import APPLY_PATCH, Params, RequestOptions
from reconciler._written import WrittenCopies

log = logging.getLogger("reconciler.client")


class Send(Protocol):
    """The client's `request_with_status`: its retries, and its lease check before a write."""

    async def __call__(
        self, method: str, path: str, **options: Unpack[RequestOptions]
    ) -> tuple[int, Object]: ...


class ServerSideApply:
    """`Client.apply`'s machinery: the applied-hash skip and our own written copies. Its
    requests go out through the client's `send`, as every other request does, with the
    same retries and the same lease check; the field manager is the client's to choose."""

    def __init__(
        self,
        mapper: RESTMapper,
        cache: Cache,
        *,
        hash_annotation: str | None,
        send: Send,
    ) -> None:
        self.mapper = mapper
        self.cache = cache
        self.hash_annotation = hash_annotation
        self._send = send
        self._applied = WrittenCopies()
        """What our hashed applies returned: the cache's copy (and the hash on it) is older
        than the server's until its watch brings them."""

    def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        """The object is being deleted: a copy we wrote of it says nothing of its successor."""
        self._applied.forget((gvk, namespace, name))

    async def apply(
        self, obj: Object, *, force: bool, field_manager: str, subresource: str | None
    ) -> Applied:
        gvk = GVK.of(obj)
        res = await self.mapper.resource_for(gvk)
        name, namespace = name_of(obj), namespace_of(obj)
        before = self._as_we_left_it(
            gvk, name, namespace, await self._current(gvk, res, name, namespace)
        )
        # A subresource apply (status) carries no annotation: it is never skipped.
        annotation = self.hash_annotation if subresource is None else None
        if annotation:
            digest = desired_hash(obj)
            if before is not None and annotations_of(before).get(annotation) == digest:
                log.debug("apply %s %s skipped: unchanged", gvk.kind, display_name_of(obj))
                return Applied(before, Operation.UNCHANGED)
            obj = _with_annotation(obj, annotation, digest)
        params: Params = {"fieldManager": field_manager, "force": force}

        path = res.path(namespace, name, subresource)
        status, out = await self._send(
            "PATCH",
            path,
            params=params,
            body=obj,
            content_type=APPLY_PATCH,
        )
        if annotation:
            self._applied.remember((gvk, namespace, name), out)
        what = f"{gvk.kind}{'/' + subresource if subresource else ''} {display_name_of(obj)}"
        if status == 201:
            operation = Operation.CREATED
        elif before is not None and resource_version_of(before) == resource_version_of(out):
            operation = Operation.UNCHANGED
        else:
            operation = Operation.UPDATED
        if operation is Operation.UNCHANGED:
            log.debug("applied %s: no change", what)
        else:
            log.info("applied %s", what)
        return Applied(out, operation)

    def _as_we_left_it(
        self, gvk: GVK, name: str, namespace: str, current: Object | None
    ) -> Object | None:
        """`current`, or what our last apply of the object returned while the kind's cache
        has not reached that version. A desired state that went A, B and back to A within
        the watch's lag would otherwise find A's hash on the stale cached copy and skip
        the apply, leaving B on the server (nothing would correct it: B is ours)."""
        key = (gvk, namespace, name)
        if not self._applied.holds(key):
            return current
        if not self.cache.has_synced(gvk):
            seen = None  # `current` came from a GET: as fresh as it gets
        elif current is not None:
            seen = revision_of(current)
        else:  # not cached: not seen yet, or seen deleted since (then the kind's watch is past it)
            seen = parse_revision(self.cache.informer_for(gvk).reflector.last_sync_resource_version)
        return self._applied.latest(key, current, seen)

    async def _current(self, gvk: GVK, res: Resource, name: str, namespace: str) -> Object | None:
        """The object as it is now: the cache's copy once it can be trusted, else the server's."""
        if self.cache.has_synced(gvk):
            return self.cache.get(gvk, name, namespace)
        try:
            _, current = await self._send("GET", res.path(namespace, name))
        except NotFound:
            return None
        return current


def _with_annotation(obj: Object, key: str, value: str) -> Object:
    meta = dict(metadata_of(obj))
    meta["annotations"] = {**(meta.get("annotations") or {}), key: value}
    return {**obj, "metadata": meta}
