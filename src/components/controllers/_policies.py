"""The active ClusterPolicy, parsed: once per change, for every controller that reads it.

Which one is active is `components.api.active_cluster_policy`'s rule; this parses it (the
node labeller reads it for each of 5,000 nodes) and keeps the result until the spec
changes. An invalid one reads as None: the ClusterPolicy controller reports it, everyone
else leaves things as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pydantic

from components.api import ClusterPolicy, active_cluster_policy
from reconciler import Object, generation_of, name_of, resource_version_of, uid_of


def spec_key(obj: Object) -> tuple[str, str, str] | None:
    """What identifies a policy's spec: uid and generation (which status writes, several a
    second during a rollout, leave alone); the resourceVersion when there is no generation;
    None when neither is known (then nothing may be kept)."""
    generation = generation_of(obj)
    version = generation or resource_version_of(obj)
    if not version:
        return None
    return (f"{name_of(obj)}/{uid_of(obj)}", "g" if generation else "rv", str(version))


def parse_spec(obj: Object) -> ClusterPolicy:
    """The policy as a model, from all but its status (which nothing reads from the model,
    and which changes without the spec). Raises `pydantic.ValidationError`."""
    return ClusterPolicy.from_dict({k: v for k, v in obj.items() if k != "status"})


class ActivePolicy:
    def __init__(self, list_policies: Callable[[], Sequence[Object]]) -> None:
        self._list = list_policies
        self._parsed: tuple[tuple[str, str, str], ClusterPolicy | None] | None = None

    def object(self) -> Object | None:
        return active_cluster_policy(self._list())

    def parsed(self) -> ClusterPolicy | None:
        obj = self.object()
        if obj is None:
            return None
        key = spec_key(obj)
        if key is not None and self._parsed is not None and self._parsed[0] == key:
            return self._parsed[1]
        try:
            policy: ClusterPolicy | None = parse_spec(obj)
        except pydantic.ValidationError:
            policy = None
        self._parsed = (key, policy) if key is not None else None
        return policy
