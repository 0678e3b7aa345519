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
from components.controllers._constants import GPU_CLUSTER, NODE
from components.controllers._filters import NODE_CHANGED
from components.controllers._label_wait import LabelWait
from components.controllers._operand_watches import OperandWatches, watch_stack_object
from components.controllers.gpucluster._claims import on_gpus
from reconciler import (
    Client,
    Controller,
    Funcs,
    GenerationChanged,
    Manager,
    Object,
    Or,
    Request,
    is_deleting,
    metadata_of,
    name_of,
)


def _deletion_or_finalizers(old: Object, new: Object) -> bool:
    return is_deleting(old) != is_deleting(new) or metadata_of(old).get(
        "finalizers"
    ) != metadata_of(new).get("finalizers")


def _allocation_changed(old: Object, new: Object) -> bool:
    return on_gpus(old) != on_gpus(new)


class ClusterEvents:
    """The GPUCluster controller's watches and the mappings behind them."""

    def __init__(self, client: Client, namespace: str, label_wait: LabelWait) -> None:
        self.client = client
        self.namespace = namespace
        self.label_wait = label_wait
        self.operand_watches = OperandWatches(client, namespace, self._owner)

    def watch(self, c: Controller, m: Manager, applier: Applier) -> None:
        clusters = _informers.gpu_clusters(m)
        changed = Or(GenerationChanged(), Funcs(update=_deletion_or_finalizers))
        watch_stack_object(c, clusters, self.all_clusters, changed)
        watch_stack_object(c, _informers.cluster_policies(m), self.all_clusters)
        claims = _informers.resource_claims(m)
        watch_stack_object(c, claims, self.deleting_clusters, Funcs(update=_allocation_changed))
        c.watch(_informers.service_monitor_crd(m), self.all_clusters, map_old=False)
        nodes = _informers.nodes(m)
        c.watch(nodes, self.all_clusters, NODE_CHANGED, map_old=False)
        c.watch(nodes, self._labels_landed, NODE_CHANGED, unpaced=True, map_old=False)
        self.operand_watches.watch(c, m, applier)

    def all_clusters(self, obj: Object | None = None) -> list[Request]:
        names = {name_of(g) for g in self.client.list(GPU_CLUSTER)}
        if obj is not None and obj.get("kind") == GPU_CLUSTER.kind:
            names.add(name_of(obj))
        return [Request("", n) for n in sorted(names)]

    def _labels_landed(self, node: Object) -> list[Request]:
        """Every GPUCluster, at once, when the node brought the last labels its new
        DaemonSets waited for (`LabelWait`), or was the last of them and went."""
        if not self.label_wait.landed(node, lambda name: self.client.get(NODE, name)):
            return []
        return self.all_clusters()

    def deleting_clusters(self, _: Object) -> list[Request]:
        return [Request("", name_of(g)) for g in self.client.list(GPU_CLUSTER) if is_deleting(g)]

    def _owner(self, obj: Object) -> list[Request]:
        ref = controller_owner(obj)
        if ref is None or ref.get("kind") != GPU_CLUSTER.kind:
            return []
        return [Request("", str(ref.get("name")))]
