"""Which GPUCluster an event asks to reconcile. The mappings only read the cache and
return requests.

A GPUCluster's own spec, its deletion and its finalizer; a ClusterPolicy coming or going
(which one is refused may change); a ResourceClaim's allocation changing while a
GPUCluster waits on its deletion; nodes (GPU nodes joining, their labels); the operand
DaemonSets' pods and ControllerRevisions; and every object it owns.
"""

from __future__ import annotations

from components.controllers import _informers
from components.controllers._apply import Applier, controller_owner
from components.controllers._constants import DAEMONSET, GPU_CLUSTER
from components.controllers._filters import (
    DELETED,
    NODE_CHANGED,
    NOT_DELETED,
    POD_CHANGED,
    ROLLOUT_FINISHED,
    in_namespace,
)
from components.controllers.gpucluster._claims import on_gpus
from reconciler import (
    Client,
    Controller,
    Funcs,
    GenerationChanged,
    Informer,
    Manager,
    Object,
    Or,
    Request,
    is_deleting,
    metadata_of,
    name_of,
    namespace_of,
    owner_references_of,
)


def _deletion_or_finalizers(old: Object, new: Object) -> bool:
    return is_deleting(old) != is_deleting(new) or metadata_of(old).get(
        "finalizers"
    ) != metadata_of(new).get("finalizers")


def _allocation_changed(old: Object, new: Object) -> bool:
    return on_gpus(old) != on_gpus(new)


class ClusterEvents:
    """The GPUCluster controller's watches and the mappings behind them."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def watch(self, c: Controller, m: Manager, applier: Applier) -> None:
        clusters = _informers.gpu_clusters(m)
        c.watch(
            clusters,
            self.all_clusters,
            Or(GenerationChanged(), Funcs(update=_deletion_or_finalizers)),
            unpaced=True,
            map_old=False,
        )
        c.watch(_informers.cluster_policies(m), self.all_clusters, unpaced=True, map_old=False)
        c.watch(
            _informers.resource_claims(m),
            self.deleting_clusters,
            Funcs(update=_allocation_changed),
            unpaced=True,
            map_old=False,
        )
        c.watch(_informers.service_monitor_crd(m), self.all_clusters, map_old=False)
        c.watch(_informers.nodes(m), self.all_clusters, NODE_CHANGED, map_old=False)
        c.watch(_informers.pods(m), self._via_daemonset, in_namespace(self.namespace), POD_CHANGED)
        c.watch(_informers.controller_revisions(m, self.namespace), self._via_daemonset)
        for informer in applier.owned_informers:
            self._watch_owned(c, informer)
        applier.on_new_informer(lambda informer: self._watch_owned(c, informer))
        daemonsets = _informers.owned(m, DAEMONSET, self.namespace)
        c.watch(daemonsets, self._owner, ROLLOUT_FINISHED, unpaced=True)

    def _watch_owned(self, c: Controller, informer: Informer) -> None:
        c.watch(informer, self._owner, NOT_DELETED)
        c.watch(informer, self._owner, DELETED, unpaced=True)

    def all_clusters(self, obj: Object | None = None) -> list[Request]:
        names = {name_of(g) for g in self.client.list(GPU_CLUSTER)}
        if obj is not None and obj.get("kind") == GPU_CLUSTER.kind:
            names.add(name_of(obj))
        return [Request("", n) for n in sorted(names)]

    def deleting_clusters(self, _: Object) -> list[Request]:
        return [Request("", name_of(g)) for g in self.client.list(GPU_CLUSTER) if is_deleting(g)]

    def _owner(self, obj: Object) -> list[Request]:
        ref = controller_owner(obj)
        if ref is None or ref.get("kind") != GPU_CLUSTER.kind:
            return []
        return [Request("", str(ref.get("name")))]

    def _via_daemonset(self, obj: Object) -> list[Request]:
        out: list[Request] = []
        for ref in owner_references_of(obj):
            if ref.get("kind") != DAEMONSET.kind:
                continue
            ds = self.client.get(DAEMONSET, str(ref.get("name")), namespace_of(obj))
            if ds is not None:
                out += self._owner(ds)
        return out
