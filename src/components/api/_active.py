"""Which ClusterPolicy is active: the oldest, as in the reference.

Only one ClusterPolicy is acted on. Creation time decides, then the name, so every replica
and every controller (the policy's own, the NVIDIADriver one, the node labeller and the
upgrade) agree even when two were created in the same second. A ClusterPolicy being
deleted is never active: what it owned is going, and the next oldest takes over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from reconciler import creation_timestamp_of, is_deleting, name_of

Obj = TypeVar("Obj", bound=Mapping[str, Any])


def _age_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (creation_timestamp_of(obj), name_of(obj))


def active_cluster_policy(objects: Iterable[Obj]) -> Obj | None:
    """The active one of `objects` (every ClusterPolicy there is), None if none is."""
    live = [o for o in objects if not is_deleting(o)]
    return min(live, key=_age_key) if live else None


def by_age(objects: Iterable[Obj]) -> list[Obj]:
    """Oldest first (the order in which NVIDIADrivers claim nodes, too)."""
    return sorted(objects, key=_age_key)
