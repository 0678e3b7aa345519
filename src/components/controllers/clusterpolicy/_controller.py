"""The ClusterPolicy controller's reconcile, top to bottom, all from the cache:

1. parse: the oldest ClusterPolicy is active; any other gets state `ignored` and a condition
   naming the active one, and nothing else is done for it; one that came after a GPUCluster
   is refused (`notReady`, a condition naming the GPUCluster: `controllers._policies`), and
   nothing of either is touched; a spec that cannot be read gets an `InvalidSpec`
   condition;
2. render: the ClusterView (GPU nodes, whether the ServiceMonitor CRD exists, the owner
   reference, the user's ConfigMaps an operand reads, read once per version:
   `ConfigDocuments`) is built and every enabled operand rendered, in the reference's order,
   into one `Plan`; with `spec.psa.enabled` the operator's namespace first gets its Pod
   Security labels (`_pod_security`);
3. apply: each rendered object is server-side applied, skipped when the cached copy already
   carries the desired hash (`_operands.PolicyOperands.apply`);
4. prune: what we own but no longer want is deleted (a driver DaemonSet only once no node
   depends on it alone, `_driver`);
5. status: readiness is judged from the cached DaemonSets, their pods and
   ControllerRevisions; the status is written only when it changed (the turn to `ready`
   once the driver upgrade's own writes have landed, `ReadyHold`); each change becomes an
   Event; the `gpu_operator_*` metrics are set.

A second reconcile that finds nothing to do writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import pydantic

from components.api import (
    MAX_LISTED_NODES,
    ClusterPolicy,
    RemediationNodeStatus,
    active_cluster_policy,
    rollback_images,
    unsupported_fields,
)
from components.controllers import _informers
from components.controllers._apply import (
    Applier,
)
from components.controllers._constants import (
    CLUSTER_POLICY,
    CRD,
    NODE,
    SERVICE_MONITOR_CRD,
)
from components.controllers._informers import GPU_NODE_INDEX
from components.controllers._label_wait import LabelWait
from components.controllers._policies import GPU_CLUSTER_EXISTS, Stacks, parse_spec, spec_key
from components.controllers._status import TAKEOVER_CONDITION as TAKEOVER
from components.controllers._status import (
    Findings,
    ignored_status,
    invalid_spec,
    node_agent_summary,
    policy_status,
)
from components.controllers._status_writer import (
    READY,
    RECHECK_SECONDS,
    ReadyHold,
    StackReport,
    StatusWriter,
)
from components.controllers._view import (
    ConfigDocuments,
    GpuNodeViews,
    any_nfd_labels,
    config_map_keys,
    views_of_gpu_nodes,
)
from components.controllers.clusterpolicy._events import PolicyEvents
from components.controllers.clusterpolicy._operands import PolicyOperands
from components.controllers.clusterpolicy._pod_security import NamespacePodSecurity
from components.metrics import OperatorMetrics, ReconciliationStatus
from components.operands import OPERANDS, ClusterView, Operand
from components.remediation import remediation_status
from reconciler import (
    NORMAL,
    Controller,
    EventRecorder,
    Manager,
    Object,
    Request,
    Result,
    generation_of,
    is_deleting,
    name_of,
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
        stacks: Stacks | None = None,
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
        self.operands = PolicyOperands(
            self.client,
            applier,
            OPERANDS if operands is None else operands,
            namespace,
            _informers.daemonset_pods(manager, namespace),
        )
        self.recorder = recorder or manager.event_recorder("gpu-operator")
        self.report = StackReport(metrics, self.recorder, log, "ClusterPolicy")
        self.controller: Controller | None = None
        self.set_auto_upgrade = set_auto_upgrade
        self.mig_blocked = mig_blocked
        self._parsed: Parsed | None = None
        self._gpu_node_views = GpuNodeViews()
        self.config_documents = ConfigDocuments()
        self._label_wait = LabelWait()
        self.events = PolicyEvents(self.client, namespace, self._label_wait)
        self.status = StatusWriter(
            self.client, self.recorder, CLUSTER_POLICY, report_ready_changes=True
        )
        self.ready_hold = ReadyHold(settling, lambda: self.requeue_active(unpaced=True))
        self.pod_security = NamespacePodSecurity(self.client, namespace)
        self.stacks = stacks

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
        self.events.watch(c, m, self.applier)
        if self.stacks is not None and self.stacks.served:
            self.events.watch_gpu_clusters(c, m)
        self.controller = c
        return c

    def requeue_active(self, *, unpaced: bool = False) -> None:
        """Reconcile the active policy soon (something its status reports changed); at once
        with `unpaced`, not at its paced turn."""
        if self.controller is not None:
            for request in self.events.active_policy():
                self.controller.enqueue(request, unpaced=unpaced)

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        return await self.report.counted(self._reconcile(request))

    async def _reconcile(self, request: Request) -> Result | None:
        policies = self.client.list(CLUSTER_POLICY)
        active = active_cluster_policy(policies)
        obj = self.client.get(CLUSTER_POLICY, request.name)
        if active is None:
            self.metrics.set_status(ReconciliationStatus.NO_POLICY)
        if obj is None or is_deleting(obj):
            log.debug("ClusterPolicy %s: gone (garbage collection removes what it owned)", request)
            return None
        assert active is not None
        if name_of(active) != name_of(obj):
            await self._ignore(obj, active)
            return None
        cluster = self.stacks.policy_refused_by(obj) if self.stacks is not None else None
        if cluster is not None:
            await self._refuse(obj, name_of(cluster))
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
        view = await self._view(obj, policy, with_gpu)
        # Before the operands: their privileged pods need the namespace's labels.
        labelled, psa_problems = await self.pod_security.ensure(policy)
        plan = self.operands.render(policy, view)
        # Asked after the prerequisites were written: the labels may have landed meanwhile.
        applied = await self.operands.apply(
            plan, label_wait=lambda: self._label_wait.remaining(self.client.list(NODE), policy)
        )
        pruned = await self.operands.prune(plan, applied, policy)
        readiness, naming = await self.operands.name_unready(
            plan, self.operands.readiness(plan, pruned.takeover)
        )
        findings = Findings(
            namespace=self.namespace,
            generation=generation_of(obj),
            operands=readiness,
            problems=[*psa_problems, *plan.problems, *applied.problems],
            # A GPU is known by an NFD label: with one GPU node, there are NFD labels.
            has_nfd_labels=bool(with_gpu) or any_nfd_labels(nodes),
            gpu_nodes=len(with_gpu),
            unsupported=unsupported_fields(policy.spec),
            node_agent=node_agent_summary(nodes) if policy.spec.node_agent.enabled else None,
            remediation=[
                RemediationNodeStatus.model_validate(e)
                for e in remediation_status(nodes)[:MAX_LISTED_NODES]
            ]
            if policy.spec.remediation.enabled
            else None,
            mig_blocked=self.mig_blocked() if self.mig_blocked is not None else {},
            takeover=pruned.takeover,
        )
        status = policy_status(obj.get("status"), findings)
        await self.report.changes(obj, [*labelled, *applied.changes, *pruned.changes])
        notice = self.operands.takeover.announce(name_of(obj), pruned.takeover)
        if notice is not None:
            await self.recorder.event(obj, NORMAL, TAKEOVER, notice)
        was_ready = (obj.get("status") or {}).get("state") == READY
        if self.ready_hold.holds(was_ready=was_ready, is_ready=status.state == READY):
            log.debug("ClusterPolicy %s: ready once the upgrade's own writes land", request)
            return Result(requeue_after=self.ready_hold.seconds_left() + RECHECK_SECONDS)
        wait = await self.status.write(obj, status, progress_every=STATUS_PROGRESS_SECONDS)
        self._set_metrics(policy, findings, status.state)
        # Held DaemonSets come with the node events that label their nodes, or at the end of
        # the wait; a stalled DaemonSet's nodes are named at the end of its stall.
        waits = [w for w in (wait, applied.hold_seconds, naming) if w]
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

    async def _view(
        self, obj: Object, policy: ClusterPolicy, with_gpu: Sequence[Object]
    ) -> ClusterView:
        crds = self.client.list(CRD)
        config_maps = self.client.list(CONFIG_MAP, namespace=self.namespace)
        read = self.operands.config_maps_read(policy)
        return ClusterView(
            namespace=self.namespace,
            gpu_nodes=views_of_gpu_nodes(with_gpu, self._gpu_node_views),
            has_service_monitor_crd=any(name_of(c) == SERVICE_MONITOR_CRD for c in crds),
            owner=owner_reference(obj),
            config_map_keys=config_map_keys(config_maps),
            config_documents=await self.config_documents.documents(config_maps, read),
            last_good_images=rollback_images(obj, with_gpu),
        )

    # -- status, events, metrics ---------------------------------------------------------

    async def _ignore(self, obj: Object, active: Object) -> None:
        status = ignored_status(
            obj.get("status"),
            namespace=self.namespace,
            generation=generation_of(obj),
            active=name_of(active),
        )
        await self.status.write(obj, status)

    async def _refuse(self, obj: Object, cluster: str) -> None:
        """The GPUCluster `cluster` came first: say so, and touch nothing."""
        message = (
            f"GPUCluster {cluster} exists and came first: a ClusterPolicy and a GPUCluster "
            "cannot both be acted on (the device-plugin stack or the DRA stack); delete one"
        )
        findings = Findings(
            namespace=self.namespace,
            generation=generation_of(obj),
            problems=[(GPU_CLUSTER_EXISTS, message)],
        )
        previous = self.status.latest(obj).get("status")
        await self.status.write(obj, policy_status(previous, findings))

    async def _invalid(self, obj: Object, exc: pydantic.ValidationError) -> None:
        findings = invalid_spec(self.namespace, obj, exc)
        await self.status.write(obj, policy_status(obj.get("status"), findings))
        self.metrics.set_status(ReconciliationStatus.NOT_READY)
        self.metrics.reconciliation_failed_total.inc()

    def _set_metrics(self, policy: ClusterPolicy, findings: Findings, state: str) -> None:
        driver = policy.spec.driver
        if self.set_auto_upgrade:
            self.metrics.driver_auto_upgrade_enabled.set(
                1 if driver.enabled and driver.upgrade_policy.auto_upgrade else 0
            )
        self.report.reconciled(findings, state)
