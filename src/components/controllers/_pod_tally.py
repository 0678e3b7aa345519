"""The operand DaemonSets' pods, counted as they change, for readiness.

Judging readiness by listing each DaemonSet's pods costs one look at every operand pod
per ClusterPolicy reconcile: eight per GPU node, so 40,000 at 5,000 nodes, several times a
second through a rollout (12% of the operator's CPU in a 2,000-node profile). Kept here
instead, from the pods informer's events, each event costs a constant and a judgement costs
what is not ready yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from components.controllers._constants import DAEMONSET
from components.operands.readiness import DaemonSetPods, PodFacts
from reconciler import Informer, Object, name_of, namespace_of, owner_references_of


def _daemonset_owner(obj: Object) -> str | None:
    """The uid of the DaemonSet that controls the pod, if one does."""
    for ref in owner_references_of(obj):
        if ref.get("kind") == DAEMONSET.kind and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


@dataclass(frozen=True, slots=True)
class _Counted:
    """What was counted for one pod, to take it back out when the pod changes or goes."""

    owner: str
    facts: PodFacts


class DaemonSetPodTally:
    """An event handler on the pods informer: per DaemonSet uid, the facts of the pods it
    controls, in one namespace (the operator's, where every operand DaemonSet lives)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._by_owner: dict[str, DaemonSetPods] = {}
        self._counted: dict[str, _Counted] = {}
        """By pod name (one namespace); about 150 bytes a pod, 6 MB at 5,000 nodes."""

    def pods_of(self, uid: str) -> DaemonSetPods:
        """The counts for the DaemonSet with this uid (empty while it has no pod)."""
        return self._by_owner.get(uid) or DaemonSetPods()

    # -- the informer's events -----------------------------------------------------------

    def on_add(self, obj: Object) -> None:
        self._put(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._put(new)

    def on_delete(self, obj: Object) -> None:
        if namespace_of(obj) != self.namespace:
            return
        counted = self._counted.pop(name_of(obj), None)
        if counted is not None:
            self._forget(counted)

    def _put(self, obj: Object) -> None:
        if namespace_of(obj) != self.namespace:
            return
        name = name_of(obj)
        owner = _daemonset_owner(obj)
        counted = _Counted(owner, PodFacts.of(obj)) if owner is not None else None
        old = self._counted.get(name)
        if old == counted:
            return
        if old is not None:
            self._forget(old)
        if counted is None:
            self._counted.pop(name, None)
            return
        self._counted[name] = counted
        self._by_owner.setdefault(counted.owner, DaemonSetPods()).add(counted.facts)

    def _forget(self, counted: _Counted) -> None:
        pods = self._by_owner.get(counted.owner)
        if pods is None:
            return
        pods.remove(counted.facts)
        if pods.pods <= 0:
            del self._by_owner[counted.owner]


_TALLIES: WeakKeyDictionary[Informer, dict[str, DaemonSetPodTally]] = WeakKeyDictionary()


def tally_on(informer: Informer, namespace: str) -> DaemonSetPodTally:
    """The one tally of `informer` (the shared pods informer) for `namespace`, subscribed
    on first use: every controller that judges readiness reads the same counts."""
    tallies = _TALLIES.setdefault(informer, {})
    tally = tallies.get(namespace)
    if tally is None:
        tally = tallies[namespace] = DaemonSetPodTally(namespace)
        informer.add_handler(tally)
    return tally
