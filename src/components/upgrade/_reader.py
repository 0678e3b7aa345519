"""What the upgrade reads of the cluster, from the cache: pools, driver DaemonSets, views.

A pool is the nodes one upgrade policy governs: the ClusterPolicy's (the active one, by
`components.api.active_cluster_policy`), or one NVIDIADriver's. A node belongs to the pool
of the DaemonSet that owns its driver pod; a node mid-restart, without one, to the pool of
the DaemonSet that will put one there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    NVIDIA_DRIVER_OWNER_LABEL,
    DriverUpgradePolicySpec,
    NVIDIADriverUpgradePolicySpec,
    active_cluster_policy,
    node_agent_enabled,
    pod_spec_targets,
    template_pod_spec,
)
from components.upgrade._model import NodeView, newest_revision, node_view
from components.upgrade._names import (
    CLUSTER_POLICY,
    CONTROLLER_REVISION,
    DAEMONSET,
    IN_PROGRESS,
    NODE,
    NVIDIA_DRIVER,
    POD,
    STATE_LABEL,
)
from components.upgrade._pods import PodView, is_driver_pod, pick_driver_pod, pod_view
from reconciler import (
    OWNER_INDEX,
    Cache,
    Object,
    generation_of,
    is_deleting,
    label_index_name,
    labels_of,
    name_of,
    resource_version_of,
    uid_of,
)

log = logging.getLogger("components.upgrade")

POD_NODE_INDEX = "upgrade:node"
DRIVER_POD_INDEX = "upgrade:driver"

PoolKey = tuple[str, str]
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class Pool:
    """The nodes one upgrade policy governs: the ClusterPolicy's, or one NVIDIADriver's."""

    kind: str
    name: str
    obj: Object
    policy: DriverUpgradePolicySpec
    enabled: bool
    precompiled: bool = False
    """The policy wants precompiled drivers (`usePrecompiled`)."""
    agent: bool = False
    """The active ClusterPolicy runs the node agent (`nodeAgent.enabled`)."""

    @property
    def key(self) -> PoolKey:
        return (self.kind, self.name)


class Views:
    """Views of cached objects, kept while the object is unchanged (same uid and
    resourceVersion): a reconcile reads the same pods and nodes many times over."""

    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit
        self._pods: dict[tuple[str, str], PodView] = {}
        self._nodes: dict[tuple[str, str], NodeView] = {}

    def pod(self, obj: Object) -> PodView:
        key = (uid_of(obj) or name_of(obj), resource_version_of(obj))
        return self._kept(self._pods, key, obj, pod_view)

    def node(self, obj: Object) -> NodeView:
        return self._kept(self._nodes, (name_of(obj), resource_version_of(obj)), obj, node_view)

    def _kept(
        self,
        views: dict[tuple[str, str], _V],
        key: tuple[str, str],
        obj: Object,
        view_of: Callable[[Object], _V],
    ) -> _V:
        """The view kept under `key`, or a new one (all dropped past `limit`)."""
        view = views.get(key)
        if view is None:
            if len(views) >= self._limit:
                views.clear()
            view = views[key] = view_of(obj)
        return view


def pod_node(obj: Object) -> Iterable[str]:
    """The node a pod is bound to (nothing while it is pending)."""
    node = (obj.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


def template_labels(ds: Object) -> dict[str, str]:
    return labels_of((ds.get("spec") or {}).get("template") or {})


def pinned_kernel_of(ds: Object) -> str | None:
    """The kernel a precompiled driver DaemonSet serves (what it selects the pin on)."""
    kernel = (template_pod_spec(ds).get("nodeSelector") or {}).get(DRIVER_KERNEL_PIN_LABEL)
    return str(kernel) if kernel is not None else None


class ClusterReader:
    """Reads pools, driver pods and DaemonSets from the cache (never from the server)."""

    def __init__(self, cache: Cache, namespace: str) -> None:
        self.cache = cache
        self.namespace = namespace
        self.views = Views()
        self._policies: dict[tuple[str, str, str], tuple[DriverUpgradePolicySpec, bool]] = {}
        self._cluster_policy_pool: tuple[tuple[str, str], Pool | None] | None = None

    def driver_pods(self) -> list[Object]:
        return self.cache.list(POD, index=(DRIVER_POD_INDEX, "driver"))

    def _parse(
        self, kind: str, obj: Object, raw: Any, model: type[DriverUpgradePolicySpec]
    ) -> tuple[DriverUpgradePolicySpec, bool]:
        # The spec's generation, not the resourceVersion: status writes do not change it.
        key = (kind, uid_of(obj) or name_of(obj), str(generation_of(obj) or ""))
        found = self._policies.get(key)
        if found is None:
            try:
                found = (model.from_dict(raw if isinstance(raw, dict) else {}), True)
            except pydantic.ValidationError as exc:
                log.warning(
                    "%s %s: invalid driver upgradePolicy, upgrades paused: %s",
                    kind,
                    name_of(obj),
                    exc,
                )
                found = (model(), False)
            if len(self._policies) > 64:
                self._policies.clear()
            self._policies[key] = found
        return found

    def pool_for_daemonset(self, ds: Object | None) -> Pool | None:
        """The pool a driver DaemonSet belongs to: its NVIDIADriver's, or the ClusterPolicy's."""
        if ds is None:
            return None
        owner = labels_of(ds).get(NVIDIA_DRIVER_OWNER_LABEL)
        return self.nvidia_driver_pool(owner) if owner else self.cluster_policy_pool()

    def nvidia_driver_pool(self, name: str) -> Pool | None:
        nvd = self.cache.get(NVIDIA_DRIVER, name)
        if nvd is None or is_deleting(nvd):
            return None
        raw = (nvd.get("spec") or {}).get("upgradePolicy")
        policy, valid = self._parse("NVIDIADriver", nvd, raw, NVIDIADriverUpgradePolicySpec)
        precompiled = (nvd.get("spec") or {}).get("usePrecompiled") is True
        return Pool(
            "NVIDIADriver",
            name,
            nvd,
            policy,
            valid and policy.auto_upgrade,
            precompiled,
            agent=node_agent_enabled(active_cluster_policy(self.cache.list(CLUSTER_POLICY))),
        )

    def cluster_policy_pool(self) -> Pool | None:
        cp = active_cluster_policy(self.cache.list(CLUSTER_POLICY))
        if cp is None:
            return None
        # Every node reconcile asks: the pool is built once per version of the policy.
        version = (uid_of(cp) or name_of(cp), resource_version_of(cp))
        if self._cluster_policy_pool is not None and self._cluster_policy_pool[0] == version:
            return self._cluster_policy_pool[1]
        pool = self._build_cluster_policy_pool(cp)
        self._cluster_policy_pool = (version, pool) if version[1] else None
        return pool

    def _build_cluster_policy_pool(self, cp: Object) -> Pool | None:
        spec = cp.get("spec") or {}
        driver = spec.get("driver") or {}
        if driver.get("useNvidiaDriverCRD") is True:
            return None  # the NVIDIADriver resources govern the drivers
        raw = driver.get("upgradePolicy")
        policy, valid = self._parse("ClusterPolicy", cp, raw, DriverUpgradePolicySpec)
        enabled = (
            valid
            and raw is not None
            and policy.auto_upgrade
            and driver.get("enabled") is not False
            # The reference turns upgrades off for sandbox (VM) workloads.
            and (spec.get("sandboxWorkloads") or {}).get("enabled") is not True
        )
        precompiled = driver.get("usePrecompiled") is True
        return Pool(
            "ClusterPolicy",
            name_of(cp),
            cp,
            policy,
            enabled,
            precompiled,
            agent=node_agent_enabled(cp),
        )

    def owner_daemonset(self, pod: PodView) -> Object | None:
        if pod.owner_kind != "DaemonSet":
            return None
        ds = self.cache.get(DAEMONSET, pod.owner_name, pod.namespace)
        if ds is None or uid_of(ds) != pod.owner_uid:
            return None
        return ds

    def targeting_daemonset(self, node: Object) -> Object | None:
        """For a node without a driver pod (mid-restart): the driver DaemonSet that will put
        one there; failing that, one that would with the pin moved (a node not pinned yet,
        or pinned while precompiled drivers were turned off)."""
        labels = labels_of(node)
        unpinned = {k: v for k, v in labels.items() if k != DRIVER_KERNEL_PIN_LABEL}
        candidates = [labels, unpinned]
        kernel = labels.get(KERNEL_LABEL)
        if kernel:
            candidates.insert(1, {**unpinned, DRIVER_KERNEL_PIN_LABEL: kernel})
        daemonsets = [
            ds
            for ds in sorted(self.cache.list(DAEMONSET, namespace=self.namespace), key=name_of)
            if is_driver_pod(template_labels(ds))
        ]
        for candidate in candidates:
            for ds in daemonsets:
                if pod_spec_targets(template_pod_spec(ds), candidate):
                    return ds
        return None

    def target_revision(self, ds: Object | None) -> str | None:
        if ds is None:
            return None
        uid = uid_of(ds)
        revisions = self.cache.list(CONTROLLER_REVISION, index=(OWNER_INDEX, uid))
        return newest_revision(name_of(ds), revisions)

    def members(self) -> tuple[dict[PoolKey, Pool], dict[PoolKey, dict[str, NodeView]]]:
        """Every pool, and the nodes in each (by name)."""
        pools: dict[PoolKey, Pool] = {}
        members: dict[PoolKey, dict[str, NodeView]] = {}
        ds_pools: dict[str, Pool | None] = {}

        def pool_of(ds: Object | None) -> Pool | None:
            if ds is None:
                return None
            uid = uid_of(ds)
            if uid not in ds_pools:
                ds_pools[uid] = self.pool_for_daemonset(ds)
            return ds_pools[uid]

        # Every policy is a pool, even with no nodes yet (its status and metrics say so).
        for p in [
            self.cluster_policy_pool(),
            *(self.nvidia_driver_pool(name_of(o)) for o in self.cache.list(NVIDIA_DRIVER)),
        ]:
            if p is not None:
                pools[p.key] = p

        assigned: set[str] = set()
        by_node: dict[str, list[PodView]] = {}
        for raw in self.driver_pods():
            pv = self.views.pod(raw)
            if pv.node:
                by_node.setdefault(pv.node, []).append(pv)
        for node_name, candidates in by_node.items():
            driver = pick_driver_pod(candidates)
            if driver is None:
                continue
            pool = pool_of(self.owner_daemonset(driver))
            node = self.cache.get(NODE, node_name)
            if pool is None or node is None:
                continue
            pools.setdefault(pool.key, pool)
            members.setdefault(pool.key, {})[node_name] = self.views.node(node)
            assigned.add(node_name)
        # Nodes in the middle of a walk without a driver pod (it is being replaced) still
        # count: they are cordoned and in progress.
        index = label_index_name(STATE_LABEL)
        for state in IN_PROGRESS:
            for node in self.cache.list(NODE, index=(index, state.value)):
                name = name_of(node)
                if name in assigned:
                    continue
                pool = pool_of(self.targeting_daemonset(node))
                if pool is None:
                    pool = next(iter(pools.values()), None)
                if pool is None:
                    continue
                members.setdefault(pool.key, {})[name] = self.views.node(node)
                assigned.add(name)
        return pools, members
