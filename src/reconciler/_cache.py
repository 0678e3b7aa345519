"""The informers of one manager, and the reads a reconcile makes from them.

Reconciles read here, never from the server: a read is a dict lookup, and a controller
that runs for every node of a 5,000-node cluster costs the API server nothing between
changes.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterable, Mapping
from dataclasses import astuple
from typing import Any

from reconciler._connectivity import Connectivity
from reconciler._exceptions import CacheSyncTimeout, NotCached
from reconciler._indexers import NAMESPACE_INDEX, IndexFunc, by_label, label_index_name
from reconciler._informer import Informer
from reconciler._objects import GVK, Object, ObjectKey, labels_of, namespace_of
from reconciler._reflector import INACTIVITY_TIMEOUT
from reconciler._restmapper import RESTMapper
from reconciler._scope import Scope
from reconciler._transport import Transport
from reconciler._trim import Path, Transform, Trimmer


class Cache:
    def __init__(self, transport: Transport, mapper: RESTMapper) -> None:
        self._transport = transport
        self._mapper = mapper
        self._informers: dict[GVK, Informer] = {}
        self._started = False
        self.connectivity = Connectivity()
        """Whether the informers reach the API server; one WARNING per outage for all."""

    @property
    def informers(self) -> builtins.list[Informer]:
        return list(self._informers.values())

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self._informers.values())

    def informer(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        index_labels: Iterable[str] = (),
        drop: Iterable[Path] = (),
        transform: Transform | None = None,
        schema: Any = None,
        inactivity_timeout: float = INACTIVITY_TIMEOUT,
    ) -> Informer:
        """The informer for `gvk`, created on first call; later calls may add indexers.

        `drop` lists paths (tuples of keys, `"*"` for every list element) never read by any
        controller: they are skipped while decoding and never cached, on top of
        `managedFields`. `transform` runs on each object before it is cached. `schema` (a
        TypedDict) keeps only the fields it names, decoded in C: for a kind that comes in
        floods (pods), where skipping `drop`'s paths costs Python calls per field.
        `index_labels` adds an index per label key (used by `list(labels=...)`).

        One informer per kind, so asking again is a programming error (`ValueError`) when
        the answer would not be what was asked for: a different scope, a different
        `transform`, or `drop` paths or a `schema` other than the informer's (no `drop`,
        no `schema` mean "any").
        """
        all_indexers = dict(indexers or {})
        for key in index_labels:
            all_indexers[label_index_name(key)] = by_label(key)
        scope = Scope(namespace, label_selector, field_selector)
        informer = self._informers.get(gvk)
        if informer is not None:
            _check_same(informer, scope, drop, transform, schema)
            informer.add_indexers(all_indexers)
            return informer
        informer = Informer(
            self._transport,
            self._mapper,
            gvk,
            scope=scope,
            indexers=all_indexers,
            trimmer=Trimmer(drop, transform, schema=schema),
            inactivity_timeout=inactivity_timeout,
            connectivity=self.connectivity,
        )
        self._informers[gvk] = informer
        if self._started:
            informer.start()
        return informer

    def informer_for(self, gvk: GVK) -> Informer:
        informer = self._informers.get(gvk)
        if informer is None:
            raise NotCached(f"no informer for {gvk}; register one with cache.informer()")
        return informer

    def is_cached(self, gvk: GVK) -> bool:
        return gvk in self._informers

    def has_synced(self, gvk: GVK) -> bool:
        """Whether the cache's view of `gvk` is complete: an absent object is truly absent."""
        informer = self._informers.get(gvk)
        return informer is not None and informer.has_synced

    async def start(self) -> None:
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def stop(self) -> None:
        self._started = False
        await asyncio.gather(*(i.stop() for i in self._informers.values()))

    async def wait_for_sync(self, sync_timeout: float | None = None) -> None:
        """Wait until every informer (including ones added meanwhile) has listed once."""
        try:
            async with asyncio.timeout(sync_timeout):
                while not self.synced:
                    await asyncio.gather(*(i.wait_for_sync() for i in self.informers))
        except TimeoutError:
            pending = [str(i.gvk) for i in self.informers if not i.has_synced]
            raise CacheSyncTimeout(f"caches not synced after {sync_timeout}s: {pending}") from None

    # -- reads ---------------------------------------------------------------------------

    def get(self, gvk: GVK, name: str, namespace: str = "") -> Object | None:
        """The cached object, or None. Do not mutate it; deep-copy first."""
        return self.informer_for(gvk).store.get(ObjectKey(namespace, name))

    def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
    ) -> builtins.list[Object]:
        """Cached objects of a kind, narrowed by namespace, equal label values, an index.

        The narrowest index available is used first; the rest is filtered in memory.
        """
        store = self.informer_for(gvk).store
        names = set(store.index_names)
        candidates: builtins.list[Object] | None = None
        if index is not None:
            candidates = store.by_index(*index)
        elif labels:
            for key, value in labels.items():
                if label_index_name(key) in names:
                    candidates = store.by_index(label_index_name(key), value)
                    break
        if candidates is None:
            candidates = store.by_index(NAMESPACE_INDEX, namespace) if namespace else store.list()
        out = candidates
        if namespace is not None:
            out = [o for o in out if namespace_of(o) == namespace]
        if labels:
            items = labels.items()
            out = [o for o in out if all(labels_of(o).get(k) == v for k, v in items)]
        return out


def _check_same(
    informer: Informer,
    scope: Scope,
    drop: Iterable[Path],
    transform: Transform | None,
    schema: Any,
) -> None:
    gvk = informer.gvk
    if scope != informer.scope:
        raise ValueError(f"{gvk} is already cached with scope {astuple(informer.scope)}")
    if transform is not informer.trimmer.transform:
        raise ValueError(f"{gvk} is already cached with transform {informer.trimmer.transform}")
    paths = Trimmer(drop).paths
    if paths != Trimmer().paths and paths != informer.trimmer.paths:
        raise ValueError(f"{gvk} is already cached dropping {informer.trimmer.paths}")
    if schema is not None and schema is not informer.trimmer.schema:
        raise ValueError(f"{gvk} is already cached as {informer.trimmer.schema}")
