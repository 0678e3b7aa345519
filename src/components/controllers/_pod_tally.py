"""The operand DaemonSets' pods, counted as they change, for readiness.

Judging readiness by listing each DaemonSet's pods costs one look at every operand pod
per ClusterPolicy reconcile: eight per GPU node, so 40,000 at 5,000 nodes, several times a
second through a rollout (12% of the operator's CPU in a 2,000-node profile). Kept here
instead, from the pods informer's events, each event costs a constant and a judgement costs
what is not ready yet.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from components.controllers._constants import DAEMONSET
from components.operands.readiness import DaemonSetPods, PodFacts
from reconciler import Informer, Object, name_of, namespace_of


def _daemonset_owners(obj: Object) -> tuple[str, ...]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return tuple(
        str(ref["uid"]) for ref in refs if ref.get("kind") == DAEMONSET.kind and ref.get("uid")
    )


class DaemonSetPodTally:
    """An event handler on the pods informer: per DaemonSet uid, its pods' facts, for the
    pods of one namespace (the operator's, where every operand DaemonSet lives)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._by_owner: dict[str, DaemonSetPods] = {}
        self._facts: dict[str, tuple[tuple[str, ...], PodFacts]] = {}
        """By pod name (one namespace): the owners and facts last counted."""

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
        entry = self._facts.pop(name_of(obj), None)
        if entry is not None:
            self._forget(entry)

    def _put(self, obj: Object) -> None:
        if namespace_of(obj) != self.namespace:
            return
        key = name_of(obj)
        owners = _daemonset_owners(obj)
        entry = (owners, PodFacts.of(obj)) if owners else None
        old = self._facts.get(key)
        if old == entry:
            return
        if old is not None:
            self._forget(old)
        if entry is None:
            self._facts.pop(key, None)
            return
        self._facts[key] = entry
        for uid in owners:
            self._by_owner.setdefault(uid, DaemonSetPods()).add(entry[1])

    def _forget(self, entry: tuple[tuple[str, ...], PodFacts]) -> None:
        owners, facts = entry
        for uid in owners:
            pods = self._by_owner.get(uid)
            if pods is None:
                continue
            pods.remove(facts)
            if pods.pods <= 0:
                del self._by_owner[uid]


_TALLIES: WeakKeyDictionary[Informer, DaemonSetPodTally] = WeakKeyDictionary()


def tally_on(informer: Informer, namespace: str) -> DaemonSetPodTally:
    """The one tally of `informer` (the shared pods informer) for `namespace`, subscribed
    on first use: every controller that judges readiness reads the same counts."""
    tally = _TALLIES.get(informer)
    if tally is None or tally.namespace != namespace:
        tally = DaemonSetPodTally(namespace)
        informer.add_handler(tally)
        _TALLIES[informer] = tally
    return tally
