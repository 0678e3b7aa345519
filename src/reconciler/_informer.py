"""An informer: one reflector, one store, and the handlers told about each change.

Handlers run inline on the reflector's task, in order, so they must be quick: enqueue a
key and return. A handler that raises is logged and skipped; it cannot stop the stream
that every other handler depends on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from reconciler._connectivity import Connectivity
from reconciler._decode import ObjectDecoder
from reconciler._indexers import DEFAULT_INDEXERS, IndexFunc
from reconciler._objects import GVK, Object, resource_version_of
from reconciler._reflector import INACTIVITY_TIMEOUT, Reflector
from reconciler._restmapper import RESTMapper
from reconciler._scope import WHOLE_KIND, Scope
from reconciler._store import Store, key_of
from reconciler._transport import Transport
from reconciler._trim import Trimmer

log = logging.getLogger("reconciler.informer")


class EventHandler(Protocol):
    def on_add(self, obj: Object) -> None: ...
    def on_update(self, old: Object, new: Object) -> None: ...
    def on_delete(self, obj: Object) -> None: ...


class Informer:
    """Keeps `store` equal to the server's view of one kind (and selector)."""

    def __init__(
        self,
        transport: Transport,
        mapper: RESTMapper,
        gvk: GVK,
        *,
        scope: Scope = WHOLE_KIND,
        indexers: Mapping[str, IndexFunc] | None = None,
        trimmer: Trimmer | None = None,
        inactivity_timeout: float = INACTIVITY_TIMEOUT,
        connectivity: Connectivity | None = None,
    ) -> None:
        """`connectivity` is shared by a cache's informers, so an outage is told once."""
        self.gvk = gvk
        self.scope = scope
        self.store = Store({**DEFAULT_INDEXERS, **(indexers or {})})
        self.trimmer = trimmer or Trimmer()
        self.reflector = Reflector(
            transport,
            mapper,
            gvk,
            self,
            scope=scope,
            decoder=ObjectDecoder(self.trimmer.decoder_paths, self.trimmer.schema),
            inactivity_timeout=inactivity_timeout,
            connectivity=connectivity,
        )
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def namespace(self) -> str | None:
        """For a caller that picks the informers it may use by their scope."""
        return self.scope.namespace

    @property
    def label_selector(self) -> str | None:
        return self.scope.label_selector

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def add_handler(self, handler: EventHandler) -> None:
        """Subscribe; a late subscriber is first told about every cached object as an add."""
        self._handlers.append(handler)
        for obj in self.store.list():
            self._call(handler.on_add, obj)

    def remove_handler(self, handler: EventHandler) -> None:
        self._handlers.remove(handler)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        self.store.add_indexers(indexers)

    def start(self) -> None:
        if not self.running:
            self._task = asyncio.create_task(self.reflector.run(), name=f"informer {self.gvk}")

    async def stop(self) -> None:
        """Stop watching; the store keeps its contents and a later `start` resumes."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the reflector's sink ------------------------------------------------------------

    def replace(self, items: Sequence[Object], resource_version: str) -> None:
        store = self.store
        seen = set()
        added = updated = 0
        for raw in items:
            key = key_of(raw)
            seen.add(key)
            old = store.get(key)
            if old is not None and resource_version_of(old) == resource_version_of(raw):
                continue  # unchanged since we last saw it: no event, keep the trimmed copy
            obj = self.trimmer(raw, old)
            store.upsert(obj)
            if old is None:
                added += 1
                self._dispatch_add(obj)
            else:
                updated += 1
                self._dispatch_update(old, obj)
        # Objects deleted while we were not watching: their deletes were never seen.
        gone = set(store.keys()) - seen
        for key in gone:
            old = store.delete(key)
            if old is not None:
                self._dispatch_delete(old)
        log.debug(
            "%s: replaced store at rv=%s: %d added, %d updated, %d deleted, %d total",
            self.gvk,
            resource_version,
            added,
            updated,
            len(gone),
            len(store),
        )
        self._synced.set()

    def on_watch_event(self, event_type: str, obj: Object) -> None:
        previous = self.store.get(key_of(obj)) if event_type == "MODIFIED" else None
        obj = self.trimmer(obj, previous)
        if event_type == "DELETED":
            # The event carries the final state, fresher than the cached copy.
            self.store.delete(key_of(obj))
            self._dispatch_delete(obj)
            return
        old = self.store.upsert(obj)
        if old is None:
            self._dispatch_add(obj)
        else:
            self._dispatch_update(old, obj)

    def _dispatch_add(self, obj: Object) -> None:
        for handler in self._handlers:
            self._call(handler.on_add, obj)

    def _dispatch_update(self, old: Object, new: Object) -> None:
        for handler in self._handlers:
            try:
                handler.on_update(old, new)
            except Exception:
                log.exception("%s: update handler %r failed", self.gvk, handler)

    def _dispatch_delete(self, obj: Object) -> None:
        for handler in self._handlers:
            self._call(handler.on_delete, obj)

    def _call(self, fn: Callable[[Object], None], obj: Object) -> None:
        try:
            fn(obj)
        except Exception:
            log.exception("%s: event handler %r failed", self.gvk, fn)
