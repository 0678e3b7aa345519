"""Handing a renamed driver DaemonSet's pods to the DaemonSet that replaces it.

A driver DaemonSet is renamed when the cluster goes from one OS release to several (or
back; the only one of a single-OS cluster is `nvidia-driver-daemonset`, as the
reference names it), and when the operator is upgraded from a version that named it
otherwise. Deleting the old one the usual way would kill the driver on all its nodes at
once. Instead each of its pods is relabelled to match the selector of the desired
DaemonSet that selects its node, and the old DaemonSet is deleted with
`propagationPolicy: Orphan`: the new one adopts the pods and, with them, the old one's
ControllerRevisions (orphaned alike, and matching its selector). Where the two templates
are the same (the cluster's OS mix changed) the pods are then of the new DaemonSet's
current revision and nothing restarts, auto upgrade on or off. Where they differ (an
operator upgrade that also changed the template) they are an older revision, like pods
after any driver change: the upgrade walk replaces them node by node, or with auto
upgrade off they stay until an admin deletes them.

A pod on a node the old DaemonSet no longer selects is not handed over: the DaemonSet
controller is already removing it (the node's kernel pin moved, as it does at once for
every node when precompiled drivers are switched on with auto upgrade off). Handed over,
it was adopted as an older revision that, with auto upgrade off, nothing ever replaces:
the policy said the driver was not ready on that node for good. The old DaemonSet waits
until such pods are gone.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence

from components.controllers._constants import DAEMONSET, NODE, POD
from components.controllers._daemonset_pods import daemonset_selector, live_pods_of
from components.controllers._selection import selects
from reconciler import Client, Object, is_deleting, name_of, namespace_of, uid_of
from reconciler.errors import NotFound

log = logging.getLogger("components.controllers.clusterpolicy")


class HandOver(enum.Enum):
    """What became of an undesired driver DaemonSet."""

    HANDED = "handed"
    """Its pods relabelled for the desired DaemonSets, and it deleted orphaning them."""
    NONE = "none"
    """Nothing done: it has no pod, or one would have no DaemonSet to go to; the usual
    delete is right."""
    WAIT = "wait"
    """Nothing done yet: some of its pods are on nodes it no longer selects, on their way
    out; it must stay until they are gone."""


def _target(node: Object | None, desired: Sequence[Object]) -> Object | None:
    if node is None:
        return None
    for ds in desired:
        if selects(ds, node):
            return ds
    return None


async def hand_over(client: Client, stale: Object, desired: Sequence[Object]) -> HandOver:
    """Relabel `stale`'s pods for the desired DaemonSets that select their nodes and
    delete `stale` orphaning them (`HandOver` says when it does not)."""
    uid = uid_of(stale)
    namespace = namespace_of(stale)
    # From the server: the cache holds only pods bound to a node (`SCHEDULED_PODS`), and
    # one still waiting for its node has no DaemonSet to go to, so the hand-over must not
    # happen (orphaned with its old labels, it would start beside the new DaemonSet's pod
    # once bound). A rename is rare; one LIST of its pods is cheap.
    pods = await live_pods_of(client, stale) if uid else []
    pods = [p for p in pods if not is_deleting(p)]
    if not pods:
        return HandOver.NONE
    nodes = {name_of(n): n for n in client.list(NODE)}
    moves: list[tuple[Object, dict[str, str]]] = []
    leaving: list[str] = []
    for pod in pods:
        node = nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if node is not None and not selects(stale, node):
            leaving.append(name_of(pod))
            continue
        target = _target(node, desired)
        if target is None:
            return HandOver.NONE
        moves.append((pod, daemonset_selector(target)))
    if leaving:
        log.debug(
            "keeping %s until its pods on nodes it no longer selects are gone: %s",
            name_of(stale),
            sorted(leaving),
        )
        return HandOver.WAIT
    for pod, labels in moves:
        try:
            await client.patch(
                POD, name_of(pod), {"metadata": {"labels": labels}}, namespace=namespace
            )
        except NotFound:
            continue  # gone since the LIST: nothing left to hand over on its node
    await client.delete(
        DAEMONSET,
        name_of(stale),
        namespace=namespace,
        propagation_policy="Orphan",
        uid=uid or None,
        missing_ok=True,
    )
    log.info("replaced driver DaemonSet %s, its %d pods handed over", name_of(stale), len(moves))
    return HandOver.HANDED
