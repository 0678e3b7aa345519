"""One ClusterPolicy's operands: rendered, applied, pruned and judged, each step handing its
result to the next and never back.

Every enabled operand is rendered before anything is written (`render`, one immutable
`Plan`), so the takeover of a reference operator's driver is fenced before ours exists;
then each object is applied, skipped when unchanged (`apply`); driver DaemonSets that are no
longer wanted hand their pods over or stay while a node depends on them alone, and what we
own but no longer want is pruned (`prune`); last, readiness is judged from the cache
(`readiness`). Where the driver's DaemonSets come from is the plan's `DriverPlacement`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from components.api import ClusterPolicy
from components.controllers._apply import (
    Applier,
    Change,
    ObjectRef,
    OperandSet,
    OperandWrites,
    Rendering,
    component_of,
    describe,
    owned_by_kind,
    ref_of,
    render_operands,
)
from components.controllers._constants import CLUSTER_POLICY, DAEMONSET
from components.controllers._driver_handover import HandOver, hand_over
from components.controllers._readiness import (
    DaemonSetPodTally,
    UnreadyNames,
    operand_readiness,
    readiness_of,
)
from components.controllers._status import OperandReadiness, TakeoverWait
from components.controllers.clusterpolicy._driver import DriverPlacement, driver_operand
from components.controllers.clusterpolicy._takeover import (
    ReferenceTakeover,
    with_reference_driver,
)
from components.kinds import PODS_NOT_CACHED_OF
from components.operands import ClusterView, Operand
from reconciler import Client, Object, is_deleting, name_of, namespace_of

log = logging.getLogger("components.controllers.clusterpolicy")

_WORKLOADS = frozenset({DAEMONSET.kind})


@dataclass(frozen=True)
class Plan(Rendering):
    """What one policy wants, rendered before anything is written."""

    driver: DriverPlacement
    policy_uid: str
    has_service_monitor_crd: bool

    def readiness_daemonsets(self, operand: str) -> list[Object]:
        """The DaemonSets an operand's readiness is judged on."""
        if operand == self.driver.operand:
            return self.driver.readiness_daemonsets(self.rendered.get(operand))
        return self.of_kind(operand, DAEMONSET.kind)


@dataclass(frozen=True)
class Applied:
    """What the apply did: the takeover's fence, then each object written."""

    changes: tuple[Change, ...]
    failed: frozenset[str]
    """Operands an object of which could not be written."""
    problems: tuple[tuple[str, str], ...]
    held: tuple[str, ...]
    """DaemonSets not created yet: they wait for the node labels (`_label_wait`)."""
    hold_seconds: float
    """How much longer they wait at most."""


@dataclass(frozen=True)
class Pruned:
    """What the prune did, and the takeover it leaves."""

    changes: tuple[Change, ...]
    takeover: TakeoverWait | None
    """Nodes whose driver is still the reference operator's (a takeover in progress)."""


class PolicyOperands(OperandSet):
    """The operands of the active policy, written and judged."""

    def __init__(
        self,
        client: Client,
        applier: Applier,
        operands: Sequence[Operand],
        namespace: str,
        pods: DaemonSetPodTally,
    ) -> None:
        super().__init__(client, applier, operands, pods)
        self.namespace = namespace
        self.driver = driver_operand(self.operands)
        self.takeover = ReferenceTakeover(client, namespace)
        self.unready_names = UnreadyNames(client)

    def placement(self, policy: ClusterPolicy) -> DriverPlacement:
        return DriverPlacement.of(policy, self.client, self.namespace, self.driver)

    def config_maps_read(self, policy: ClusterPolicy) -> set[str]:
        """The user's ConfigMaps the enabled operands read (`ClusterView.config_documents`)."""
        driver = self.placement(policy)
        return {
            name
            for operand in self.operands
            if driver.enabled(operand, policy)
            for name in operand.config_maps_read(policy)
        }

    # -- render ----------------------------------------------------------------------------

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Plan:
        """Every enabled operand rendered; a render that fails is a problem, not an error."""
        driver = self.placement(policy)
        r = render_operands(
            self.operands,
            lambda o: driver.enabled(o, policy),
            lambda o: driver.render(o, policy, view),
        )
        return Plan(
            operands=r.operands,
            rendered=r.rendered,
            render_failed=r.render_failed,
            problems=r.problems,
            desired=r.desired,
            driver=driver,
            # An owner reference names its owner's uid at the top, not in metadata.
            policy_uid=str((view.owner or {}).get("uid") or ""),
            has_service_monitor_crd=view.has_service_monitor_crd,
        )

    # -- apply -----------------------------------------------------------------------------

    async def apply(self, plan: Plan, *, label_wait: Callable[[], float] | None = None) -> Applied:
        """Fence a reference driver, then write what the plan wants.

        `label_wait`, asked only when a DaemonSet is new: the seconds new DaemonSets should
        still wait for node labels (0: create them now)."""
        writes = OperandWrites(self.applier)
        # Nodes on the reference operator's driver are fenced off before ours is applied.
        writes.changes += await self.takeover.fence(plan.policy_uid, plan.desired)
        objects = plan.objects()
        # What the DaemonSets' pods use first, all at once; then the DaemonSets, all at once,
        # sent in the states' order (the driver's first). Applied one by one, a fresh
        # policy's objects came out over seconds (37 requests on an API server busy with the
        # first DaemonSets' pods), leaving the cluster half idle; at 100 nodes the last
        # DaemonSet still came 0.6 s after the first when only they were sequential.
        # Bindings after the roles they name (`wave`).
        await writes.write_waves(objects, _WORKLOADS, (0, 1))
        # A new DaemonSet waits while nodes still lack their labels (`_label_wait`).
        hold: float | None = None
        held: list[str] = []
        daemonsets: list[tuple[str, Object]] = []
        for name, obj in objects:
            if obj.get("kind") != DAEMONSET.kind:
                continue
            if label_wait is not None and self._is_new(obj):
                hold = label_wait() if hold is None else hold
                if hold > 0:
                    held.append(name_of(obj))
                    continue
            daemonsets.append((name, obj))
        await writes.write_all(daemonsets)
        return Applied(
            changes=tuple(writes.changes),
            failed=frozenset(writes.failed),
            problems=tuple(writes.problems),
            held=tuple(held),
            hold_seconds=hold or 0.0,
        )

    def _is_new(self, obj: Object) -> bool:
        return self.client.get(DAEMONSET, name_of(obj), namespace_of(obj)) is None

    # -- prune -----------------------------------------------------------------------------

    async def prune(self, plan: Plan, applied: Applied, policy: ClusterPolicy) -> Pruned:
        """Hand unwanted driver DaemonSets' pods over, delete what we own and no longer
        want, then clean up after a reference operator."""
        failed = plan.render_failed | applied.failed
        serving = plan.driver.serving(plan.rendered.get(self.driver or ""), applied.held)

        def keep(obj: Object) -> bool:
            """An undesired object stays while its operand failed, or while it is a driver
            DaemonSet some node still depends on alone."""
            if component_of(obj) in failed:
                return True
            stranded = plan.driver.stranded(obj, serving)
            if stranded:
                log.debug(
                    "keeping %s: nodes %s have no other driver DaemonSet",
                    name_of(obj),
                    sorted(stranded),
                )
            return bool(stranded)

        changes: list[Change] = []
        kept = await self._hand_over_drivers(plan, serving, keep, changes)
        changes += await self.applier.prune(
            plan.desired,
            owned_by_kind(CLUSTER_POLICY.kind),
            keep=lambda o: ref_of(o) in kept or keep(o),
        )
        changes += await self.takeover.clean(
            plan.policy_uid,
            plan.desired,
            applied=not failed,
            service_monitors=plan.has_service_monitor_crd,
        )
        takeover = TakeoverWait.of(self.takeover.waiting(plan.policy_uid), policy)
        return Pruned(changes=tuple(changes), takeover=takeover)

    async def _hand_over_drivers(
        self,
        plan: Plan,
        serving: Sequence[Object] | None,
        keep: Callable[[Object], bool],
        changes: list[Change],
    ) -> set[ObjectRef]:
        """Replace each undesired driver DaemonSet that still has pods by the desired one
        on their nodes without restarting them (`_driver_handover`); the ones to keep from
        the prune (handed over, or waiting for pods on their way out)."""
        if not serving:
            return set()
        kept: set[ObjectRef] = set()
        for obj in self.applier.owned_objects(owned_by_kind(CLUSTER_POLICY.kind)):
            if obj.get("kind") != DAEMONSET.kind or component_of(obj) != self.driver:
                continue
            if ref_of(obj) in plan.desired or is_deleting(obj):
                continue
            if keep(obj):
                continue
            outcome = await hand_over(self.client, obj, serving)
            if outcome is HandOver.NONE:
                continue
            kept.add(ref_of(obj))
            if outcome is HandOver.HANDED:
                changes.append(Change("deleted", describe(obj), self.driver or ""))
        return kept

    # -- readiness -------------------------------------------------------------------------

    def readiness(self, plan: Plan, takeover: TakeoverWait | None) -> list[OperandReadiness]:
        def judge(name: str) -> OperandReadiness:
            daemonsets = plan.readiness_daemonsets(name)
            readiness = operand_readiness(self.client, self.pods, name, daemonsets)
            if name == plan.driver.operand:
                readiness = with_reference_driver(readiness, takeover)
            return readiness

        return readiness_of(plan.operands, judge)

    async def name_unready(
        self, plan: Plan, readiness: list[OperandReadiness]
    ) -> tuple[list[OperandReadiness], float | None]:
        """`readiness` with the nodes named where an operand whose pods are not cached is
        not ready and its DaemonSets' counts have stood still (`UnreadyNames`), and the
        seconds until the next may be named (None: none waits).

        None is named while the driver is not ready: the other operands wait for it on
        the nodes it names, and their counts stand still for that, not for a fault."""
        driver = plan.driver.operand
        if any(r.name == driver and r.enabled and not r.ready for r in readiness):
            await self.unready_names.refresh(())
            return readiness, None
        stalled: dict[str, list[Object]] = {}
        for found in readiness:
            if found.name not in PODS_NOT_CACHED_OF or not found.enabled or found.ready:
                continue
            cached = (
                self.client.get(DAEMONSET, name_of(obj), namespace_of(obj))
                for obj in plan.readiness_daemonsets(found.name)
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
