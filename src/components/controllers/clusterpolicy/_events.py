"""Which ClusterPolicy an event asks to reconcile, and whether that waits for its turn.

The policy's reconciles are paced (`PACE_*` in `_controller`): a rollout brings
thousands of pod, node and DaemonSet events that only report progress, and they collapse
into a reconcile every few seconds. Events that mean work to do now skip that turn: an
admin's edit of a policy (or the ServiceMonitor CRD appearing), any change of a ConfigMap
in the operator's namespace (a device-plugin config, a driver's files), an object of ours
deleted behind our back, a DaemonSet that has just rolled out, and the node that brought
the last labels new DaemonSets were held back for (`LabelWait`).

The mappings only read (the cache, the `LabelWait` the reconcile keeps) and return
requests: what is enqueued, and whether at once, is the watch's to say.
"""

from __future__ import annotations

from components.api import active_cluster_policy
from components.controllers import _informers
from components.controllers._apply import Applier, controller_owner
from components.controllers._constants import CLUSTER_POLICY, NODE
from components.controllers._filters import NODE_CHANGED, POLICY_CHANGED
from components.controllers._label_wait import LabelWait
from components.controllers._operand_watches import OperandWatches, watch_stack_object
from components.controllers._policies import STACK_CHANGED
from reconciler import (
    Client,
    Controller,
    Manager,
    Object,
    Request,
    name_of,
)


class PolicyEvents:
    """The ClusterPolicy controller's watches and the mappings behind them."""

    def __init__(self, client: Client, namespace: str, label_wait: LabelWait) -> None:
        self.client = client
        self.namespace = namespace
        self.label_wait = label_wait
        self.operand_watches = OperandWatches(client, namespace, self._owner_policy)

    def watch_gpu_clusters(self, c: Controller, manager: Manager) -> None:
        """A GPUCluster coming, going or settled may refuse or free the policy."""
        watch_stack_object(c, _informers.gpu_clusters(manager), self.all_policies, STACK_CHANGED)

    def watch(self, c: Controller, manager: Manager, applier: Applier) -> None:
        """Wire every watch of `c`, the policy's controller; owned kinds that `applier`
        starts to watch later (a CRD installed) are wired as they come."""
        m = manager
        watch_stack_object(c, _informers.cluster_policies(m), self.all_policies, POLICY_CHANGED)
        watch_stack_object(c, _informers.service_monitor_crd(m), self.all_policies)
        c.watch(
            _informers.config_maps(m, self.namespace),
            self.active_policy,
            unpaced=True,
            map_old=False,
        )
        nodes = _informers.nodes(m)
        c.watch(nodes, self.active_policy, NODE_CHANGED, map_old=False)
        c.watch(nodes, self._labels_landed, NODE_CHANGED, unpaced=True, map_old=False)
        self.operand_watches.watch(c, m, applier)

    def all_policies(self, obj: Object) -> list[Request]:
        """Every ClusterPolicy (one coming or going may change which is active), and the
        one the event is about, gone from the cache when deleted."""
        names = {name_of(p) for p in self.client.list(CLUSTER_POLICY)}
        if obj.get("kind") == CLUSTER_POLICY.kind:
            names.add(name_of(obj))
        return [Request("", n) for n in sorted(names)]

    def active_policy(self, _: Object | None = None) -> list[Request]:
        active = active_cluster_policy(self.client.list(CLUSTER_POLICY))
        return [Request("", name_of(active))] if active is not None else []

    def _labels_landed(self, node: Object) -> list[Request]:
        """The active policy, at once, when the node brought the last labels its new
        DaemonSets waited for (`LabelWait`), or was the last of them and went."""
        if not self.label_wait.landed(node, lambda name: self.client.get(NODE, name)):
            return []
        return self.active_policy(node)

    def _owner_policy(self, obj: Object) -> list[Request]:
        ref = controller_owner(obj)
        if ref is None:
            return []
        if ref.get("kind") == CLUSTER_POLICY.kind:
            return [Request("", str(ref.get("name")))]
        return self.active_policy(obj)  # e.g. a driver DaemonSet of an NVIDIADriver
