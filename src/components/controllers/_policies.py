"""Which ClusterPolicy is active: the oldest, as in the reference.

Only one ClusterPolicy is acted on. Creation time decides, then the name, so every replica
and every reconcile agree even when two were created in the same second.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler import Object, name_of


def _age_key(obj: Object) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), name_of(obj))


def oldest(objects: Iterable[Object]) -> Object | None:
    """The oldest object not being deleted (None if there is none)."""
    live = [o for o in objects if not (o.get("metadata") or {}).get("deletionTimestamp")]
    return min(live, key=_age_key) if live else None


def by_age(objects: Iterable[Object]) -> list[Object]:
    """Oldest first."""
    return sorted(objects, key=_age_key)
