"""The active ClusterPolicy, parsed: once per change, for every controller that reads it.

Which one is active is `components.api.active_cluster_policy`'s rule; this parses it (the
node labeller reads it for each of 5,000 nodes) and keeps the result until the spec
changes. An invalid one reads as None: the ClusterPolicy controller reports it, everyone
else leaves things as they are.

Which stack the cluster runs when a ClusterPolicy and a GPUCluster both exist: the one
that came first, as the reference allows only one of the two (the device plugin's stack or
the DRA one), and the later one is refused with a condition naming the other. Nothing of
either is torn down: the refused one never acted, the other keeps what it made.

"First" is the older creation time. Both made in the same second (timestamps have one
second's grain), the one already acted on wins: its stored status says so (a state, not a
refusal); else the ClusterPolicy, the reference's default. Every controller (the two
kinds', the node labeller's, the NVIDIADriver one's) reads the same rule from the same
cache, so they agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pydantic

from components.api import ClusterPolicy, active_cluster_policy, by_age
from components.controllers._constants import CLUSTER_POLICY, GPU_CLUSTER
from reconciler import (
    Client,
    Funcs,
    Object,
    creation_timestamp_of,
    generation_of,
    is_deleting,
    name_of,
    resource_version_of,
    uid_of,
)


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


#: The Ready reason of a refused ClusterPolicy and of a refused GPUCluster.
GPU_CLUSTER_EXISTS = "GPUClusterExists"
CLUSTER_POLICY_EXISTS = "ClusterPolicyExists"
_REFUSALS = frozenset({GPU_CLUSTER_EXISTS, CLUSTER_POLICY_EXISTS})


def acted_on(obj: Object) -> bool:
    """Its stored status says a controller acted on it (not a refusal)."""
    status = obj.get("status") or {}
    if not status.get("state"):
        return False
    return not any(
        c.get("type") == "Ready" and c.get("reason") in _REFUSALS
        for c in status.get("conditions") or ()
    )


def _stack_changed(old: Object, new: Object) -> bool:
    return (
        generation_of(old) != generation_of(new)
        or acted_on(old) != acted_on(new)
        or is_deleting(old) != is_deleting(new)
    )


STACK_CHANGED = Funcs(update=_stack_changed)
"""A ClusterPolicy's or GPUCluster's update that may change which stack is on (its spec,
its deletion, or its status turning from refused to acted on), not its progress."""


def cluster_first(policy: Object, cluster: Object) -> bool:
    """Whether the GPUCluster came before the ClusterPolicy (see the module docstring)."""
    mine, theirs = creation_timestamp_of(cluster), creation_timestamp_of(policy)
    if mine != theirs:
        return mine < theirs
    return acted_on(cluster) and not acted_on(policy)


def live_gpu_cluster(clusters: Sequence[Object]) -> Object | None:
    """The GPUCluster (one per cluster by name; the oldest should there be more). One
    being deleted still counts: its finalizer holds it while claims need its driver."""
    ordered = by_age(clusters)
    return ordered[0] if ordered else None


class Stacks:
    """Which of the two kinds is acted on, from the cache (`served`: whether the operator
    watches GPUClusters at all, i.e. their CRD is installed)."""

    def __init__(self, client: Client, *, served: bool) -> None:
        self.client = client
        self.served = served

    def _policies(self) -> Sequence[Object]:
        return self.client.list(CLUSTER_POLICY)

    def _clusters(self) -> Sequence[Object]:
        return self.client.list(GPU_CLUSTER)

    def gpu_cluster(self) -> Object | None:
        return live_gpu_cluster(self._clusters()) if self.served else None

    def policy_refused_by(self, policy: Object) -> Object | None:
        """The GPUCluster that came before this ClusterPolicy, if one did."""
        cluster = self.gpu_cluster()
        if cluster is None or is_deleting(policy):
            return None
        return cluster if cluster_first(policy, cluster) else None

    def cluster_refused_by(self, cluster: Object) -> Object | None:
        """The active ClusterPolicy that came before this GPUCluster, if one did."""
        policy = active_cluster_policy(self._policies())
        if policy is None:
            return None
        return None if cluster_first(policy, cluster) else policy

    def active_gpu_cluster(self) -> Object | None:
        """The GPUCluster when it is the cluster's stack (no earlier ClusterPolicy)."""
        cluster = self.gpu_cluster()
        if cluster is None or self.cluster_refused_by(cluster) is not None:
            return None
        return cluster

    def active_policy(self) -> Object | None:
        """The active ClusterPolicy when it is the cluster's stack (no earlier GPUCluster)."""
        policy = active_cluster_policy(self._policies())
        if policy is None or self.policy_refused_by(policy) is not None:
            return None
        return policy
