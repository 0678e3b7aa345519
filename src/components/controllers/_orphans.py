"""Pods of a DaemonSet that was deleted and created again under the same name: those the
garbage collector left behind are deleted, as it would have.

The garbage collector deletes a DaemonSet's pods once it sees the DaemonSet go, and it can
miss that. When the API server and etcd restart, kube-controller-manager's watches resume
from a fresh list; a DaemonSet deleted and created again under its name before that list
(ours is recreated within a second) reads to it as one object changed, not one gone, and
the old DaemonSet's pods are never collected (kube-controller-manager 1.37, single API
server, in `tests/e2e/outage`: old device plugin pods stayed for good). No controller owns
such a pod any more: nothing updates it or takes it off its node, and a device plugin left
so keeps the node offering GPUs through a driver upgrade's pause.

So the operator remembers the uid of each DaemonSet of its namespace that goes (its own
informer's events), and once one of that name is back, lists the pods its selector picks
and deletes those still controlled by the old uid. It forgets the old uid once none is
left to delete (the garbage collector's work included).

A controller of its own, keyed on the DaemonSet's name: the sweep is no step of a policy's
reconcile (it ran in the ClusterPolicy's prune, and only when a policy was reconciled), and
its request comes from the one event that calls for it, a DaemonSet back under a name that
went. Each sweep becomes an Event on the active ClusterPolicy, as the prune's changes do.
"""

from __future__ import annotations

import logging

from components.api import active_cluster_policy
from components.controllers._apply import Change, component_of, controller_owner
from components.controllers._constants import CLUSTER_POLICY, DAEMONSET, POD
from reconciler import (
    NORMAL,
    Controller,
    EventRecorder,
    Informer,
    Manager,
    Object,
    Request,
    Result,
    is_deleting,
    name_of,
    namespace_of,
    uid_of,
)

log = logging.getLogger(__name__)

NAME = "replaced-daemonset-pods"


class ReplacedDaemonSetPods:
    """An event handler on the namespace's DaemonSet informer, and the controller that
    sweeps a replaced DaemonSet's leftover pods."""

    def __init__(self, manager: Manager, namespace: str, recorder: EventRecorder) -> None:
        self.client = manager.client
        self.namespace = namespace
        self.recorder = recorder
        self.manager = manager
        self.controller: Controller | None = None
        self._gone: dict[str, str] = {}
        """Name -> uid of a DaemonSet that went, until its pods are seen to go too."""

    def setup(self, informer: Informer) -> Controller:
        """Sweep on `informer`'s events (the operator's namespace's DaemonSets)."""
        self.controller = self.manager.controller(NAME, self)
        informer.add_handler(self)
        return self.controller

    # -- the informer's events -----------------------------------------------------------

    def on_add(self, obj: Object) -> None:
        self._back(obj)

    def on_update(self, old: Object, new: Object) -> None:
        # A relist after a watch gap reads a replacement as an update.
        if uid_of(old) != uid_of(new):
            self.on_delete(old)
            self._back(new)

    def on_delete(self, obj: Object) -> None:
        if namespace_of(obj) == self.namespace and uid_of(obj):
            self._gone[name_of(obj)] = uid_of(obj)

    def _back(self, obj: Object) -> None:
        if self.controller is not None and name_of(obj) in self._gone:
            self.controller.enqueue(Request(self.namespace, name_of(obj)))

    # -- the sweep -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        changes = await self.delete(request.name)
        if changes:
            await self._report(request.name, changes)
        return None

    async def delete(self, name: str) -> list[Change]:
        """Delete the pods the DaemonSet `name` left when it was replaced, if it was."""
        old = self._gone.get(name)
        if old is None:
            return []
        current = self.client.get(DAEMONSET, name, self.namespace)
        if current is None:
            return []  # not back (yet): its pods are the garbage collector's alone
        if uid_of(current) == old:
            del self._gone[name]
            return []
        left = [p for p in await self._pods(current) if _controlled_by(p, old)]
        changes: list[Change] = []
        for pod in left:
            await self.client.delete(
                POD, name_of(pod), namespace=self.namespace, uid=uid_of(pod), missing_ok=True
            )
            what = f"Pod {self.namespace}/{name_of(pod)} (of the replaced DaemonSet {name})"
            changes.append(Change("deleted", what, component_of(pod)))
        # Every one is deleted or going: none left to delete.
        del self._gone[name]
        return changes

    async def _report(self, name: str, changes: list[Change]) -> None:
        """One INFO line and one Event (on the active ClusterPolicy, else the DaemonSet)
        per operand, naming the pods."""
        grouped: dict[str, list[str]] = {}
        for change in changes:
            log.info("%s", change)
            grouped.setdefault(change.component, []).append(change.what)
        on = active_cluster_policy(self.client.list(CLUSTER_POLICY)) or self.client.get(
            DAEMONSET, name, self.namespace
        )
        if on is None:
            return
        for component, objects in grouped.items():
            await self.recorder.event(
                on, NORMAL, "Deleted", f"deleted {', '.join(objects)} ({component})"
            )

    async def _pods(self, daemonset: Object) -> list[Object]:
        """The pods the DaemonSet's selector picks, read live (operand pods are mostly not
        cached), less those already going."""
        spec = daemonset.get("spec") or {}
        labels = (spec.get("selector") or {}).get("matchLabels") or {}
        if not labels:
            return []
        selector_text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = await self.client.list_live(
            POD, namespace=self.namespace, label_selector=selector_text
        )
        return [p for p in pods if not is_deleting(p)]


def _controlled_by(pod: Object, uid: str) -> bool:
    ref = controller_owner(pod)
    return ref is not None and ref.get("kind") == DAEMONSET.kind and ref.get("uid") == uid
