"""The ClusterPolicy controller: from the oldest ClusterPolicy, the whole GPU stack.

One reconcile, level-based, all from the cache:

1. the oldest ClusterPolicy is active; any other gets state `ignored` and a condition
   naming the active one, and nothing else is done for it;
2. the ClusterView (GPU nodes, whether the ServiceMonitor CRD exists, the owner reference)
   is built and every enabled operand rendered, in the reference's order;
3. each rendered object is server-side applied (`_operand_sync`), skipped when the cached
   copy already carries the desired hash; what we own but no longer want is deleted (a driver
   DaemonSet only once no node depends on it alone);
4. readiness is judged from the cached DaemonSets, their pods and ControllerRevisions;
5. the status is written only when it changed (the turn to `ready` once the driver
   upgrade's own writes have landed, `_ready_hold`); each change becomes an Event; the
   `gpu_operator_*` metrics are set.

A second reconcile that finds nothing to do writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import pydantic

from components.api import (
    ClusterPolicy,
    active_cluster_policy,
    unsupported_fields,
)
from components.controllers import _informers
from components.controllers._apply import (
    Applier,
    Change,
    controller_owner,
)
from components.controllers._constants import (
    CLUSTER_POLICY,
    CRD,
    DAEMONSET,
    NODE,
    SERVICE_MONITOR_CRD,
)
from components.controllers._filters import (
    DELETED,
    NODE_CHANGED,
    POD_CHANGED,
    ROLLOUT_FINISHED,
    in_namespace,
)
from components.controllers._informers import GPU_NODE_INDEX
from components.controllers._label_wait import LabelWait
from components.controllers._operand_sync import OperandSync
from components.controllers._policies import parse_spec, spec_key
from components.controllers._ready_hold import RECHECK_SECONDS, ReadyHold
from components.controllers._status import (
    Findings,
    ignored_status,
    node_agent_summary,
    policy_status,
)
from components.controllers._status_writer import StatusWriter
from components.controllers._view import (
    GpuNodeViews,
    any_nfd_labels,
    config_map_data,
    config_map_keys,
    views_of_gpu_nodes,
)
from components.metrics import OperatorMetrics, ReconciliationStatus
from components.operands import OPERANDS, ClusterView, Operand
from reconciler import (
    NORMAL,
    Controller,
    EventRecorder,
    GenerationChanged,
    Informer,
    Manager,
    Object,
    Request,
    Result,
    generation_of,
    name_of,
    namespace_of,
    owner_reference,
)
from reconciler.kinds import CONFIG_MAP

log = logging.getLogger("components.controllers.clusterpolicy")

NAME = "clusterpolicy-controller"

Parsed = tuple[tuple[str, str, str], ClusterPolicy | pydantic.ValidationError]
"""A policy's spec key and what parsing it gave."""

PACE_SECONDS = 1.0
"""At most this often per policy (and status written at most as often): during a rollout
every pod event asks for a reconcile, and a status a second old is fresh enough to watch
(the reference requeues every 5 s while not ready). At 0.25 s the reconciles of a
2,000-node rollout took a quarter of the operator's busy CPU."""
PACE_SHARE = 0.0015
"""At most about this share of a core for one policy's reconciles under a burst of events.
A reconcile costs about 6.5 ms of CPU at 1,000 nodes and 15 ms at 2,000: one every 4.3 s
and (capped) 5 s of a rollout, about as often as the progress in its status may be written
(`STATUS_PROGRESS_SECONDS`), so few turns compute a status that is not written. Those paced
turns only report progress: the turns a rollout waits on (the node labels landed, a
DaemonSet rolled out), a repair (an object of ours deleted) and an admin's edit of the
policy or of a ConfigMap in its namespace come at once, unpaced. At 1% of a core the
turns of a 1,000-node rollout were a tenth of the operator's CPU to ready, at 0.4% still
6.5% of its profile."""
PACE_MAX_SECONDS = 5.0
"""And never less often than this while events come. The share binds from about 400 nodes
(a reconcile of 4 ms or more); beyond, the status lags by a few seconds rather than the
reconciles of a rollout costing the square of the cluster's size."""

STATUS_PROGRESS_SECONDS = 5.0
"""A status that differs from the stored one only in progress (counts, messages, the nodes
named as not ready) is written at most this often; a change of state, condition or an
operand's readiness at once. A 1,000-node rollout wrote the policy's status 85 times, each
a write of the whole policy through its schema (about 20 ms of the API server's CPU) and an
event to every watcher of policies."""

INVALID_SPEC = "InvalidSpec"
READY = "ready"


class ClusterPolicyController:
    def __init__(
        self,
        manager: Manager,
        applier: Applier,
        metrics: OperatorMetrics,
        *,
        namespace: str,
        operands: Sequence[Operand] | None = None,
        recorder: EventRecorder | None = None,
        set_auto_upgrade: bool = True,
        mig_blocked: Callable[[], Mapping[str, str]] | None = None,
        settling: Callable[[], bool] | None = None,
    ) -> None:
        """`set_auto_upgrade=False` leaves `gpu_operator_driver_auto_upgrade_enabled` to
        the upgrade controller (which also knows the NVIDIADrivers' policies).
        `mig_blocked` says which nodes' MIG changes wait for pods, and why (the MIG-change
        clearing controller's answer; call `requeue_active` when it changes).
        `settling` says whether other work that reports into the policy (the driver
        upgrade's) is under way: the policy's turn to `ready` waits for it (`ReadyHold`)."""
        self.manager = manager
        self.client = manager.client
        self.applier = applier
        self.metrics = metrics
        self.namespace = namespace
        self.operands = OperandSync(
            self.client,
            applier,
            OPERANDS if operands is None else operands,
            namespace,
            _informers.daemonset_pods(manager, namespace),
        )
        self.recorder = recorder or manager.event_recorder("gpu-operator")
        self.controller: Controller | None = None
        self._in_namespace = in_namespace(namespace)
        self.set_auto_upgrade = set_auto_upgrade
        self.mig_blocked = mig_blocked
        self._parsed: Parsed | None = None
        self._gpu_node_views = GpuNodeViews()
        self._label_wait = LabelWait()
        self.status = StatusWriter(
            self.client, self.recorder, CLUSTER_POLICY, report_ready_changes=True
        )
        self.ready_hold = ReadyHold(settling, lambda: self.requeue_active(unpaced=True))

    # -- wiring --------------------------------------------------------------------------

    def setup(self) -> Controller:
        m = self.manager
        # One key whose reconcile reads every node and operand pod: under the burst of a
        # rollout, events collapse into a reconcile every so often instead of one each.
        c = m.controller(
            NAME,
            self,
            min_interval=PACE_SECONDS,
            busy_fraction=PACE_SHARE,
            max_interval=PACE_MAX_SECONDS,
        )
        c.watch(_informers.cluster_policies(m), self._all_policies, GenerationChanged())
        c.watch(_informers.nodes(m), self._node_changed, NODE_CHANGED)
        c.watch(_informers.service_monitor_crd(m), self._all_policies)
        c.watch(_informers.config_maps(m, self.namespace), self._config_map_changed)
        c.watch(_informers.pods(m), self._via_daemonset, self._in_namespace, POD_CHANGED)
        c.watch(_informers.controller_revisions(m, self.namespace), self._via_daemonset)
        for informer in self.applier.owned_informers:
            self._watch_owned(c, informer)
        self.applier.on_new_informer(lambda informer: self._watch_owned(c, informer))
        daemonsets = _informers.owned(m, DAEMONSET, self.namespace)
        c.watch(daemonsets, self._rollout_finished, ROLLOUT_FINISHED)
        self.controller = c
        return c

    def _watch_owned(self, c: Controller, informer: Informer) -> None:
        c.watch(informer, self._owner_policy)
        c.watch(informer, self._repair_owner, DELETED)

    def _at_once(self, requests: list[Request]) -> list[Request]:
        """`requests` reconciled without waiting for their paced turn."""
        if self.controller is not None:
            for request in requests:
                self.controller.enqueue(request, unpaced=True)
        return requests

    def _repair_owner(self, obj: Object) -> list[Request]:
        """Its policy, at once: an object of ours deleted behind our back is recreated now,
        not at the next paced turn (1-5 s later)."""
        return self._at_once(self._owner_policy(obj))

    def requeue_active(self, *, unpaced: bool = False) -> None:
        """Reconcile the active policy soon (something its status reports changed); at once
        with `unpaced`, not at its paced turn."""
        if self.controller is not None:
            for request in self._active_policy({}):
                self.controller.enqueue(request, unpaced=unpaced)

    def _rollout_finished(self, ds: Object) -> list[Request]:
        """Its policy, at once: the operand may have just turned ready, the news a paced
        reconcile would otherwise give 1-5 s late."""
        self._at_once(self._owner_policy(ds))
        return []

    def _all_policies(self, obj: Object) -> list[Request]:
        """Every ClusterPolicy (one coming or going may change which is active), and the
        one the event is about, gone from the cache when deleted; at once, not at their
        paced turn: an admin's edit is acted on as soon as it is seen."""
        names = {name_of(p) for p in self.client.list(CLUSTER_POLICY)}
        if obj.get("kind") == CLUSTER_POLICY.kind:
            names.add(name_of(obj))
        return self._at_once([Request("", n) for n in sorted(names)])

    def _active_policy(self, _: Object) -> list[Request]:
        active = active_cluster_policy(self.client.list(CLUSTER_POLICY))
        return [Request("", name_of(active))] if active is not None else []

    def _config_map_changed(self, _: Object) -> list[Request]:
        """The active policy, at once: a ConfigMap the operands render from (a device-plugin
        config, a driver's files) was edited, or one of ours deleted."""
        return self._at_once(self._active_policy({}))

    def _node_changed(self, node: Object) -> list[Request]:
        """The active policy; at once, not at its paced turn, when the node brought the
        last labels its new DaemonSets waited for (`_label_wait`)."""
        requests = self._active_policy(node)
        gone = self.client.get(NODE, name_of(node)) is None
        last = self._label_wait.forget(name_of(node)) if gone else self._label_wait.landed(node)
        return self._at_once(requests) if last else requests

    def _owner_policy(self, obj: Object) -> list[Request]:
        ref = controller_owner(obj)
        if ref is None:
            return []
        if ref.get("kind") == CLUSTER_POLICY.kind:
            return [Request("", str(ref.get("name")))]
        return self._active_policy(obj)  # e.g. a driver DaemonSet of an NVIDIADriver

    def _via_daemonset(self, obj: Object) -> list[Request]:
        """A pod or ControllerRevision: the policy that owns its DaemonSet."""
        out: list[Request] = []
        for ref in obj.get("metadata", {}).get("ownerReferences") or ():
            if ref.get("kind") != DAEMONSET.kind:
                continue
            ds = self.client.get(DAEMONSET, str(ref.get("name")), namespace_of(obj))
            if ds is not None:
                out += self._owner_policy(ds)
        return out

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        self.metrics.reconciliation_total.inc()
        try:
            return await self._reconcile(request)
        except Exception:
            self.metrics.reconciliation_failed_total.inc()
            self.metrics.set_status(ReconciliationStatus.ERROR)
            raise

    async def _reconcile(self, request: Request) -> Result | None:
        policies = self.client.list(CLUSTER_POLICY)
        active = active_cluster_policy(policies)
        obj = self.client.get(CLUSTER_POLICY, request.name)
        if active is None:
            self.metrics.set_status(ReconciliationStatus.NO_POLICY)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            log.debug("ClusterPolicy %s: gone (garbage collection removes what it owned)", request)
            return None
        assert active is not None
        if name_of(active) != name_of(obj):
            await self._ignore(obj, active)
            return None
        # The status (and `was_ready` below) as we last wrote it, should the cache lag.
        obj = self.status.latest(obj)
        parsed = self._parse(obj)
        if isinstance(parsed, pydantic.ValidationError):
            await self._invalid(obj, parsed)
            return None
        policy = parsed
        nodes = self.client.list(NODE)
        with_gpu = self.client.list(NODE, index=(GPU_NODE_INDEX, "true"))
        view = self._view(obj, with_gpu)
        # Asked after the prerequisites were written: the labels may have landed meanwhile.
        sync = await self.operands.sync(
            policy,
            view,
            label_wait=lambda: self._label_wait.remaining(self.client.list(NODE), policy),
        )
        readiness, naming = await self.operands.name_unready(
            policy, sync, self.operands.readiness(policy, sync)
        )
        findings = Findings(
            namespace=self.namespace,
            generation=generation_of(obj),
            operands=readiness,
            problems=sync.problems,
            # A GPU is known by an NFD label: with one GPU node, there are NFD labels.
            has_nfd_labels=bool(with_gpu) or any_nfd_labels(nodes),
            gpu_nodes=len(with_gpu),
            unsupported=unsupported_fields(policy.spec),
            node_agent=node_agent_summary(nodes) if policy.spec.node_agent.enabled else None,
            mig_blocked=self.mig_blocked() if self.mig_blocked is not None else {},
        )
        status = policy_status(obj.get("status"), findings)
        await self._report(obj, sync.changes)
        was_ready = (obj.get("status") or {}).get("state") == READY
        if self.ready_hold.holds(was_ready=was_ready, is_ready=status.state == READY):
            log.debug("ClusterPolicy %s: ready once the upgrade's own writes land", request)
            return Result(requeue_after=self.ready_hold.seconds_left() + RECHECK_SECONDS)
        wait = await self.status.write(obj, status, progress_every=STATUS_PROGRESS_SECONDS)
        self._set_metrics(policy, findings, status.state)
        # Held DaemonSets come with the node events that label their nodes, or at the end of
        # the wait; a stalled DaemonSet's nodes are named at the end of its stall.
        waits = [w for w in (wait, sync.hold_seconds, naming) if w]
        return Result(requeue_after=min(waits)) if waits else None

    def _parse(self, obj: Object) -> ClusterPolicy | pydantic.ValidationError:
        """The policy as a model, parsed once per spec (not once per event)."""
        key = spec_key(obj)
        if key is not None and self._parsed is not None and self._parsed[0] == key:
            return self._parsed[1]
        try:
            parsed: ClusterPolicy | pydantic.ValidationError = parse_spec(obj)
        except pydantic.ValidationError as exc:
            parsed = exc
        self._parsed = (key, parsed) if key is not None else None
        return parsed

    def _view(self, obj: Object, with_gpu: Sequence[Object]) -> ClusterView:
        crds = self.client.list(CRD)
        config_maps = self.client.list(CONFIG_MAP, namespace=self.namespace)
        return ClusterView(
            namespace=self.namespace,
            gpu_nodes=views_of_gpu_nodes(with_gpu, self._gpu_node_views),
            has_service_monitor_crd=any(name_of(c) == SERVICE_MONITOR_CRD for c in crds),
            owner=owner_reference(obj),
            config_map_keys=config_map_keys(config_maps),
            config_map_data=config_map_data(config_maps),
        )

    # -- status, events, metrics ---------------------------------------------------------

    async def _report(self, obj: Object, changes: Sequence[Change]) -> None:
        """One Event per operand and kind of change, naming its objects: a fresh policy
        creates 37 objects, which as 37 Events would spend the policy's Event budget
        (`reconciler.EventRecorder`) before its DaemonSets' turn."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for change in changes:
            log.debug("ClusterPolicy %s: %s", name_of(obj), change)
            grouped.setdefault((change.component, change.verb), []).append(change.what)
        for (component, verb), objects in grouped.items():
            reason = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}[verb]
            message = f"{verb} {', '.join(objects)} ({component})"
            await self.recorder.event(obj, NORMAL, reason, message)

    async def _ignore(self, obj: Object, active: Object) -> None:
        status = ignored_status(
            obj.get("status"),
            namespace=self.namespace,
            generation=generation_of(obj),
            active=name_of(active),
        )
        await self.status.write(obj, status)

    async def _invalid(self, obj: Object, exc: pydantic.ValidationError) -> None:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        findings = Findings(
            namespace=self.namespace,
            generation=generation_of(obj),
            problems=[(INVALID_SPEC, f"the spec cannot be read: {errors}")],
        )
        await self.status.write(obj, policy_status(obj.get("status"), findings))
        self.metrics.set_status(ReconciliationStatus.NOT_READY)
        self.metrics.reconciliation_failed_total.inc()

    def _set_metrics(self, policy: ClusterPolicy, findings: Findings, state: str) -> None:
        m = self.metrics
        m.gpu_nodes_total.set(findings.gpu_nodes)
        m.reconciliation_has_nfd_labels.set(1 if findings.has_nfd_labels else 0)
        driver = policy.spec.driver
        if self.set_auto_upgrade:
            m.driver_auto_upgrade_enabled.set(
                1 if driver.enabled and driver.upgrade_policy.auto_upgrade else 0
            )
        if state == READY:
            m.set_status(ReconciliationStatus.READY)
            m.reconciliation_last_success_ts_seconds.set(time.time())
        else:
            m.set_status(ReconciliationStatus.NOT_READY)
            m.reconciliation_failed_total.inc()
