"""What the upgrade watches, and which requests each event makes.

Two controllers share one set of informers. The node controller gets a request for each
node an event may move on (a pod on it, its driver DaemonSet or revision, a budget while it
drains, the policy); the pool controller gets its one request when something it counts or
reports changes. Updates that cannot matter (heartbeats, status writes) are filtered out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from components.api import KERNEL_LABEL, UpgradeState
from components.upgrade._model import agent_verdict, gpus_advertised
from components.upgrade._names import (
    CACHED_PODS,
    CLUSTER_POLICY,
    CONTROLLER_REVISION,
    DAEMONSET,
    IN_PROGRESS,
    NODE,
    NODE_ANNOTATIONS,
    NVIDIA_DRIVER,
    PDB,
    POD,
    SCHEDULED_PODS,
    STATE_LABEL,
)
from components.upgrade._node_requests import node_request, nodes_labelled
from components.upgrade._pods import is_driver_pod, pod_as_read
from components.upgrade._reader import (
    DRIVER_POD_INDEX,
    POD_NODE_INDEX,
    ClusterReader,
    pinned_kernel_of,
    pod_node,
    template_labels,
)
from reconciler import (
    OWNER_INDEX,
    Controller,
    Funcs,
    Informer,
    Manager,
    Object,
    Request,
    annotations_of,
    is_deleting,
    label_index_name,
    labels_of,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)

S = UpgradeState

POOL_REQUEST = Request("", "driver-upgrade")
"""The pool controller's one request."""

POD_STATES = frozenset(s.value for s in IN_PROGRESS - {S.CORDON_REQUIRED, S.UNCORDON_REQUIRED})
"""States in which any pod on the node may allow the next step."""


@dataclass(frozen=True, slots=True)
class UpgradeInformers:
    nodes: Informer
    pods: Informer
    daemonsets: Informer
    revisions: Informer
    pdbs: Informer
    cluster_policies: Informer
    nvidia_drivers: Informer

    @classmethod
    def register(cls, manager: Manager, namespace: str) -> UpgradeInformers:
        ns = namespace
        return cls(
            nodes=manager.informer(NODE, index_labels=[STATE_LABEL, KERNEL_LABEL]),
            pods=manager.informer(
                POD,
                field_selector=SCHEDULED_PODS,
                label_selector=CACHED_PODS,
                transform=pod_as_read,
                indexers={
                    POD_NODE_INDEX: pod_node,
                    DRIVER_POD_INDEX: lambda o: (
                        ("driver",) if namespace_of(o) == ns and is_driver_pod(labels_of(o)) else ()
                    ),
                },
            ),
            daemonsets=_scoped_informer(manager, DAEMONSET, ns),
            revisions=_scoped_informer(manager, CONTROLLER_REVISION, ns),
            pdbs=manager.informer(PDB),
            cluster_policies=manager.informer(CLUSTER_POLICY),
            nvidia_drivers=manager.informer(NVIDIA_DRIVER),
        )


class Watches:
    def __init__(self, reader: ClusterReader) -> None:
        self.reader = reader
        self.cache = reader.cache
        self.namespace = reader.namespace

    def connect(self, informers: UpgradeInformers, nc: Controller, pc: Controller) -> None:
        """Watch `informers` from the node controller `nc` and the pool controller `pc`."""
        i = informers
        node_changed = Funcs(update=_node_changed)
        nc.watch(i.nodes, node_request, node_changed, map_old=False)
        nc.watch(i.pods, self._pod_to_node)
        # Not on status writes: a driver DaemonSet's status changes with every pod of it
        # that comes up, and each would re-check every node it runs on (nodes^2 in a rollout);
        # no step reads that status.
        nc.watch(i.daemonsets, self._daemonset_to_nodes, Funcs(update=_spec_or_labels_changed))
        nc.watch(i.revisions, self._revision_to_nodes)
        nc.watch(i.pdbs, self._nodes_in_states(S.DRAIN_REQUIRED, S.UPGRADE_FAILED), map_old=False)
        policy_changed = Funcs(update=_spec_changed)
        nc.watch(i.cluster_policies, lambda o: self._managed_nodes(), policy_changed, map_old=False)
        nc.watch(i.nvidia_drivers, lambda o: self._managed_nodes(), policy_changed, map_old=False)

        pool = lambda o: (POOL_REQUEST,)  # noqa: E731
        pc.watch(i.nodes, pool, node_changed, map_old=False)
        pc.watch(
            i.pods,
            pool,
            Funcs(create=self._is_driver, update=self._driver_moved, delete=self._is_driver),
            map_old=False,
        )
        pc.watch(i.daemonsets, pool, Funcs(update=_spec_or_labels_changed), map_old=False)
        pc.watch(i.cluster_policies, pool, map_old=False)
        pc.watch(i.nvidia_drivers, pool, map_old=False)

    def _is_driver(self, obj: Object) -> bool:
        return namespace_of(obj) == self.namespace and is_driver_pod(labels_of(obj))

    def _driver_moved(self, old: Object, new: Object) -> bool:
        if not (self._is_driver(old) or self._is_driver(new)):
            return False
        return (
            pod_node(old) != pod_node(new)
            or owner_references_of(old) != owner_references_of(new)
            or is_deleting(old) != is_deleting(new)
        )

    def _pod_to_node(self, obj: Object) -> Iterable[Request]:
        node_name = (obj.get("spec") or {}).get("nodeName")
        if not node_name:
            return ()
        name = str(node_name)
        # A validator pod matters to the validation step and to a failed node's recovery,
        # both in POD_STATES below: a node in no upgrade needs none of its events (about two
        # per node in a fresh rollout).
        if namespace_of(obj) == self.namespace and is_driver_pod(labels_of(obj)):
            return (Request("", name),)
        node = self.cache.get(NODE, name)
        if node is not None and labels_of(node).get(STATE_LABEL) in POD_STATES:
            return (Request("", name),)
        return ()

    def _nodes_of_daemonset(self, uid: str) -> list[Request]:
        pods = self.cache.list(POD, index=(OWNER_INDEX, uid)) if uid else []
        return [Request("", n) for p in pods for n in pod_node(p)]

    def _daemonset_to_nodes(self, obj: Object) -> Iterable[Request]:
        if not is_driver_pod(template_labels(obj)):
            return ()
        requests = self._nodes_of_daemonset(uid_of(obj))
        kernel = pinned_kernel_of(obj)
        if kernel is not None:
            # A precompiled driver DaemonSet for a kernel: nodes that run that kernel may
            # now be pinned to it.
            requests.extend(nodes_labelled(self.cache, KERNEL_LABEL, kernel))
        return requests

    def _revision_to_nodes(self, obj: Object) -> Iterable[Request]:
        out: list[Request] = []
        for ref in owner_references_of(obj):
            if ref.get("kind") == "DaemonSet":
                out.extend(self._nodes_of_daemonset(str(ref.get("uid") or "")))
        return out

    def _nodes_in_states(self, *states: UpgradeState) -> Callable[[Object], Iterable[Request]]:
        values = [state.value for state in states]

        def mapping(_obj: Object) -> Iterable[Request]:
            return nodes_labelled(self.cache, STATE_LABEL, *values)

        return mapping

    def _managed_nodes(self) -> Iterable[Request]:
        names = {n for p in self.reader.driver_pods() for n in pod_node(p)}
        index = label_index_name(STATE_LABEL)
        for state in S:
            if state is not S.UNKNOWN:
                names.update(name_of(n) for n in self.cache.list(NODE, index=(index, state.value)))
        return [Request("", n) for n in sorted(names)]


def _ready_condition(obj: Object) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _ours(obj: Object) -> dict[str, str]:
    a = annotations_of(obj)
    return {k: a[k] for k in NODE_ANNOTATIONS if k in a}


def _node_changed(old: Object, new: Object) -> bool:
    """Updates that can matter to the upgrade: labels (state, skip, kernel, NFD, ...), our
    annotations, the cordon, readiness, whether GPUs are offered (a paused device plugin's
    are awaited), the node agent's GPUValidated answer. Heartbeats and image lists are not."""
    return (
        labels_of(old) != labels_of(new)
        or gpus_advertised(old) != gpus_advertised(new)
        or _ours(old) != _ours(new)
        or bool((old.get("spec") or {}).get("unschedulable"))
        != bool((new.get("spec") or {}).get("unschedulable"))
        or _ready_condition(old) != _ready_condition(new)
        or agent_verdict(old.get("status") or {}) != agent_verdict(new.get("status") or {})
    )


def _spec_changed(old: Object, new: Object) -> bool:
    return old.get("spec") != new.get("spec") or is_deleting(old) != is_deleting(new)


def _spec_or_labels_changed(old: Object, new: Object) -> bool:
    return old.get("spec") != new.get("spec") or labels_of(old) != labels_of(new)


def _scoped_informer(manager: Manager, gvk: Any, namespace: str) -> Informer:
    """The informer for `gvk` in `namespace`, or the cluster-wide one if another controller
    registered that already (it covers the namespace too)."""
    try:
        return manager.informer(gvk, namespace=namespace)
    except ValueError:
        informer = manager.cache.informer_for(gvk)
        if informer.namespace not in (None, namespace) or informer.label_selector:
            raise
        return informer
