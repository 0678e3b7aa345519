"""Operand readiness from the cache, in the order a reconcile asks: the operand
DaemonSets' pods counted as they change (`DaemonSetPodTally`), each operand judged from its
DaemonSets, their pods and ControllerRevisions (`operand_readiness`), and the nodes named
where an operand whose pods are not cached is not ready (`UnreadyNames`).

The tally. Judging readiness by listing each DaemonSet's pods costs one look at every
operand pod per ClusterPolicy reconcile: eight per GPU node, so 40,000 at 5,000 nodes,
several times a second through a rollout (12% of the operator's CPU in a 2,000-node
profile). Kept from the pods informer's events instead, each event costs a constant and a
judgement costs what is not ready yet.

The judgement. The DaemonSet controller writes a new DaemonSet's first status from its own
node cache. When that cache has not yet seen the label that brings a node in (a kernel pin
just moved, the deploy labels just written), the status says "0 desired, spec observed",
which alone reads as rolled out. The policy then said `ready` ~80 ms after creating a
driver DaemonSet, before its pod existed. So a DaemonSet that counts no node is judged
against the nodes our cache says it must serve, and they count as desired; the controller's
recount, when its cache catches up, brings the next event. Only such a DaemonSet costs a
scan of the cached nodes (~1.6 ms at 1,000 nodes, once per paced reconcile): one that counts
some has pods the tally judges.

The names. The pod informer leaves some operands' pods out
(`components.kinds.PODS_NOT_CACHED_OF`): at 1,000 GPU nodes they brought two thirds of a
rollout's pod events, and their DaemonSet's counts alone say whether the operand is ready.
The counts do not say where it is not. Names help an admin when a rollout stalls, not while
it moves, and one LIST of a DaemonSet's pods costs about what its pods' events would: so a
DaemonSet not ready whose counts have stood still for `STALL_SECONDS` has its pods listed
once, and the names stand until its counts change (the DaemonSet controller recounts on
every pod that turns ready or unready)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final
from weakref import WeakKeyDictionary

from components.api import daemon_pod_runs_on, template_pod_spec
from components.controllers._constants import CONTROLLER_REVISION, DAEMONSET, NODE
from components.controllers._daemonset_pods import daemonset_uid, live_pod_facts
from components.controllers._status import OperandReadiness
from components.kinds import PODS_NOT_CACHED_OF
from components.operands.readiness import DaemonSetPods, PodFacts, daemonset_pods_ready
from reconciler import (
    OWNER_INDEX,
    Client,
    Informer,
    Object,
    generation_of,
    labels_of,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)

log = logging.getLogger("components.controllers.clusterpolicy")

# -- the tally -----------------------------------------------------------------------------


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


# -- the judgement -------------------------------------------------------------------------


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


# -- the names -----------------------------------------------------------------------------


STALL_SECONDS: Final = 5.0
"""How long a DaemonSet not ready keeps the same counts before its pods are listed."""

_COUNTS: Final = (
    "observedGeneration",
    "desiredNumberScheduled",
    "currentNumberScheduled",
    "updatedNumberScheduled",
    "numberReady",
    "numberAvailable",
    "numberUnavailable",
    "numberMisscheduled",
)


def _counts(ds: Object) -> tuple[Any, ...]:
    status = ds.get("status") or {}
    return (generation_of(ds), *(status.get(key) for key in _COUNTS))


@dataclass(slots=True)
class _Stall:
    counts: tuple[Any, ...]
    since: float
    names: list[str] | None = None


class UnreadyNames:
    """Per DaemonSet (by uid), the counts last seen, since when, and the names listed."""

    def __init__(self, client: Client, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self._stalls: dict[str, _Stall] = {}

    def names(self, ds: Object) -> list[str]:
        """The nodes named for the cached `ds`'s current counts (none until listed)."""
        stall = self._stalls.get(daemonset_uid(ds))
        if stall is None or stall.names is None or stall.counts != _counts(ds):
            return []
        return stall.names

    async def refresh(self, daemonsets: Iterable[Object]) -> float | None:
        """List the pods of each of `daemonsets` (cached copies) that is not ready and has
        kept its counts for `STALL_SECONDS` unnamed; the seconds until the next one will
        have, or None when none waits. DaemonSets not passed are forgotten."""
        now = self.clock()
        kept: dict[str, _Stall] = {}
        waits: list[float] = []
        for ds in daemonsets:
            ready, _ = daemonset_pods_ready(ds, None, ())
            status = ds.get("status") or {}
            if ready or int(status.get("observedGeneration") or 0) < generation_of(ds):
                continue  # nothing to name, or counts of an older spec
            uid, counts = daemonset_uid(ds), _counts(ds)
            stall = self._stalls.get(uid)
            if stall is None or stall.counts != counts:
                stall = _Stall(counts, now)
            kept[uid] = stall
            if stall.names is not None:
                continue
            left = stall.since + STALL_SECONDS - now
            if left > 0:
                waits.append(left)
                continue
            pods = await live_pod_facts(self.client, ds)
            revisions = self.client.list(
                CONTROLLER_REVISION, namespace=namespace_of(ds), index=(OWNER_INDEX, uid)
            )
            stall.names = daemonset_pods_ready(ds, pods, revisions)[1]
            log.debug("DaemonSet %s not ready on %d nodes (listed)", name_of(ds), len(stall.names))
        self._stalls = kept
        return min(waits) if waits else None


def readiness_of(
    operands: Iterable[tuple[str, bool]], judge: Callable[[str], OperandReadiness]
) -> list[OperandReadiness]:
    """Each operand's readiness in order: `judge`'s for an enabled one."""
    return [judge(name) if on else OperandReadiness(name, enabled=False) for name, on in operands]
