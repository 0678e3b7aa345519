"""The upgrade controller: moves each node on as soon as the event that allows it arrives.

Two controllers share one set of informers:

* **driver-upgrade** (one request per node, several workers): everything a node does on its
  own, from noticing its driver is outdated to uncordoning it. It runs when the node, a pod
  on it, its driver DaemonSet or revision, a PodDisruptionBudget (for a node being drained)
  or the policy changes, and requeues only for a timeout.
* **driver-upgrade-pool** (one request, one worker): admission, the one step that weighs
  nodes against each other (maxParallelUpgrades, maxUnavailable), then status and metrics.
  Being a single request, two admissions never run at once; and it waits until the cache
  shows every node it admitted before (`WriteTracker`), so it never counts from a view
  older than its own last decision. Every other step keeps or lowers what the limits count,
  so a view that lags behind those can only make admission more careful, never less.

State lives only on the nodes (labels and annotations, written with a compare-and-set on
the state label) and in the objects themselves. A restarted operator rebuilds everything
from its first list and carries on where the cluster says it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import pydantic

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    NVIDIA_DRIVER_OWNER_LABEL,
    DriverUpgradePolicySpec,
    NVIDIADriverUpgradePolicySpec,
    UpgradeState,
    active_cluster_policy,
    pod_spec_targets,
    template_pod_spec,
)
from components.upgrade._limits import Counts, admit, counts
from components.upgrade._metrics import UpgradeMetrics, upgrade_metrics_for
from components.upgrade._model import (
    NodeView,
    PodView,
    is_driver_pod,
    is_validator_pod,
    newest_revision,
    node_view,
    pdb_view,
    pick_driver_pod,
    pod_view,
)
from components.upgrade._names import (
    CLUSTER_POLICY,
    CONTROLLER_REVISION,
    DAEMONSET,
    DRIVER_KERNEL_ANNOTATION,
    EVENT_REASON,
    IN_PROGRESS,
    NODE,
    NODE_ANNOTATIONS,
    NVIDIA_DRIVER,
    PDB,
    POD,
    STATE_LABEL,
    STATUS_FIELD_MANAGER,
)
from components.upgrade._patches import transition_patch
from components.upgrade._pin import PinChange, pin_change
from components.upgrade._planner import (
    DEFAULT_VALIDATION_TIMEOUT,
    NodeContext,
    Step,
    Transition,
    cleanup,
    plan_node,
)
from components.upgrade._status import status_body, upgrade_status
from components.upgrade._tracker import WriteTracker
from reconciler import (
    NORMAL,
    OWNER_INDEX,
    WARNING,
    Eviction,
    Funcs,
    Informer,
    Invalid,
    Manager,
    NotFound,
    Object,
    Request,
    Result,
    annotations_of,
    label_index_name,
    labels_of,
    name_of,
    namespace_of,
    owner_references_of,
)
from reconciler import Conflict as ApiConflict

log = logging.getLogger("components.upgrade")

S = UpgradeState
NODE_CONTROLLER = "driver-upgrade"
POOL_CONTROLLER = "driver-upgrade-pool"
POOL_REQUEST = Request("", "driver-upgrade")

POD_NODE_INDEX = "upgrade:node"
DRIVER_POD_INDEX = "upgrade:driver"
_MAX_HOPS = 12
"""Transitions taken back to back in one reconcile when nothing else needs to happen
between them (cordon -> no jobs to wait for -> no GPU pods -> restart the driver)."""

_POD_STATES = frozenset(s.value for s in IN_PROGRESS - {S.CORDON_REQUIRED, S.UNCORDON_REQUIRED})
"""States in which any pod on the node may allow the next step."""
_CLEARING_STATES = frozenset(
    s.value for s in IN_PROGRESS - {S.VALIDATION_REQUIRED, S.UNCORDON_REQUIRED}
)
"""States from which a reconcile may reach a decision that reads pods' volumes (emptyDir
data needs consent to be lost), counting the transitions it chains."""


def _pod_node(obj: Object) -> Iterable[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


@dataclass(frozen=True, slots=True)
class Pool:
    """The nodes one upgrade policy governs: the ClusterPolicy's, or one NVIDIADriver's."""

    kind: str
    name: str
    obj: Object
    policy: DriverUpgradePolicySpec
    enabled: bool
    precompiled: bool = False
    """The policy wants precompiled drivers (`usePrecompiled`)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


class _Views:
    """Views of cached objects, kept while the object is unchanged (same uid and
    resourceVersion): a reconcile reads the same pods and nodes many times over."""

    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit
        self._pods: dict[tuple[str, str], PodView] = {}
        self._nodes: dict[tuple[str, str], NodeView] = {}

    def pod(self, obj: Object) -> PodView:
        meta = obj["metadata"]
        key = (str(meta.get("uid") or meta.get("name")), str(meta.get("resourceVersion") or ""))
        view = self._pods.get(key)
        if view is None:
            if len(self._pods) >= self._limit:
                self._pods.clear()
            view = self._pods[key] = pod_view(obj)
        return view

    def node(self, obj: Object) -> NodeView:
        meta = obj["metadata"]
        key = (str(meta.get("name")), str(meta.get("resourceVersion") or ""))
        view = self._nodes.get(key)
        if view is None:
            if len(self._nodes) >= self._limit:
                self._nodes.clear()
            view = self._nodes[key] = node_view(obj)
        return view


def _operator_pod_from_env() -> tuple[str, str] | None:
    """Our own pod, from the downward API (`POD_NAME`), or in a pod the hostname (which
    Kubernetes sets to the pod's name)."""
    name = os.environ.get("POD_NAME")
    if not name and os.environ.get("KUBERNETES_SERVICE_HOST"):
        name = os.environ.get("HOSTNAME")
    namespace = os.environ.get("POD_NAMESPACE") or os.environ.get("OPERATOR_NAMESPACE")
    return (namespace, name) if name and namespace else None


class UpgradeController:
    """Registers the driver-upgrade controllers (and their informers) on a manager."""

    def __init__(
        self,
        manager: Manager,
        *,
        namespace: str,
        workers: int = 16,
        operator_pod: tuple[str, str] | None = None,
        auto_upgrade_gauge: Any = None,
        validation_timeout: float = DEFAULT_VALIDATION_TIMEOUT,
        expectation_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        event_component: str = "gpu-operator",
    ) -> None:
        self.namespace = namespace
        self.client = manager.client
        self.cache = manager.cache
        self.clock = clock
        self.validation_timeout = validation_timeout
        self.operator_pod = operator_pod if operator_pod is not None else _operator_pod_from_env()
        self.recorder = manager.event_recorder(event_component)
        self.metrics: UpgradeMetrics = upgrade_metrics_for(
            manager.registry, auto_upgrade_enabled=auto_upgrade_gauge
        )
        self.tracker = WriteTracker(timeout=expectation_timeout)
        """Every node write: a node's reconcile waits until its cache shows its last one."""
        self.pod_writes = WriteTracker(timeout=expectation_timeout)
        """Driver pod annotations: written again only once the cache shows the last one."""
        self.admissions = WriteTracker(timeout=expectation_timeout)
        """Admission's writes: the next admission waits until the cache shows them all."""
        self._waits: dict[str, str] = {}
        self._blocked: dict[str, str] = {}
        self._local_storage: dict[str, bool] = {}
        self.views = _Views()
        self._status_writers: dict[tuple[str, str], _StatusWriter] = {}
        self._policies: dict[tuple[str, str, str], tuple[DriverUpgradePolicySpec, bool]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

        ns = namespace
        self.nodes = manager.informer(NODE, index_labels=[STATE_LABEL, KERNEL_LABEL])
        self.pods = manager.informer(
            POD,
            indexers={
                POD_NODE_INDEX: _pod_node,
                DRIVER_POD_INDEX: lambda o: (
                    ("driver",) if namespace_of(o) == ns and is_driver_pod(labels_of(o)) else ()
                ),
            },
        )
        self.daemonsets = _scoped_informer(manager, DAEMONSET, ns)
        self.revisions = _scoped_informer(manager, CONTROLLER_REVISION, ns)
        self.pdbs = manager.informer(PDB)
        self.cluster_policies = manager.informer(CLUSTER_POLICY)
        self.nvidia_drivers = manager.informer(NVIDIA_DRIVER)

        self.node_controller = manager.controller(
            NODE_CONTROLLER, self.reconcile_node, max_concurrent_reconciles=workers
        )
        self.pool_controller = manager.controller(POOL_CONTROLLER, self.reconcile_pools)
        self._watch()

    # -- watches -------------------------------------------------------------------------

    def _watch(self) -> None:
        nc, pc = self.node_controller, self.pool_controller
        node_changed = Funcs(update=_node_changed)
        nc.watch(self.nodes, lambda o: (Request("", name_of(o)),), node_changed)
        nc.watch(self.pods, self._pod_to_node)
        nc.watch(self.daemonsets, self._daemonset_to_nodes)
        nc.watch(self.revisions, self._revision_to_nodes)
        nc.watch(self.pdbs, self._nodes_in_states(S.DRAIN_REQUIRED, S.UPGRADE_FAILED))
        policy_changed = Funcs(update=_spec_changed)
        nc.watch(self.cluster_policies, lambda o: self._managed_nodes(), policy_changed)
        nc.watch(self.nvidia_drivers, lambda o: self._managed_nodes(), policy_changed)

        pool = lambda o: (POOL_REQUEST,)  # noqa: E731
        pc.watch(self.nodes, pool, node_changed)
        pc.watch(
            self.pods,
            pool,
            Funcs(create=self._is_driver, update=self._driver_moved, delete=self._is_driver),
        )
        pc.watch(self.daemonsets, pool, Funcs(update=_spec_or_labels_changed))
        pc.watch(self.cluster_policies, pool)
        pc.watch(self.nvidia_drivers, pool)

    def _is_driver(self, obj: Object) -> bool:
        return namespace_of(obj) == self.namespace and is_driver_pod(labels_of(obj))

    def _driver_moved(self, old: Object, new: Object) -> bool:
        if not (self._is_driver(old) or self._is_driver(new)):
            return False
        return (
            _pod_node(old) != _pod_node(new)
            or owner_references_of(old) != owner_references_of(new)
            or bool(old["metadata"].get("deletionTimestamp"))
            != bool(new["metadata"].get("deletionTimestamp"))
        )

    def _pod_to_node(self, obj: Object) -> Iterable[Request]:
        node_name = (obj.get("spec") or {}).get("nodeName")
        if not node_name:
            return ()
        name = str(node_name)
        labels = labels_of(obj)
        if (namespace_of(obj) == self.namespace and is_driver_pod(labels)) or is_validator_pod(
            labels
        ):
            return (Request("", name),)
        node = self.cache.get(NODE, name)
        if node is not None and labels_of(node).get(STATE_LABEL) in _POD_STATES:
            return (Request("", name),)
        return ()

    def _nodes_of_daemonset(self, uid: str) -> list[Request]:
        pods = self.cache.list(POD, index=(OWNER_INDEX, uid)) if uid else []
        return [Request("", n) for p in pods for n in _pod_node(p)]

    def _daemonset_to_nodes(self, obj: Object) -> Iterable[Request]:
        if not is_driver_pod(_template_labels(obj)):
            return ()
        requests = self._nodes_of_daemonset(str(obj["metadata"].get("uid") or ""))
        kernel = _pinned_kernel_of(obj)
        if kernel is not None:
            # A precompiled driver DaemonSet for a kernel: nodes that run that kernel may
            # now be pinned to it.
            index = label_index_name(KERNEL_LABEL)
            requests.extend(
                Request("", name_of(n)) for n in self.cache.list(NODE, index=(index, kernel))
            )
        return requests

    def _revision_to_nodes(self, obj: Object) -> Iterable[Request]:
        out: list[Request] = []
        for ref in owner_references_of(obj):
            if ref.get("kind") == "DaemonSet":
                out.extend(self._nodes_of_daemonset(str(ref.get("uid") or "")))
        return out

    def _nodes_in_states(self, *states: UpgradeState) -> Callable[[Object], Iterable[Request]]:
        index = label_index_name(STATE_LABEL)

        def mapping(_obj: Object) -> Iterable[Request]:
            return [
                Request("", name_of(n))
                for state in states
                for n in self.cache.list(NODE, index=(index, state.value))
            ]

        return mapping

    def _managed_nodes(self) -> Iterable[Request]:
        names = {n for p in self._driver_pods() for n in _pod_node(p)}
        index = label_index_name(STATE_LABEL)
        for state in S:
            if state is not S.UNKNOWN:
                names.update(name_of(n) for n in self.cache.list(NODE, index=(index, state.value)))
        return [Request("", n) for n in sorted(names)]

    # -- reading the cache ---------------------------------------------------------------

    def _driver_pods(self) -> list[Object]:
        return self.cache.list(POD, index=(DRIVER_POD_INDEX, "driver"))

    def _cluster_policy(self) -> Object | None:
        return active_cluster_policy(self.cache.list(CLUSTER_POLICY))

    def _parse(
        self, kind: str, obj: Object, raw: Any, model: type[DriverUpgradePolicySpec]
    ) -> tuple[DriverUpgradePolicySpec, bool]:
        # The spec's generation, not the resourceVersion: status writes do not change it.
        meta = obj["metadata"]
        key = (kind, str(meta.get("uid") or name_of(obj)), str(meta.get("generation") or ""))
        found = self._policies.get(key)
        if found is None:
            try:
                found = (model.from_dict(raw if isinstance(raw, dict) else {}), True)
            except pydantic.ValidationError as exc:
                log.warning(
                    "%s %s: invalid driver upgradePolicy, upgrades paused: %s",
                    kind,
                    name_of(obj),
                    exc,
                )
                found = (model(), False)
            if len(self._policies) > 64:
                self._policies.clear()
            self._policies[key] = found
        return found

    def _pool_for_daemonset(self, ds: Object | None) -> Pool | None:
        """The pool a driver DaemonSet belongs to: its NVIDIADriver's, or the ClusterPolicy's."""
        if ds is None:
            return None
        owner = labels_of(ds).get(NVIDIA_DRIVER_OWNER_LABEL)
        return self._nvidia_driver_pool(owner) if owner else self._cluster_policy_pool()

    def _nvidia_driver_pool(self, name: str) -> Pool | None:
        nvd = self.cache.get(NVIDIA_DRIVER, name)
        if nvd is None or (nvd.get("metadata") or {}).get("deletionTimestamp"):
            return None
        raw = (nvd.get("spec") or {}).get("upgradePolicy")
        policy, valid = self._parse("NVIDIADriver", nvd, raw, NVIDIADriverUpgradePolicySpec)
        precompiled = (nvd.get("spec") or {}).get("usePrecompiled") is True
        return Pool("NVIDIADriver", name, nvd, policy, valid and policy.auto_upgrade, precompiled)

    def _cluster_policy_pool(self) -> Pool | None:
        cp = self._cluster_policy()
        if cp is None:
            return None
        spec = cp.get("spec") or {}
        driver = spec.get("driver") or {}
        if driver.get("useNvidiaDriverCRD") is True:
            return None  # the NVIDIADriver resources govern the drivers
        raw = driver.get("upgradePolicy")
        policy, valid = self._parse("ClusterPolicy", cp, raw, DriverUpgradePolicySpec)
        enabled = (
            valid
            and raw is not None
            and policy.auto_upgrade
            and driver.get("enabled") is not False
            # The reference turns upgrades off for sandbox (VM) workloads.
            and (spec.get("sandboxWorkloads") or {}).get("enabled") is not True
        )
        precompiled = driver.get("usePrecompiled") is True
        return Pool("ClusterPolicy", name_of(cp), cp, policy, enabled, precompiled)

    def _owner_daemonset(self, pod: PodView) -> Object | None:
        if pod.owner_kind != "DaemonSet":
            return None
        ds = self.cache.get(DAEMONSET, pod.owner_name, pod.namespace)
        if ds is None or str(ds["metadata"].get("uid") or "") != pod.owner_uid:
            return None
        return ds

    def _targeting_daemonset(self, node: Object) -> Object | None:
        """For a node without a driver pod (mid-restart): the driver DaemonSet that will put
        one there; failing that, one that would with the pin moved (a node not pinned yet,
        or pinned while precompiled drivers were turned off)."""
        labels = labels_of(node)
        unpinned = {k: v for k, v in labels.items() if k != DRIVER_KERNEL_PIN_LABEL}
        candidates = [labels, unpinned]
        kernel = labels.get(KERNEL_LABEL)
        if kernel:
            candidates.insert(1, {**unpinned, DRIVER_KERNEL_PIN_LABEL: kernel})
        daemonsets = [
            ds
            for ds in sorted(self.cache.list(DAEMONSET, namespace=self.namespace), key=name_of)
            if is_driver_pod(_template_labels(ds))
        ]
        for candidate in candidates:
            for ds in daemonsets:
                if pod_spec_targets(template_pod_spec(ds), candidate):
                    return ds
        return None

    def _target_revision(self, ds: Object | None) -> str | None:
        if ds is None:
            return None
        uid = str(ds["metadata"].get("uid") or "")
        revisions = self.cache.list(CONTROLLER_REVISION, index=(OWNER_INDEX, uid))
        return newest_revision(name_of(ds), revisions)

    # -- the per-node reconcile ----------------------------------------------------------

    async def reconcile_node(self, request: Request) -> Result | None:
        name = request.name
        obj = self.cache.get(NODE, name)
        if obj is None:
            self._forget(name)
            return None
        if self.tracker.behind(name, obj):
            return None  # our last write is on its way; its event brings us back
        pods = [self.views.pod(p) for p in self.cache.list(POD, index=(POD_NODE_INDEX, name))]
        if labels_of(obj).get(STATE_LABEL) in _CLEARING_STATES:
            pods = await self._with_volumes(pods)
        driver = pick_driver_pod(
            p for p in pods if p.namespace == self.namespace and is_driver_pod(p.labels)
        )
        ds = self._owner_daemonset(driver) if driver is not None else None
        if ds is None:
            ds = self._targeting_daemonset(obj)
            if driver is not None and driver.owner_kind != "DaemonSet":
                driver = None  # an orphaned driver pod is nobody's to upgrade
        pool = self._pool_for_daemonset(ds)
        node = self.views.node(obj)
        change = pin_change(
            node,
            driver,
            precompiled=pool.precompiled if pool is not None else None,
            walk_moves_it=pool is not None and pool.enabled,
        )
        if change is not None:
            if await self._write_pin(obj, node, change) is None:
                return Result(requeue=True)
            return None  # the node's update brings us back, pinned
        if pool is None or not pool.enabled:
            step = cleanup(node)
            if step.transition is not None:
                await self._transition(obj, node, step.transition, pool)
            self._set_wait(name, "")
            return None
        ctx = NodeContext(
            node=node,
            driver=driver,
            target_revision=self._target_revision(ds),
            pods=pods,
            pdbs=(
                [pdb_view(p) for p in self.cache.list(PDB)]
                if node.state in (S.DRAIN_REQUIRED, S.UPGRADE_FAILED)
                else ()
            ),
            operator_pod=self.operator_pod,
            precompiled=pool.precompiled,
        )
        return await self._run(obj, ctx, pool)

    async def _write_pin(self, obj: Object, node: NodeView, change: PinChange) -> Object | None:
        """One merge patch of the pin, refused (409) if the node changed since we read it."""
        meta = obj["metadata"]
        body = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "labels": {DRIVER_KERNEL_PIN_LABEL: change.value},
            }
        }
        try:
            written = await self.client.patch(NODE, node.name, body, quiet=True)
        except (ApiConflict, NotFound):
            return None
        self.tracker.record(written)
        if change.value is None:
            message = f"removed the precompiled driver kernel pin: {change.reason}"
        else:
            message = f"pinned to the precompiled driver for kernel {change.value}: {change.reason}"
        log.info("node %s: %s", node.name, message)
        self._event_node(node, NORMAL, message)
        return written

    async def _with_volumes(self, pods: list[PodView]) -> list[PodView]:
        """Pods whose volumes the cache trimmed, with `local_storage` read from the server
        (once per pod: a pod's volumes never change)."""
        out = []
        for pod in pods:
            if pod.volumes_known or not pod.active or pod.daemonset or pod.terminating:
                out.append(pod)
                continue
            local = self._local_storage.get(pod.uid)
            if local is None:
                try:
                    live = await self.client.get_live(POD, pod.name, pod.namespace)
                except NotFound:
                    continue
                local = any("emptyDir" in v for v in (live.get("spec") or {}).get("volumes") or [])
                if len(self._local_storage) > 10_000:
                    self._local_storage.clear()
                self._local_storage[pod.uid] = local
            out.append(replace(pod, local_storage=local, volumes_known=True))
        return out

    def _plan(self, ctx: NodeContext, pool: Pool) -> Step:
        return plan_node(ctx, pool.policy, self.clock(), validation_timeout=self.validation_timeout)

    async def _run(self, obj: Object, ctx: NodeContext, pool: Pool) -> Result | None:
        step = self._plan(ctx, pool)
        for _ in range(_MAX_HOPS):
            acted = await self._side_effects(ctx, step)
            if step.record_kernel and ctx.driver is not None:
                recorded = replace(ctx.driver, kernel=step.record_kernel, kernel_recorded=True)
                ctx = replace(ctx, driver=recorded)
            if step.transition is None or acted:
                break
            written = await self._transition(obj, ctx.node, step.transition, pool)
            if written is None:
                return Result(requeue=True)  # refused: the node moved; read it again
            if written is obj:
                break  # nothing to write
            obj = written
            ctx = replace(ctx, node=node_view(written))
            step = self._plan(ctx, pool)
        else:
            return None
        if (
            step.transition is not None
            and acted
            and await self._transition(obj, ctx.node, step.transition, pool) is None
        ):
            # Pods went in the same step as a transition (a driver restart served a
            # request) and the transition was refused: read the node again.
            return Result(requeue=True)
        self._set_wait(ctx.node.name, self._blocked.get(ctx.node.name) or step.wait)
        if step.requeue_after is not None:
            # A timeout that fires unless an event moves the node first.
            return Result(requeue_after=step.requeue_after + 0.1)
        return None

    async def _side_effects(self, ctx: NodeContext, step: Step) -> bool:
        """Deletes, evictions and pod annotations; True when any pod was asked to go."""
        acted = False
        if step.delete:
            await asyncio.gather(*(self._delete(p) for p in step.delete))
            acted = True
        if step.evict:
            results = await asyncio.gather(
                *(self.client.evict(p.name, p.namespace) for p in step.evict)
            )
            blocked = [
                f"{p.key}: {r.message or 'refused'}"
                for p, r in zip(step.evict, results, strict=True)
                if r.outcome is Eviction.BLOCKED
            ]
            message = ("eviction refused for " + "; ".join(blocked[:3])) if blocked else ""
            if message and self._blocked.get(ctx.node.name) != message:
                self._event_node(ctx.node, WARNING, message)
            if message:
                self._blocked[ctx.node.name] = message
            else:
                self._blocked.pop(ctx.node.name, None)
            acted = acted or len(blocked) < len(step.evict)
        if step.record_kernel and ctx.driver is not None:
            d = ctx.driver
            # A reconcile that runs before our last write of the pod reaches the cache would
            # write the same annotation again.
            if not self.pod_writes.behind(d.name, self.cache.get(POD, d.name, d.namespace)):
                annotations = {DRIVER_KERNEL_ANNOTATION: step.record_kernel}
                with contextlib.suppress(NotFound):
                    written = await self.client.patch(
                        POD,
                        d.name,
                        {"metadata": {"annotations": annotations}},
                        namespace=d.namespace,
                    )
                    self.pod_writes.record(written)
        return acted

    async def _delete(self, pod: PodView) -> None:
        # A failed uid precondition (409) means that pod is gone already, replaced.
        with contextlib.suppress(ApiConflict):
            await self.client.delete(
                POD, pod.name, namespace=pod.namespace, uid=pod.uid or None, missing_ok=True
            )

    async def _transition(
        self,
        obj: Object,
        node: NodeView,
        t: Transition,
        pool: Pool | None,
        *,
        admission: bool = False,
    ) -> Object | None:
        ops = transition_patch(node, t, self.clock())
        if not ops:
            return obj
        try:
            written = await self.client.patch(NODE, node.name, ops, json_patch=True, quiet=True)
        except Invalid as exc:
            # The state label (or an annotation) changed since we read it: re-read.
            log.debug("node %s: transition to %s refused: %s", node.name, t.to, exc)
            return None
        except NotFound:
            return None
        self.tracker.record(written)
        if admission:
            self.admissions.record(written)
        self._blocked.pop(node.name, None)
        before = node.state.value or "unknown"
        after = t.to.value if t.to is not None else "(none)"
        moved_pin = t.pin_kernel is not None and (t.pin_kernel or None) != node.pinned_kernel
        if before != after or moved_pin:
            change = f"{before} -> {after}" if before != after else before
            message = f"{change}: {t.reason}" if t.reason else change
            log.info("node %s: %s", node.name, message)
            type_ = WARNING if t.warning else NORMAL
            self._event_node(node, type_, message)
            if pool is not None:
                self._event(pool.obj, type_, f"node {node.name}: {message}")
        return written

    # -- the pool reconcile: admission, status, metrics ----------------------------------

    async def reconcile_pools(self, request: Request) -> Result | None:
        # Admission is the only step that adds to what the limits count (every other step
        # keeps or lowers in-progress and unavailable), so a cache that shows every earlier
        # admission can only overcount: decide once it does. The events of those writes
        # requeue us; the requeue below only fires if an event was lost.
        if self.admissions.pending(lambda n: self.cache.get(NODE, n)):
            return Result(requeue_after=self.admissions.seconds_left() + 0.05)
        pools, members = self._members()
        totals = {"in_progress": 0, "done": 0, "failed": 0, "available": 0, "pending": 0}
        writes: list[Any] = []
        for key, pool in pools.items():
            views = sorted(members.get(key, {}).values(), key=lambda n: n.name)
            c = counts(views, pool.policy)
            if pool.enabled:
                for k in totals:
                    totals[k] += getattr(c, k)
                writes.extend(self._admit(pool, views, c))
            self._write_status(pool, views, c)
        await asyncio.gather(*writes)
        self.metrics.set(enabled=any(p.enabled for p in pools.values()), **totals)
        return None

    def _members(
        self,
    ) -> tuple[dict[tuple[str, str], Pool], dict[tuple[str, str], dict[str, NodeView]]]:
        pools: dict[tuple[str, str], Pool] = {}
        members: dict[tuple[str, str], dict[str, NodeView]] = {}
        ds_pools: dict[str, Pool | None] = {}

        def pool_of(ds: Object | None) -> Pool | None:
            if ds is None:
                return None
            uid = str(ds["metadata"].get("uid") or "")
            if uid not in ds_pools:
                ds_pools[uid] = self._pool_for_daemonset(ds)
            return ds_pools[uid]

        # Every policy is a pool, even with no nodes yet (its status and metrics say so).
        for p in [
            self._cluster_policy_pool(),
            *(self._nvidia_driver_pool(name_of(o)) for o in self.cache.list(NVIDIA_DRIVER)),
        ]:
            if p is not None:
                pools[p.key] = p

        assigned: set[str] = set()
        by_node: dict[str, list[PodView]] = {}
        for raw in self._driver_pods():
            pv = self.views.pod(raw)
            if pv.node:
                by_node.setdefault(pv.node, []).append(pv)
        for node_name, candidates in by_node.items():
            driver = pick_driver_pod(candidates)
            if driver is None:
                continue
            pool = pool_of(self._owner_daemonset(driver))
            node = self.cache.get(NODE, node_name)
            if pool is None or node is None:
                continue
            pools.setdefault(pool.key, pool)
            members.setdefault(pool.key, {})[node_name] = self.views.node(node)
            assigned.add(node_name)
        # Nodes in the middle of a walk without a driver pod (it is being replaced) still
        # count: they are cordoned and in progress.
        index = label_index_name(STATE_LABEL)
        for state in IN_PROGRESS:
            for node in self.cache.list(NODE, index=(index, state.value)):
                name = name_of(node)
                if name in assigned:
                    continue
                pool = pool_of(self._targeting_daemonset(node))
                if pool is None:
                    pool = next(iter(pools.values()), None)
                if pool is None:
                    continue
                members.setdefault(pool.key, {})[name] = self.views.node(node)
                assigned.add(name)
        return pools, members

    def _admit(self, pool: Pool, views: list[NodeView], c: Counts) -> list[Any]:
        chosen = admit(views, pool.policy)
        by_name = {v.name: v for v in views}
        cap = c.max_parallel or "unlimited"
        writes = []
        for i, name in enumerate(chosen):
            reason = (
                f"upgrade started ({c.in_progress + i + 1} in progress, maxParallelUpgrades "
                f"{cap}, maxUnavailable {c.max_unavailable})"
            )
            node = by_name[name]
            obj = self.cache.get(NODE, name)
            if obj is None:
                continue
            writes.append(self._start(obj, node, reason, pool))
        return writes

    async def _start(self, obj: Object, node: NodeView, reason: str, pool: Pool) -> None:
        """Admit one node (upgrade-required -> cordon-required), remembered as an admission:
        the next admission waits until the cache shows it."""
        t = Transition(S.CORDON_REQUIRED, reason)
        await self._transition(obj, node, t, pool, admission=True)

    def _write_status(self, pool: Pool, views: list[NodeView], c: Counts) -> None:
        status = upgrade_status(views, c, auto_upgrade=pool.enabled, waits=self._waits)
        body = status_body(pool.obj, status)
        if body is None:
            return
        writer = self._status_writers.get(pool.key)
        if writer is None:
            writer = self._status_writers[pool.key] = _StatusWriter(self.client, pool)
        writer.submit(body)

    # -- bookkeeping ---------------------------------------------------------------------

    def _set_wait(self, name: str, message: str) -> None:
        if self._waits.get(name, "") == message:
            return
        if message:
            self._waits[name] = message
        else:
            self._waits.pop(name, None)
        self.pool_controller.enqueue(POOL_REQUEST)

    def _forget(self, name: str) -> None:
        self._waits.pop(name, None)
        self._blocked.pop(name, None)

    def _event_node(self, node: NodeView, type_: str, message: str) -> None:
        ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "uid": node.uid}}
        self._event(ref, type_, message)

    def _event(self, obj: Object, type_: str, message: str) -> None:
        """Fire and forget: an event must never slow a step down."""
        task = asyncio.get_running_loop().create_task(
            self.recorder.event(obj, type_, EVENT_REASON, message)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _StatusWriter:
    """Writes one policy's `status.upgrade` off the reconcile's path: at most one write in
    flight, and while one is, only the newest status waits for its turn. Admission never
    waits behind a status write, and a burst of changes costs a couple of writes."""

    def __init__(self, client: Any, pool: Pool) -> None:
        self._client = client
        self._name = f"{pool.kind} {pool.name}"
        self._pending: Object | None = None
        self._task: asyncio.Task[None] | None = None

    def submit(self, body: Object) -> None:
        self._pending = body
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending is not None:
            body, self._pending = self._pending, None
            try:
                await self._client.apply_status(body, field_manager=STATUS_FIELD_MANAGER)
            except (NotFound, Invalid, ApiConflict) as exc:
                log.debug("%s: status not written: %s", self._name, exc)
            except Exception as exc:  # a status write must never take anything down
                log.warning("%s: status not written: %s", self._name, exc)


# -- helpers -------------------------------------------------------------------------------


def _pinned_kernel_of(ds: Object) -> str | None:
    """The kernel a precompiled driver DaemonSet serves (what it selects the pin on)."""
    kernel = (template_pod_spec(ds).get("nodeSelector") or {}).get(DRIVER_KERNEL_PIN_LABEL)
    return str(kernel) if kernel is not None else None


def _template_labels(ds: Object) -> dict[str, str]:
    labels = (((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _ready_condition(obj: Object) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _ours(obj: Object) -> dict[str, str]:
    a = annotations_of(obj)
    return {k: a[k] for k in NODE_ANNOTATIONS if k in a}


def _node_changed(old: Object, new: Object) -> bool:
    """Updates that can matter to the upgrade: labels (state, skip, kernel, NFD, ...), our
    annotations, the cordon, readiness. Heartbeats and image lists are not."""
    return (
        labels_of(old) != labels_of(new)
        or _ours(old) != _ours(new)
        or bool((old.get("spec") or {}).get("unschedulable"))
        != bool((new.get("spec") or {}).get("unschedulable"))
        or _ready_condition(old) != _ready_condition(new)
    )


def _spec_changed(old: Object, new: Object) -> bool:
    return old.get("spec") != new.get("spec") or bool(
        old["metadata"].get("deletionTimestamp")
    ) != bool(new["metadata"].get("deletionTimestamp"))


def _spec_or_labels_changed(old: Object, new: Object) -> bool:
    return old.get("spec") != new.get("spec") or labels_of(old) != labels_of(new)


def _scoped_informer(manager: Manager, gvk: Any, namespace: str) -> Informer:
    """The informer for `gvk` in `namespace`, or the cluster-wide one if another controller
    registered that already (it covers the namespace too)."""
    try:
        return manager.informer(gvk, namespace=namespace)
    except ValueError:
        informer = manager.cache.informer_for(gvk)
        if informer.namespace not in (None, namespace) or informer.label_selector:
            raise
        return informer
