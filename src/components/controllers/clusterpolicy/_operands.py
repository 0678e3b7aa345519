"""Applying one ClusterPolicy's operands and judging their readiness: the part of the
ClusterPolicy reconcile that writes objects.

Every enabled operand is rendered before anything is written, so the takeover of a
reference operator's driver is fenced before ours exists; then each object is applied
(skipped when unchanged), driver DaemonSets that are no longer wanted hand their pods over
or stay while a node depends on them alone, and what we own but no longer want is pruned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from components.api import DRIVER_DEPLOY_LABEL, ClusterPolicy
from components.controllers._apply import (
    Applier,
    Change,
    ObjectRef,
    component_of,
    describe,
    owned_by_kind,
    ref_of,
)
from components.controllers._constants import CLUSTER_POLICY, DAEMONSET, NODE, NVIDIA_DRIVER
from components.controllers._driver_crd import policy_without_driver_crd, uses_driver_crd
from components.controllers._driver_handover import HandOver, hand_over
from components.controllers._pod_tally import DaemonSetPodTally
from components.controllers._readiness import operand_readiness
from components.controllers._selection import nodes_only_served_by
from components.controllers._status import OperandReadiness
from components.controllers._takeover import ReferenceTakeover, with_reference_driver
from components.controllers._takeover_wait import TakeoverWait
from components.controllers._unready_names import UnreadyNames
from components.kinds import PODS_NOT_CACHED_OF
from components.operands import ClusterView, Operand, Rendered
from reconciler import Client, Object, name_of, namespace_of
from reconciler.errors import BadRequest, Forbidden, Invalid

log = logging.getLogger("components.controllers.clusterpolicy")

APPLY_CONCURRENCY = 8
"""Objects applied at once, at most: prerequisites (ServiceAccounts, roles, ConfigMaps,
Services, RuntimeClasses) first, then the bindings, then the DaemonSets."""

_BINDINGS = frozenset({"RoleBinding", "ClusterRoleBinding"})


def _wave(obj: Object) -> int:
    """When an object is applied: 0 with the prerequisites, 1 with the bindings (after the
    roles they name), 2 with the DaemonSets."""
    kind = obj.get("kind")
    return 2 if kind == DAEMONSET.kind else 1 if kind in _BINDINGS else 0


RENDER_FAILED = "RenderFailed"
APPLY_FAILED = "ApplyFailed"


@dataclass
class Sync:
    """What applying one policy's operands did and found."""

    desired: set[ObjectRef] = field(default_factory=set)
    rendered: dict[str, Rendered] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    """Operands whose render failed: their existing objects are left alone."""
    problems: list[tuple[str, str]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    driver_daemonsets: list[Object] | None = None
    """The driver DaemonSets that should serve the nodes (None: the driver is disabled)."""
    takeover: TakeoverWait | None = None
    """Nodes whose driver is still the reference operator's (a takeover in progress)."""
    held: list[str] = field(default_factory=list)
    """DaemonSets not created yet: they wait for the node labels (`_label_wait`)."""
    hold_seconds: float = 0.0
    """How much longer they wait at most."""


class OperandSync:
    """The operands of the active policy, written and judged."""

    def __init__(
        self,
        client: Client,
        applier: Applier,
        operands: Sequence[Operand],
        namespace: str,
        pods: DaemonSetPodTally,
    ) -> None:
        self.client = client
        self.applier = applier
        self.pods = pods
        self.operands = list(operands)
        self.namespace = namespace
        self.driver = next(
            (op.name for op in self.operands if op.deploy_label == DRIVER_DEPLOY_LABEL), None
        )
        self.takeover = ReferenceTakeover(client, namespace)
        self.unready_names = UnreadyNames(client)

    async def sync(
        self,
        policy: ClusterPolicy,
        view: ClusterView,
        *,
        label_wait: Callable[[], float] | None = None,
    ) -> Sync:
        """Render every enabled operand, apply what it wants, prune what nobody wants.

        `label_wait`, asked only when a DaemonSet is new: the seconds new DaemonSets should
        still wait for node labels (0: create them now)."""
        sync = Sync()
        for operand in self.operands:
            if not self.enabled(operand, policy):
                continue
            try:
                rendered = self._render(operand, policy, view)
            except ValueError as exc:  # a renderer should say so in a condition instead
                sync.failed.add(operand.name)
                sync.problems.append((RENDER_FAILED, f"{operand.name}: {exc}"))
                continue
            sync.rendered[operand.name] = rendered
            sync.problems += rendered.conditions
            sync.desired.update(ref_of(obj) for obj in rendered.objects)
        # Nodes on the reference operator's driver are fenced off before ours is applied.
        policy_uid = str((view.owner or {}).get("uid") or "")
        sync.changes += await self.takeover.fence(policy_uid, sync.desired)
        objects = [(name, obj) for name, r in sync.rendered.items() for obj in r.objects]
        # What the DaemonSets' pods use first, all at once; then the DaemonSets, all at once,
        # sent in the states' order (the driver's first). Applied one by one, a fresh
        # policy's objects came out over seconds (37 requests on an API server busy with the
        # first DaemonSets' pods), leaving the cluster half idle; at 100 nodes the last
        # DaemonSet still came 0.6 s after the first when only they were sequential.
        gate = asyncio.Semaphore(APPLY_CONCURRENCY)

        async def apply(name: str, obj: Object) -> None:
            async with gate:
                await self._apply(obj, name, sync)

        # Bindings after the roles they name: the API server checks a binding made by
        # anyone without `bind` (the operator) against the rules of its role, and refuses
        # it while that role does not exist yet.
        for wave in (0, 1):
            await asyncio.gather(*(apply(n, o) for n, o in objects if _wave(o) == wave))
        # A new DaemonSet waits while nodes still lack their labels (`_label_wait`).
        hold: float | None = None
        daemonsets: list[tuple[str, Object]] = []
        for name, obj in objects:
            if obj.get("kind") != DAEMONSET.kind:
                continue
            if label_wait is not None and self._is_new(obj):
                hold = label_wait() if hold is None else hold
                if hold > 0:
                    sync.held.append(name_of(obj))
                    continue
            daemonsets.append((name, obj))
        await asyncio.gather(*(apply(n, o) for n, o in daemonsets))
        sync.hold_seconds = hold or 0.0
        sync.driver_daemonsets = self._driver_daemonsets(policy, sync)
        kept = await self._hand_over_drivers(sync)
        sync.changes += await self.applier.prune(
            sync.desired,
            owned_by_kind(CLUSTER_POLICY.kind),
            keep=lambda o: ref_of(o) in kept or self._keep(o, sync),
        )
        sync.changes += await self.takeover.clean(
            policy_uid,
            sync.desired,
            applied=not sync.failed,
            service_monitors=view.has_service_monitor_crd,
        )
        sync.takeover = TakeoverWait.of(self.takeover.waiting(policy_uid), policy)
        return sync

    def _is_new(self, obj: Object) -> bool:
        meta = obj.get("metadata") or {}
        return self.client.get(DAEMONSET, str(meta.get("name")), str(meta.get("namespace"))) is None

    async def _hand_over_drivers(self, sync: Sync) -> set[ObjectRef]:
        """Replace each undesired driver DaemonSet that still has pods by the desired one
        on their nodes without restarting them (`_driver_handover`); the ones to keep from
        the prune (handed over, or waiting for pods on their way out)."""
        desired = sync.driver_daemonsets
        if not desired:
            return set()
        kept: set[ObjectRef] = set()
        for obj in self.applier.owned_objects(owned_by_kind(CLUSTER_POLICY.kind)):
            if obj.get("kind") != DAEMONSET.kind or component_of(obj) != self.driver:
                continue
            if ref_of(obj) in sync.desired or (obj.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if self._keep(obj, sync):
                continue
            outcome = await hand_over(self.client, obj, desired)
            if outcome is HandOver.NONE:
                continue
            kept.add(ref_of(obj))
            if outcome is HandOver.HANDED:
                sync.changes.append(Change("deleted", describe(obj), self.driver or ""))
        return kept

    def enabled(self, operand: Operand, policy: ClusterPolicy) -> bool:
        if operand.name == self.driver and uses_driver_crd(policy):
            return True  # its shared objects are ours; its DaemonSets NVIDIADrivers'
        return operand.enabled(policy)

    def _render(self, operand: Operand, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        if operand.name != self.driver or not uses_driver_crd(policy):
            return operand.render(policy, view)
        # The ServiceAccount, RBAC and ConfigMaps every driver pod uses, and no DaemonSet:
        # those come from the NVIDIADriver controller, one set per NVIDIADriver.
        shared = operand.render(policy_without_driver_crd(policy), replace(view, gpu_nodes=[]))
        return Rendered(objects=[o for o in shared.objects if o.get("kind") != DAEMONSET.kind])

    async def _apply(self, obj: Object, component: str, sync: Sync) -> None:
        try:
            change = await self.applier.write(obj, component)
        except (Invalid, BadRequest, Forbidden) as exc:
            # The object as rendered cannot be written; say so and go on with the rest.
            what = f"{obj.get('kind')} {name_of(obj)}"
            sync.problems.append((APPLY_FAILED, f"{component}: {what}: {exc}"))
            sync.failed.add(component)
            return
        if change is not None:
            sync.changes.append(change)

    def _keep(self, obj: Object, sync: Sync) -> bool:
        """Whether an undesired object must stay: its operand failed to render, or it is a
        driver DaemonSet some node still depends on alone."""
        component = component_of(obj)
        if component in sync.failed:
            return True
        if obj.get("kind") != DAEMONSET.kind or component != self.driver:
            return False
        if sync.driver_daemonsets is None:
            return False  # the driver is disabled: its DaemonSets go
        stranded = nodes_only_served_by(obj, sync.driver_daemonsets, self.client.list(NODE))
        if stranded:
            log.debug(
                "keeping %s: nodes %s have no other driver DaemonSet",
                name_of(obj),
                sorted(stranded),
            )
        return bool(stranded)

    # -- readiness -----------------------------------------------------------------------

    def _daemonsets(self, operand: Operand, policy: ClusterPolicy, sync: Sync) -> list[Object]:
        if operand.name == self.driver and uses_driver_crd(policy):
            return self._nvidia_driver_daemonsets()
        rendered = sync.rendered.get(operand.name)
        objects = rendered.objects if rendered else []
        return [o for o in objects if o.get("kind") == DAEMONSET.kind]

    async def name_unready(
        self, policy: ClusterPolicy, sync: Sync, readiness: list[OperandReadiness]
    ) -> tuple[list[OperandReadiness], float | None]:
        """`readiness` with the nodes named where an operand whose pods are not cached is
        not ready and its DaemonSets' counts have stood still (`UnreadyNames`), and the
        seconds until the next may be named (None: none waits).

        None is named while the driver is not ready: the other operands wait for it on
        the nodes it names, and their counts stand still for that, not for a fault."""
        if any(r.name == self.driver and r.enabled and not r.ready for r in readiness):
            await self.unready_names.refresh(())
            return readiness, None
        operands = {op.name: op for op in self.operands}
        stalled: dict[str, list[Object]] = {}
        for found in readiness:
            if found.name not in PODS_NOT_CACHED_OF or not found.enabled or found.ready:
                continue
            cached = (
                self.client.get(DAEMONSET, name_of(obj), namespace_of(obj))
                for obj in self._daemonsets(operands[found.name], policy, sync)
            )
            stalled[found.name] = [ds for ds in cached if ds is not None]
        wait = await self.unready_names.refresh(ds for group in stalled.values() for ds in group)
        out = []
        for found in readiness:
            named = {
                node for ds in stalled.get(found.name, ()) for node in self.unready_names.names(ds)
            }
            if named - set(found.not_ready_nodes):
                found = replace(found, not_ready_nodes=sorted(named | set(found.not_ready_nodes)))
            out.append(found)
        return out, wait

    def readiness(self, policy: ClusterPolicy, sync: Sync) -> list[OperandReadiness]:
        out = []
        for operand in self.operands:
            if not self.enabled(operand, policy):
                out.append(OperandReadiness(operand.name, enabled=False))
                continue
            daemonsets = self._daemonsets(operand, policy, sync)
            readiness = operand_readiness(self.client, self.pods, operand.name, daemonsets)
            if operand.name == self.driver:
                readiness = with_reference_driver(readiness, sync.takeover)
            out.append(readiness)
        return out

    def _driver_daemonsets(self, policy: ClusterPolicy, sync: Sync) -> list[Object] | None:
        if uses_driver_crd(policy):
            return self._nvidia_driver_daemonsets()
        rendered = sync.rendered.get(self.driver or "")
        if rendered is None:
            return None
        # One still held does not exist: no pod is handed to it, no node counted as served.
        return [
            o
            for o in rendered.objects
            if o.get("kind") == DAEMONSET.kind and name_of(o) not in sync.held
        ]

    def _nvidia_driver_daemonsets(self) -> list[Object]:
        """The driver DaemonSets NVIDIADriver resources made (cached)."""
        owned = owned_by_kind(NVIDIA_DRIVER.kind)
        return [
            ds
            for ds in self.client.list(DAEMONSET, namespace=self.namespace)
            if component_of(ds) == self.driver and owned(ds)
        ]
