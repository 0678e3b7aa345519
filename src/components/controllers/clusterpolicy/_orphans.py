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
and deletes those still controlled by the old uid. It forgets the old uid after a list
that finds none left to delete (the garbage collector's work included).
"""

from __future__ import annotations

import logging

from components.controllers._apply import Change, component_of, controller_owner
from components.controllers._constants import DAEMONSET, POD
from reconciler import Client, Object, is_deleting, name_of, namespace_of, uid_of

log = logging.getLogger(__name__)


class ReplacedDaemonSetPods:
    """An event handler on the namespace's DaemonSet informer, and the sweep the policy's
    prune runs."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._gone: dict[str, str] = {}
        """Name -> uid of a DaemonSet that went, until its pods are seen to go too."""

    # -- the informer's events -----------------------------------------------------------

    def on_add(self, obj: Object) -> None:
        pass

    def on_update(self, old: Object, new: Object) -> None:
        # A relist after a watch gap reads a replacement as an update.
        if uid_of(old) != uid_of(new):
            self.on_delete(old)

    def on_delete(self, obj: Object) -> None:
        if namespace_of(obj) == self.namespace and uid_of(obj):
            self._gone[name_of(obj)] = uid_of(obj)

    # -- the sweep -----------------------------------------------------------------------

    async def delete(self) -> list[Change]:
        """Delete the pods of each replaced DaemonSet that are still there."""
        changes: list[Change] = []
        for name, old in list(self._gone.items()):
            current = self.client.get(DAEMONSET, name, self.namespace)
            if current is None:
                continue  # not back (yet): its pods are the garbage collector's alone
            if uid_of(current) == old:
                del self._gone[name]
                continue
            left = [p for p in await self._pods(current) if _controlled_by(p, old)]
            if not left:
                del self._gone[name]
            for pod in left:
                await self.client.delete(
                    POD, name_of(pod), namespace=self.namespace, uid=uid_of(pod), missing_ok=True
                )
                what = f"Pod {self.namespace}/{name_of(pod)} (of the replaced DaemonSet {name})"
                changes.append(Change("deleted", what, component_of(pod)))
        return changes

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
