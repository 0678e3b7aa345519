"""What the ClusterPolicy controller does with what NVIDIA's operator left for the same policy.

The rules are in `components.api` (`is_foreign`, `fence_patch`); this carries them out, in
three places of a reconcile:

1. `fence`, before anything is applied: every node a reference driver pod runs on gets
   `DRIVER_TAKEOVER_LABEL`, then the reference's driver DaemonSet is fenced to those nodes
   (with the revisions those pods run, so a pod it creates later is known as such).
   Our driver DaemonSets, created next, stay off them; the upgrade walk hands each node
   over (`components.upgrade`). A reference DaemonSet with the name of one we render is
   not fenced: the apply adopts it, and its pods are outdated like any driver change.
2. `waiting`, for readiness: nodes whose driver is still the reference's. The driver is not
   ready until there are none, so the policy is not `ready` before every node runs ours.
   `TakeoverWait` says what moves them: the upgrade walk with auto upgrade on; with it off
   the admin, node by node (drain it, delete its driver pod: the reference's DaemonSet is
   `OnDelete`, and the pod deleted comes back as ours), or all at once by turning it on.
   It is the policy's `DriverTakeover` condition, and an Event and an INFO line each time
   it changes (`announce`).
3. `clean`, after the apply: the reference's other DaemonSets go once ours are applied
   (those we also render were adopted by the apply and are ours now); its driver DaemonSet
   once no node depends on it; everything else it owned (ConfigMaps, RBAC, RuntimeClasses,
   Services, ServiceMonitors) once none of its DaemonSets is left, so its running pods keep
   their configuration and permissions to the end.

Those other kinds are not all cached (our informers select our own label), so `clean`
lists them from the server, once per policy per process: after a sweep that found nothing
of the reference's, it never lists again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from components.api import (
    DRIVER_TAKEOVER_LABEL,
    fence_patch,
    is_driver_template,
    is_fenced,
    is_foreign,
)
from components.controllers._apply import Change, ObjectRef, delete_judged, describe, ref_of
from components.controllers._constants import DAEMONSET, NODE, POD
from components.controllers._informers import CLUSTER_OWNED, NAMESPACED_OWNED, TAKEOVER_NODE_INDEX
from components.controllers._status import OperandReadiness, TakeoverWait
from reconciler import (
    GVK,
    OWNER_INDEX,
    Client,
    Object,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    uid_of,
)
from reconciler.errors import Conflict, NotFound

log = logging.getLogger("components.controllers.takeover")

COMPONENT = "reference-operator"
"""How Changes and Events name what the takeover did."""
SERVICE_MONITOR = GVK("monitoring.coreos.com", "v1", "ServiceMonitor")
DONE = "every node runs our driver: the takeover from NVIDIA's operator is done"


class ReferenceTakeover:
    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._swept: set[str] = set()
        """Policy uids with nothing of the reference's left (in this process)."""
        self._announced: dict[str, tuple[str, tuple[str, ...]] | None] = {}
        """Per policy, what `announce` last said (its reason and, waiting for the admin,
        the nodes)."""

    # -- reads from the cache --------------------------------------------------------------

    def foreign_daemonsets(self, policy_uid: str) -> list[Object]:
        if not policy_uid:
            return []
        return [
            ds
            for ds in self.client.list(DAEMONSET, namespace=self.namespace)
            if is_foreign(ds, policy_uid)
        ]

    def _live_pods(self, ds: Object) -> list[Object]:
        """The live pods of `ds` bound to a node."""
        pods = self.client.list(POD, namespace=self.namespace, index=(OWNER_INDEX, uid_of(ds)))
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") and not is_deleting(p)]

    def _pod_nodes(self, ds: Object) -> set[str]:
        """Nodes a live pod of `ds` is bound to."""
        return {str(p["spec"]["nodeName"]) for p in self._live_pods(ds)}

    def _labelled_nodes(self) -> set[str]:
        return {name_of(n) for n in self.client.list(NODE, index=(TAKEOVER_NODE_INDEX, "true"))}

    def waiting(self, policy_uid: str) -> set[str]:
        """Nodes whose driver is still the reference's (or that wait for the walk to hand
        them to ours)."""
        nodes = self._labelled_nodes()
        for ds in self.foreign_daemonsets(policy_uid):
            if is_driver_template(ds):
                nodes |= self._pod_nodes(ds)
        return nodes

    def announce(self, policy: str, wait: TakeoverWait | None) -> str | None:
        """What to tell the admin about `policy`'s takeover (an Event), when it changed since
        last told; logged (INFO). Waiting for the admin, each node moved is a change; during
        a walk only its start and end are (the walk reports each node)."""
        said = None if wait is None else (wait.reason, () if wait.walks else wait.nodes)
        first = policy not in self._announced
        if not first and self._announced[policy] == said:
            return None
        self._announced[policy] = said
        if said is None and first:
            return None  # no takeover, nothing to say
        message = DONE if wait is None else wait.message
        log.info("ClusterPolicy %s: %s", policy, message)
        return message

    # -- 1. before the apply ---------------------------------------------------------------

    async def fence(self, policy_uid: str, desired: Iterable[ObjectRef]) -> list[Change]:
        """Label the nodes of each unfenced reference driver DaemonSet, then fence it."""
        wanted = set(desired)
        changes: list[Change] = []
        for ds in self.foreign_daemonsets(policy_uid):
            if not is_driver_template(ds) or ref_of(ds) in wanted:
                continue
            pods = self._live_pods(ds)
            patch = fence_patch(ds, pods)
            if patch is None:
                continue
            for name in sorted({str(p["spec"]["nodeName"]) for p in pods}):
                await self._label(name)
            await self.client.patch(
                DAEMONSET, name_of(ds), patch, namespace=namespace_of(ds), quiet=True
            )
            log.info(
                "%s: the reference operator's driver; nodes move to ours one upgrade walk "
                "at a time",
                describe(ds),
            )
            changes.append(Change("updated", describe(ds), COMPONENT))
        return changes

    async def _label(self, name: str) -> None:
        node = self.client.get(NODE, name)
        if node is None or DRIVER_TAKEOVER_LABEL in labels_of(node):
            return
        body = {"metadata": {"labels": {DRIVER_TAKEOVER_LABEL: "true"}}}
        try:
            await self.client.patch(NODE, name, body, quiet=True)
        except NotFound:
            return
        log.info("node %s: runs the reference operator's driver, labelled for the takeover", name)

    # -- 3. after the apply ----------------------------------------------------------------

    async def clean(
        self,
        policy_uid: str,
        desired: Iterable[ObjectRef],
        *,
        applied: bool,
        service_monitors: bool,
    ) -> list[Change]:
        """Delete what the reference left and no longer serves a node. `applied`: every
        operand of ours was rendered and applied (its replacements exist)."""
        if not policy_uid or policy_uid in self._swept:
            return []
        wanted = set(desired)
        changes: list[Change] = []
        left = False
        labelled = self._labelled_nodes()
        for ds in self.foreign_daemonsets(policy_uid):
            if ref_of(ds) in wanted:
                left = True  # adopted by the apply; the cache shows it soon
                continue
            if is_driver_template(ds):
                go = is_fenced(ds) and not labelled and not self._pod_nodes(ds)
            else:
                go = applied
            if go:
                changes += await self._delete(ds)
            left = True  # gone or going: its pods may still run until the next pass
        if left or not applied:
            return changes
        kinds: list[GVK] = [k for k in NAMESPACED_OWNED if k != DAEMONSET]
        kinds += CLUSTER_OWNED
        if service_monitors:
            kinds.append(SERVICE_MONITOR)
        for gvk in kinds:
            scope = None if gvk in CLUSTER_OWNED else self.namespace
            items = await self.client.list_live(gvk, namespace=scope)
            for obj in items:
                if is_foreign(obj, policy_uid) and ref_of(obj) not in wanted:
                    changes += await self._delete(obj)
        self._swept.add(policy_uid)
        return changes

    async def _delete(self, obj: Object) -> list[Change]:
        if is_deleting(obj):
            return []
        try:
            await delete_judged(self.client, obj)
        except Conflict:
            return []  # replaced meanwhile: not the object we judged
        log.info("deleted %s, left by the reference operator", describe(obj))
        return [Change("deleted", describe(obj), COMPONENT)]


def with_reference_driver(
    readiness: OperandReadiness, wait: TakeoverWait | None
) -> OperandReadiness:
    """The driver's readiness with the nodes still on the reference operator's driver: not
    ready while there is one, so the policy is `ready` only once every node runs ours."""
    if wait is None:
        return readiness
    waiting = set(wait.nodes)
    return replace(
        readiness,
        ready=False,
        nodes_desired=readiness.nodes_desired + len(waiting - set(readiness.not_ready_nodes)),
        not_ready_nodes=sorted(set(readiness.not_ready_nodes) | waiting),
        message=wait.message,
    )
