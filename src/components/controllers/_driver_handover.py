"""Handing a renamed driver DaemonSet's pods to the DaemonSet that replaces it.

A driver DaemonSet is renamed when the cluster goes from one OS release to several (or
back; the only one of a single-OS cluster is `nvidia-driver-daemonset`, as the
reference names it), and when the operator is upgraded from a version that named it
otherwise. Deleting the old one the usual way would kill the driver on all its nodes at
once. Instead each of its pods is relabelled to match the selector of the desired
DaemonSet that selects its node, and the old DaemonSet is deleted with
`propagationPolicy: Orphan`: the new one adopts the pods, sees them as an older revision,
and the upgrade controller replaces them node by node through its safe walk.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from components.controllers._constants import DAEMONSET, NODE, POD
from components.controllers._daemonset_pods import daemonset_selector, live_pods_of
from components.controllers._selection import selects
from reconciler import Client, Object, name_of, namespace_of

log = logging.getLogger("components.controllers.clusterpolicy")


def _target(node: Object | None, desired: Sequence[Object]) -> Object | None:
    if node is None:
        return None
    for ds in desired:
        if selects(ds, node):
            return ds
    return None


async def hand_over(client: Client, stale: Object, desired: Sequence[Object]) -> bool:
    """Relabel `stale`'s pods for the desired DaemonSets that select their nodes and
    delete `stale` orphaning them; False (nothing done) when it has no pods (the usual
    delete is right) or some pod would have no DaemonSet to go to."""
    uid = str((stale.get("metadata") or {}).get("uid") or "")
    namespace = namespace_of(stale)
    # From the server: the cache holds only pods bound to a node (`SCHEDULED_PODS`), and
    # one still waiting for its node has no DaemonSet to go to, so the hand-over must not
    # happen (orphaned with its old labels, it would start beside the new DaemonSet's pod
    # once bound). A rename is rare; one LIST of its pods is cheap.
    pods = await live_pods_of(client, stale) if uid else []
    nodes = {name_of(n): n for n in client.list(NODE)}
    if not pods:
        return False
    moves: list[tuple[Object, dict[str, str]]] = []
    for pod in pods:
        node = nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        target = _target(node, desired)
        if target is None:
            return False
        moves.append((pod, daemonset_selector(target)))
    for pod, labels in moves:
        await client.patch(POD, name_of(pod), {"metadata": {"labels": labels}}, namespace=namespace)
    await client.delete(
        DAEMONSET,
        name_of(stale),
        namespace=namespace,
        propagation_policy="Orphan",
        uid=uid or None,
        missing_ok=True,
    )
    log.info("replaced driver DaemonSet %s, its %d pods handed over", name_of(stale), len(moves))
    return True
