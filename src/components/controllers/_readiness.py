"""Operand readiness from the cache: DaemonSets, their pods (as counted by the tally) and
ControllerRevisions."""

from __future__ import annotations

from collections.abc import Iterable

from components.controllers._constants import CONTROLLER_REVISION, DAEMONSET
from components.controllers._pod_tally import DaemonSetPodTally
from components.controllers._status import OperandReadiness
from components.operands.readiness import daemonset_pods_ready
from reconciler import OWNER_INDEX, Client, Object, name_of, namespace_of


def operand_readiness(
    client: Client, pods: DaemonSetPodTally, name: str, daemonsets: Iterable[Object]
) -> OperandReadiness:
    """Ready when every one of `daemonsets` (as rendered, or as cached) is: by the rules of
    `daemonset_ready`, judged on the cached copies; one not cached yet is not ready."""
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
        uid = str(ds["metadata"].get("uid"))
        namespace = namespace_of(ds)
        revisions = client.list(CONTROLLER_REVISION, namespace=namespace, index=(OWNER_INDEX, uid))
        ok, not_ready = daemonset_pods_ready(ds, pods.pods_of(uid), revisions)
        ready = ready and ok
        nodes.update(not_ready)
        status = ds.get("status") or {}
        desired += int(status.get("desiredNumberScheduled") or 0)
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
