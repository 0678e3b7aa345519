"""Which kernel a driver pod was loaded for, learnt when the node's kernel changes under it.

A driver pod built for one kernel must be replaced (through the walk) when its node runs
another. Until now the walk wrote the node's kernel on every driver pod the first time it
saw it ready: a pod PATCH per GPU node in every rollout, with a pod event to every watcher
and a sync of the DaemonSet by its controller (at 100 nodes, about 7% of the rollout's
time on a saturated control plane), for a fact needed only when the kernel changes.

Now the fact is taken from the change itself: when NFD's kernel label of a node changes,
every driver pod already on the node whose kernel is not known otherwise (no record, no
kernel in its node selector) was loaded for the value the label had before. The node's
reconcile then sees the mismatch and writes the record on the pod (`step.record_kernel`)
with the transition that starts the walk, so from there a restart of the operator resumes
from what the cluster stores. What this gives up: a kernel label that changes while the
operator is not running, under a driver that does not restart, goes unnoticed; a kernel
changes only with a reboot, which restarts the driver container, so that is a label moved
by hand.
"""

from __future__ import annotations

from components.api import KERNEL_LABEL
from components.upgrade._names import POD
from components.upgrade._pods import is_driver_pod, pod_view
from components.upgrade._reader import POD_NODE_INDEX
from reconciler import Cache, Object, labels_of, name_of, namespace_of


class LoadedKernels:
    """An informer handler for nodes: per driver pod (by UID), the kernel it was loaded
    for, for pods whose node's kernel label changed since they came. An entry goes once the
    cached pod carries the record, or when the walk deletes the pod."""

    def __init__(self, cache: Cache, namespace: str) -> None:
        self.cache = cache
        self.namespace = namespace
        self._by_pod: dict[str, str] = {}

    def kernel(self, pod_uid: str) -> str | None:
        return self._by_pod.get(pod_uid)

    def forget(self, pod_uid: str) -> None:
        """Its record is on the pod now, or the pod is gone."""
        self._by_pod.pop(pod_uid, None)

    # -- node events ---------------------------------------------------------------------

    def on_add(self, obj: Object) -> None:
        pass

    def on_delete(self, obj: Object) -> None:
        pass

    def on_update(self, old: Object, new: Object) -> None:
        before = labels_of(old).get(KERNEL_LABEL)
        if not before or before == labels_of(new).get(KERNEL_LABEL):
            return
        for pod in self.cache.list(POD, index=(POD_NODE_INDEX, name_of(new))):
            if namespace_of(pod) != self.namespace or not is_driver_pod(labels_of(pod)):
                continue
            view = pod_view(pod)
            if view.kernel is None and view.uid:
                # The first change counts: a label that moves on and back leaves it in sync.
                self._by_pod.setdefault(view.uid, before)
