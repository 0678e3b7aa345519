"""The active ClusterPolicy, parsed: once per change, for every controller that reads it.

Which one is active is `components.api.active_cluster_policy`'s rule; this parses it (the
node labeller reads it for each of 5,000 nodes) and keeps the result until the object
changes. An invalid one reads as None: the ClusterPolicy controller reports it, everyone
else leaves things as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pydantic

from components.api import ClusterPolicy, active_cluster_policy
from reconciler import Object, name_of, resource_version_of


class ActivePolicy:
    def __init__(self, list_policies: Callable[[], Sequence[Object]]) -> None:
        self._list = list_policies
        self._parsed: tuple[str, str, ClusterPolicy | None] | None = None

    def object(self) -> Object | None:
        return active_cluster_policy(self._list())

    def parsed(self) -> ClusterPolicy | None:
        obj = self.object()
        if obj is None:
            return None
        key = (name_of(obj), resource_version_of(obj))
        if self._parsed is not None and self._parsed[:2] == key:
            return self._parsed[2]
        try:
            policy: ClusterPolicy | None = ClusterPolicy.from_dict(obj)
        except pydantic.ValidationError:
            policy = None
        self._parsed = (*key, policy)
        return policy
