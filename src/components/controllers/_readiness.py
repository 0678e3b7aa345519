"""Operand readiness from the cache: DaemonSets, their pods (as counted by the tally, for
the operands whose pods are cached; the others' not-ready nodes come from `UnreadyNames`)
and ControllerRevisions, and the nodes for a DaemonSet that counts none.

The DaemonSet controller writes a new DaemonSet's first status from its own node cache. When
that cache has not yet seen the label that brings a node in (a kernel pin just moved, the
deploy labels just written), the status says "0 desired, spec observed", which alone reads as
rolled out. The policy then said `ready` ~80 ms after creating a driver DaemonSet, before its
pod existed. So a DaemonSet that counts no node is judged against the nodes our cache says it
must serve, and they count as desired; the controller's recount, when its cache catches up,
brings the next event. Only such a DaemonSet costs a scan of the cached nodes (~1.6 ms at
1,000 nodes, once per paced reconcile): one that counts some has pods the tally judges."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from components.api import daemon_pod_runs_on, template_pod_spec
from components.controllers._constants import CONTROLLER_REVISION, DAEMONSET, NODE
from components.controllers._pod_tally import DaemonSetPodTally
from components.controllers._status import OperandReadiness
from components.kinds import PODS_NOT_CACHED_OF
from components.operands.readiness import daemonset_pods_ready
from reconciler import (
    OWNER_INDEX,
    Client,
    Object,
    generation_of,
    labels_of,
    name_of,
    namespace_of,
    uid_of,
)


def operand_readiness(
    client: Client, pods: DaemonSetPodTally, name: str, daemonsets: Iterable[Object]
) -> OperandReadiness:
    """Ready when every one of `daemonsets` (as rendered, or as cached) is: by the rules of
    `daemonset_ready`, judged on the cached copies; one not cached yet is not ready. An
    operand whose pods are not cached is judged by its DaemonSets' counts, and its nodes
    named by `UnreadyNames`."""
    counted = name not in PODS_NOT_CACHED_OF
    ready = True
    desired = available = 0
    nodes: set[str] = set()
    missing: list[str] = []
    for obj in daemonsets:
        ds = client.get(DAEMONSET, name_of(obj), namespace_of(obj))
        if ds is None:
            ready = False
            missing.append(name_of(obj))
            continue
        uid = uid_of(ds)
        namespace = namespace_of(ds)
        revisions = client.list(CONTROLLER_REVISION, namespace=namespace, index=(OWNER_INDEX, uid))
        ok, not_ready = daemonset_pods_ready(ds, pods.pods_of(uid) if counted else None, revisions)
        uncounted = nodes_to_serve(ds, client.list(NODE)) if ok and _counts_no_node(ds) else []
        ready = ready and ok and not uncounted
        nodes.update(not_ready, uncounted)
        status = ds.get("status") or {}
        desired += int(status.get("desiredNumberScheduled") or 0) or len(uncounted)
        available += int(status.get("numberAvailable") or 0)
    message = f"DaemonSet {', '.join(sorted(missing))} not created yet" if missing else ""
    return OperandReadiness(
        name,
        enabled=True,
        ready=ready,
        nodes_desired=desired,
        nodes_ready=available,
        not_ready_nodes=sorted(nodes),
        message=message,
    )


def _counts_no_node(ds: Object) -> bool:
    status = ds.get("status") or {}
    return (
        int(status.get("observedGeneration") or 0) >= generation_of(ds)
        and int(status.get("desiredNumberScheduled") or 0) == 0
    )


def nodes_to_serve(ds: Object, nodes: Iterable[Object]) -> list[str]:
    """The nodes the DaemonSet controller will want a pod of `ds` on, by our cache."""
    pod_spec = template_pod_spec(ds)
    return [
        name_of(node)
        for node in nodes
        if daemon_pod_runs_on(
            pod_spec, labels_of(node), (node.get("spec") or {}).get("taints") or ()
        )
    ]


def readiness_of(
    operands: Iterable[tuple[str, bool]], judge: Callable[[str], OperandReadiness]
) -> list[OperandReadiness]:
    """Each operand's readiness in order: `judge`'s for an enabled one."""
    return [judge(name) if on else OperandReadiness(name, enabled=False) for name, on in operands]
