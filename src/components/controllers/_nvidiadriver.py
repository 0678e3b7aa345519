"""The NVIDIADriver controller: driver DaemonSets per node pool.

Active while the active ClusterPolicy says `driver.useNvidiaDriverCRD: true` (and the
driver is enabled), or while a GPUCluster is the cluster's stack: a GPUCluster has no
driver section, and its driver is an NVIDIADriver's (or the host's), as in the reference.
Otherwise every NVIDIADriver is `ignored` and its DaemonSets go (the ClusterPolicy's own
driver DaemonSets take over, and are kept until they do).

Each NVIDIADriver renders the driver renderer's DaemonSets for its pool's nodes (one per
OS, or per kernel when precompiled), named as the reference names them
(`nvidia-<type>-driver-<os>-<hash>`, `_driver_crd`) with a ServiceAccount and RBAC of its
own per OS, and narrowed to the pool: its `nodeSelector`, or for the default one, node
affinity that keeps out every other pool's nodes. Overlapping selectors and a second
default become a condition on the younger NVIDIADriver, which then deploys nothing: never
a fight. A DaemonSet of its that is no longer wanted (renamed by an operator upgrade, or a
pool that moved) hands its pods to the wanted one without restarting them
(`_driver_handover`); the upgrade walk replaces them node by node.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pydantic

from components.api import (
    DRIVER_DEPLOY_LABEL,
    ClusterPolicy,
    DriverSpec,
    GPUCluster,
    NVIDIADriver,
    NVIDIADriverStatus,
    by_age,
    dra_stack,
    rollback_images,
)
from components.controllers import _informers
from components.controllers._apply import (
    Applier,
    Change,
    ObjectRef,
    component_of,
    controller_owner,
    describe,
    owned_by_kind,
    ref_of,
)
from components.controllers._constants import (
    CLUSTER_POLICY,
    CRD,
    DAEMONSET,
    NODE,
    NVIDIA_DRIVER,
    SERVICE_MONITOR_CRD,
)
from components.controllers._driver_crd import (
    RBAC_KINDS,
    accounts_for,
    driver_section,
    for_nvidia_driver,
    policy_with_driver,
    uses_driver_crd,
)
from components.controllers._driver_handover import HandOver, hand_over
from components.controllers._filters import NODE_CHANGED, POLICY_CHANGED
from components.controllers._policies import STACK_CHANGED, ActivePolicy, Stacks, spec_key
from components.controllers._pools import TOO_MANY_POOLS, Pool, assign, exclusion_terms
from components.controllers._readiness import operand_readiness
from components.controllers._selection import nodes_only_served_by
from components.controllers._status import OperandReadiness, driver_status
from components.controllers._status_writer import StatusWriter
from components.controllers._view import config_map_keys, views_of_gpu_nodes
from components.operands import OPERANDS, ClusterView, Operand
from reconciler import (
    NORMAL,
    Controller,
    EventRecorder,
    GenerationChanged,
    Manager,
    Object,
    Request,
    Result,
    generation_of,
    is_deleting,
    name_of,
    owner_reference,
    uid_of,
)
from reconciler.errors import BadRequest, Forbidden, Invalid
from reconciler.kinds import CONFIG_MAP

log = logging.getLogger("components.controllers.nvidiadriver")

NAME = "nvidia-driver-controller"
NOT_IN_USE = (
    "the active ClusterPolicy does not set driver.useNvidiaDriverCRD: true (or has the "
    "driver disabled) and no GPUCluster is the cluster's stack, so NVIDIADriver resources "
    "are not used"
)


class NVIDIADriverController:
    def __init__(
        self,
        manager: Manager,
        applier: Applier,
        *,
        namespace: str,
        operands: Sequence[Operand] | None = None,
        recorder: EventRecorder | None = None,
        stacks: Stacks | None = None,
    ) -> None:
        self.manager = manager
        self.stacks = stacks
        self._cluster: tuple[tuple[str, str, str], ClusterPolicy | None] | None = None
        self.client = manager.client
        self._active = ActivePolicy(lambda: self.client.list(CLUSTER_POLICY))
        self.applier = applier
        self.namespace = namespace
        found = [op for op in (OPERANDS if operands is None else operands)]
        self.driver: Operand | None = next(
            (op for op in found if op.deploy_label == DRIVER_DEPLOY_LABEL), None
        )
        self.recorder = recorder or manager.event_recorder("gpu-operator")
        self.status = StatusWriter(
            self.client, self.recorder, NVIDIA_DRIVER, report_ready_changes=False
        )
        self.pods = _informers.daemonset_pods(manager, namespace)

    def setup(self) -> Controller:
        m = self.manager
        c = m.controller(NAME, self)
        # Any NVIDIADriver's selector or default flag changes the others' pools.
        c.watch(_informers.nvidia_drivers(m), self._every_driver, POLICY_CHANGED, map_old=False)
        c.watch(
            _informers.cluster_policies(m), self._every_driver, GenerationChanged(), map_old=False
        )
        if self.stacks is not None and self.stacks.served:
            c.watch(_informers.gpu_clusters(m), self._every_driver, STACK_CHANGED, map_old=False)
        c.watch(_informers.nodes(m), self._every_driver, NODE_CHANGED, map_old=False)
        c.watch(_informers.owned(m, DAEMONSET, self.namespace), self._daemonset_event)
        return c

    def _every_driver(self, _: Object) -> list[Request]:
        return [Request("", name_of(d)) for d in self.client.list(NVIDIA_DRIVER)]

    def _daemonset_event(self, obj: Object) -> list[Request]:
        """Its NVIDIADriver; any driver DaemonSet may also let others delete stale ones."""
        ref = controller_owner(obj)
        if ref is not None and ref.get("kind") == NVIDIA_DRIVER.kind:
            return [Request("", str(ref.get("name")))]
        if self.driver is not None and component_of(obj) == self.driver.name:
            return self._every_driver(obj)
        return []

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        obj = self.client.get(NVIDIA_DRIVER, request.name)
        if obj is None or is_deleting(obj):
            return None  # garbage collection removes its DaemonSets
        obj = self.status.latest(obj)  # its status as we last wrote it, should the cache lag
        uid = uid_of(obj)
        policy = self._active_policy()
        if policy is None or not uses_driver_crd(policy) or self.driver is None:
            if policy is not None:
                # The driver is the ClusterPolicy's again (kept until its DaemonSets
                # serve the nodes), or disabled (then ours simply go).
                await self._prune(uid, desired=[], stranding=policy.spec.driver.enabled)
            await self.status.write(obj, self._status(obj, ignored=NOT_IN_USE))
            return None
        try:
            nvidia_driver = NVIDIADriver.from_dict(obj)
        except pydantic.ValidationError as exc:
            message = f"the spec cannot be read: {exc.errors()[0]['msg']}"
            await self.status.write(obj, self._status(obj, problems=[("InvalidSpec", message)]))
            return None
        with_gpu = self.client.list(NODE, index=(_informers.GPU_NODE_INDEX, "true"))
        pools = assign(by_age(self.client.list(NVIDIA_DRIVER)), with_gpu)
        conflict = pools.conflicts.get(request.name)
        if conflict is not None:
            await self.status.write(obj, self._status(obj, problems=[conflict]))
            return None
        pool = pools.pools[request.name]
        desired, problems = self._render(obj, nvidia_driver, policy, pool, with_gpu)
        changes: list[Change] = []
        for wanted in desired:
            try:
                change = await self.applier.write(wanted, self.driver.name)
            except (Invalid, BadRequest, Forbidden) as exc:
                problems.append(("ApplyFailed", f"{wanted['kind']} {name_of(wanted)}: {exc}"))
                continue
            if change is not None:
                changes.append(change)
        changes += await self._prune(uid, desired=desired)
        daemonsets = [o for o in desired if o.get("kind") == DAEMONSET.kind]
        readiness = operand_readiness(self.client, self.pods, self.driver.name, daemonsets)
        for change in changes:
            await self.recorder.event(obj, NORMAL, change.verb.capitalize(), str(change))
        await self.status.write(obj, self._status(obj, readiness=readiness, problems=problems))
        return None

    def _active_policy(self) -> ClusterPolicy | None:
        cluster = self.stacks.active_gpu_cluster() if self.stacks is not None else None
        if cluster is not None:
            return self._cluster_policy(cluster)
        return self._active.parsed()

    def _cluster_policy(self, obj: Object) -> ClusterPolicy | None:
        """The GPUCluster as the policy its NVIDIADrivers' DaemonSets render from: its
        stack (`dra_stack`: daemonsets, host paths) with the driver on NVIDIADrivers.
        Parsed once per spec; one that cannot be read is None (its controller says so)."""
        key = spec_key(obj)
        if key is not None and self._cluster is not None and self._cluster[0] == key:
            return self._cluster[1]
        try:
            cluster = GPUCluster.from_dict({k: v for k, v in obj.items() if k != "status"})
        except pydantic.ValidationError:
            policy = None
        else:
            stack = dra_stack(cluster)
            driver = DriverSpec.from_dict({"enabled": True, "useNvidiaDriverCRD": True})
            policy = stack.model_copy(
                update={"spec": stack.spec.model_copy(update={"driver": driver})}
            )
        self._cluster = (key, policy) if key is not None else None
        return policy

    def _render(
        self,
        obj: Object,
        nvidia_driver: NVIDIADriver,
        policy: ClusterPolicy,
        pool: Pool,
        gpu_nodes: Sequence[Object],
    ) -> tuple[list[Object], list[tuple[str, str]]]:
        assert self.driver is not None
        problems: list[tuple[str, str]] = []
        exclude = exclusion_terms(pool.exclude)
        if exclude is None:
            problems.append(
                (
                    TOO_MANY_POOLS,
                    "the other NVIDIADrivers' node selectors are too many to keep their "
                    "nodes out of the default one; give the default NVIDIADriver's nodes "
                    "a label and a nodeSelector instead",
                )
            )
            return [], problems
        spec = nvidia_driver.spec
        view = self._view(obj, pool, gpu_nodes)
        rendered = self.driver.render(policy_with_driver(policy, driver_section(spec)), view)
        problems += rendered.conditions
        daemonsets = [
            for_nvidia_driver(
                o,
                nvidia_driver=name_of(obj),
                uid=uid_of(obj),
                spec=spec,
                selector=pool.selector if not pool.default else {},
                exclude_terms=exclude,
            )
            for o in rendered.objects
            if o.get("kind") == DAEMONSET.kind
        ]
        rbac = [o for o in rendered.objects if o.get("kind") in RBAC_KINDS]
        return [*accounts_for(rbac, daemonsets), *daemonsets], problems

    def _view(self, obj: Object, pool: Pool, gpu_nodes: Sequence[Object]) -> ClusterView:
        """The cluster as this NVIDIADriver's pool sees it: its own nodes only."""
        names = set(pool.nodes)
        members = [n for n in gpu_nodes if name_of(n) in names]
        return ClusterView(
            namespace=self.namespace,
            gpu_nodes=views_of_gpu_nodes(members),
            has_service_monitor_crd=any(
                name_of(c) == SERVICE_MONITOR_CRD for c in self.client.list(CRD)
            ),
            owner=owner_reference(obj),
            config_map_keys=config_map_keys(self.client.list(CONFIG_MAP, namespace=self.namespace)),
            last_good_images=rollback_images(obj, members),
        )

    async def _prune(
        self, uid: str, *, desired: Sequence[Object], stranding: bool = True
    ) -> list[Change]:
        """Delete what this NVIDIADriver owns and no longer wants. A DaemonSet with pods
        first hands them to the desired DaemonSet on their nodes (no restart); with
        `stranding`, one that cannot is deleted only once every node it serves is served
        by a desired one or another driver DaemonSet. Its ServiceAccount and RBAC stay
        while a DaemonSet that may still run under them is kept."""
        mine = owned_by_kind(NVIDIA_DRIVER.kind, uid)
        driver = self.driver.name if self.driver is not None else ""
        wanted = {ref_of(o) for o in desired}
        desired_daemonsets = [o for o in desired if o.get("kind") == DAEMONSET.kind]
        covering = [*desired_daemonsets] + [
            ds
            for ds in self.client.list(DAEMONSET, namespace=self.namespace)
            if component_of(ds) == driver and not mine(ds)
        ]
        changes: list[Change] = []
        handed: set[ObjectRef] = set()
        stranded: set[ObjectRef] = set()
        for ds in self.applier.owned_objects(mine):
            if ds.get("kind") != DAEMONSET.kind or ref_of(ds) in wanted:
                continue
            if is_deleting(ds):
                continue
            outcome = (
                await hand_over(self.client, ds, desired_daemonsets)
                if desired_daemonsets
                else HandOver.NONE
            )
            if outcome is HandOver.HANDED:
                handed.add(ref_of(ds))  # deleted already, orphaning its pods
                changes.append(Change("deleted", describe(ds), driver))
            elif outcome is HandOver.WAIT:
                stranded.add(ref_of(ds))  # until its pods on nodes it left are gone
            elif stranding and nodes_only_served_by(ds, covering, self.client.list(NODE)):
                stranded.add(ref_of(ds))

        def keep(obj: Object) -> bool:
            if obj.get("kind") == DAEMONSET.kind:
                return ref_of(obj) in handed or ref_of(obj) in stranded
            return bool(stranded)  # its pods still run under this ServiceAccount

        return changes + await self.applier.prune(wanted, mine, keep=keep)

    # -- status --------------------------------------------------------------------------

    def _status(
        self,
        obj: Object,
        *,
        readiness: OperandReadiness | None = None,
        problems: Sequence[tuple[str, str]] = (),
        ignored: str | None = None,
    ) -> NVIDIADriverStatus:
        return driver_status(
            obj.get("status"),
            namespace=self.namespace,
            generation=generation_of(obj),
            readiness=readiness,
            problems=problems,
            ignored=ignored,
        )
