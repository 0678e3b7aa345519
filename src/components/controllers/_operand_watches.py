"""The watches both stacks' controllers (the ClusterPolicy's and the GPUCluster's) put on
what their operands are made of: the operand DaemonSets' pods and ControllerRevisions
(mapped through their DaemonSet), every object of ours (at once when one is deleted behind
our back, a kind the applier starts to watch later wired as it comes) and a DaemonSet that
has just rolled out (at once). Which stack object an owned object asks for is the
controller's `owner` mapping.
"""

from __future__ import annotations

from collections.abc import Callable

from components.controllers import _informers
from components.controllers._apply import Applier
from components.controllers._constants import DAEMONSET
from components.controllers._filters import (
    DELETED,
    NOT_DELETED,
    POD_CHANGED,
    ROLLOUT_FINISHED,
    in_namespace,
)
from reconciler import (
    Client,
    Controller,
    Informer,
    Manager,
    Object,
    Predicate,
    Request,
    namespace_of,
    owner_references_of,
)

Mapping = Callable[[Object], list[Request]]


def watch_stack_object(
    c: Controller, informer: Informer, mapping: Mapping, *predicates: Predicate
) -> None:
    """A watch of the stack's own objects (a policy, a GPUCluster, what decides between
    them): an event means work to do now (unpaced); its mapping's answer does not move
    with the object's changes (every policy, the deleting clusters), so only the new
    object is mapped."""
    c.watch(informer, mapping, *predicates, unpaced=True, map_old=False)


class OperandWatches:
    """`owner`: the requests an object of ours (or an operand DaemonSet) asks for."""

    def __init__(self, client: Client, namespace: str, owner: Mapping) -> None:
        self.client = client
        self.namespace = namespace
        self.owner = owner

    def watch(self, c: Controller, m: Manager, applier: Applier) -> None:
        c.watch(_informers.pods(m), self.via_daemonset, in_namespace(self.namespace), POD_CHANGED)
        c.watch(_informers.controller_revisions(m, self.namespace), self.via_daemonset)
        for informer in applier.owned_informers:
            self._watch_owned(c, informer)
        applier.on_new_informer(lambda informer: self._watch_owned(c, informer))
        daemonsets = _informers.owned(m, DAEMONSET, self.namespace)
        c.watch(daemonsets, self.owner, ROLLOUT_FINISHED, unpaced=True)

    def _watch_owned(self, c: Controller, informer: Informer) -> None:
        c.watch(informer, self.owner, NOT_DELETED)
        c.watch(informer, self.owner, DELETED, unpaced=True)

    def via_daemonset(self, obj: Object) -> list[Request]:
        """A pod or ControllerRevision: what owns its DaemonSet."""
        out: list[Request] = []
        for ref in owner_references_of(obj):
            if ref.get("kind") != DAEMONSET.kind:
                continue
            ds = self.client.get(DAEMONSET, str(ref.get("name")), namespace_of(obj))
            if ds is not None:
                out += self.owner(ds)
        return out
