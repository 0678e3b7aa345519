"""The cache of one kind: objects by key, plus the indices kept beside them."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping

from reconciler._indexers import IndexFunc
from reconciler._objects import Object, ObjectKey


def key_of(obj: Object) -> ObjectKey:
    return ObjectKey.of(obj)


class Store:
    """Objects by (namespace, name) with secondary indices.

    Objects handed out are the cached dicts themselves, as client-go's listers hand out
    pointers: copying every read would cost more than the cache. Callers must not mutate
    them; `copy.deepcopy` first when you need to change one.
    """

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[ObjectKey, Object] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[ObjectKey]]] = {n: {} for n in self._indexers}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[Object]:
        return iter(self._items.values())

    @property
    def index_names(self) -> builtins.list[str]:
        return list(self._indexers)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices, built at once over what is already cached; existing names are kept."""
        for name, func in indexers.items():
            if name in self._indexers:
                continue
            self._indexers[name] = func
            index: dict[str, set[ObjectKey]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in func(obj):
                    index.setdefault(value, set()).add(key)

    def get(self, key: ObjectKey) -> Object | None:
        return self._items.get(key)

    def keys(self) -> builtins.list[ObjectKey]:
        return list(self._items)

    def list(self) -> builtins.list[Object]:
        return list(self._items.values())

    def index_keys(self, index: str, value: str) -> set[ObjectKey]:
        if index not in self._indices:
            raise KeyError(f"no index named {index!r}; have {sorted(self._indices)}")
        return set(self._indices[index].get(value, ()))

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        keys = self.index_keys(index, value)
        items = self._items
        return [items[k] for k in keys]

    def upsert(self, obj: Object) -> Object | None:
        """Insert or replace; returns the previous object."""
        key = key_of(obj)
        old = self._items.get(key)
        self._items[key] = obj
        if old is not None:
            self._unindex(key, old)
        self._index(key, obj)
        return old

    def delete(self, key: ObjectKey) -> Object | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _index(self, key: ObjectKey, obj: Object) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                bucket = index.get(value)
                if bucket is None:
                    index[value] = {key}
                else:
                    bucket.add(key)

    def _unindex(self, key: ObjectKey, obj: Object) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                bucket = index.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del index[value]
