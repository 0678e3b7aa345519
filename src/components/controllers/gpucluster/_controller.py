"""The GPUCluster controller's reconcile, top to bottom, all from the cache:

1. deleted: while ResourceClaims are allocated on its GPUs, the finalizer holds it and its
   status and an Event name them; the DRA validator (a claim consumer of its own) goes
   first; once none is left the finalizer goes and the garbage collector takes the stack;
2. refused: a ClusterPolicy came first (`controllers._policies.Stacks`): state `notReady`,
   a condition naming it, nothing written but the status (nothing of either torn down);
3. parse: the spec as a `GPUCluster`, projected onto the policy its operands render from
   (`components.api.dra_stack`); one that cannot be read gets `InvalidSpec`;
4. the finalizer, and the namespace label `resource.kubernetes.io/admin-access=true` the
   validator's admin-access claim needs;
5. render every DRA operand into one `Plan`, apply (a new DaemonSet once the GPU nodes
   carry the DRA deploy labels, `_label_wait`), prune what it no longer wants;
6. status: readiness from the cached DaemonSets (and the compute-domain controller's
   Deployment), written when it changed, each change an Event; the `gpu_operator_*`
   metrics set as for a ClusterPolicy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pydantic

from components.api import GPU_CLUSTER_FINALIZER, GPUCluster, dra_stack
from components.controllers import _informers
from components.controllers._apply import Applier
from components.controllers._constants import (
    CRD,
    DAEMONSET,
    GPU_CLUSTER,
    NODE,
    RESOURCE_CLAIM,
    SERVICE_MONITOR_CRD,
)
from components.controllers._informers import GPU_NODE_INDEX
from components.controllers._label_wait import LabelWait
from components.controllers._labels import LabelPolicy
from components.controllers._policies import Stacks
from components.controllers._status import Findings, invalid_spec
from components.controllers._status_writer import StackReport, StatusWriter
from components.controllers._view import any_nfd_labels, views_of_gpu_nodes
from components.controllers.gpucluster._claims import holding
from components.controllers.gpucluster._events import ClusterEvents
from components.controllers.gpucluster._operands import StackOperands
from components.controllers.gpucluster._status import (
    cluster_status,
    refused_status,
    waiting_status,
)
from components.metrics import OperatorMetrics, ReconciliationStatus
from components.operands import DRA_OPERANDS, ClusterView, Operand
from reconciler import (
    GVK,
    Controller,
    EventRecorder,
    Manager,
    Object,
    PatchType,
    Request,
    Result,
    generation_of,
    is_deleting,
    labels_of,
    metadata_of,
    name_of,
    owner_reference,
    owner_references_of,
    resource_version_of,
    uid_of,
)
from reconciler.errors import NotFound

log = logging.getLogger("components.controllers.gpucluster")

NAME = "gpucluster-controller"
PACE_SECONDS = 1.0
"""At most this often (a rollout's pod events collapse into one reconcile a second)."""
STATUS_PROGRESS_SECONDS = 5.0
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
"""The namespace label without which the scheduler refuses an admin-access claim."""
NAMESPACE = GVK("", "v1", "Namespace")
DRA_LABELS = LabelPolicy(dra=True)
"""The labels the node-labelling controller gives GPU nodes while a GPUCluster is the stack."""


def finalizers_of(obj: Object) -> list[str]:
    return list(metadata_of(obj).get("finalizers") or ())


class GPUClusterController:
    def __init__(
        self,
        manager: Manager,
        applier: Applier,
        metrics: OperatorMetrics,
        stacks: Stacks,
        *,
        namespace: str,
        operands: Sequence[Operand] | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.manager = manager
        self.client = manager.client
        self.metrics = metrics
        self.stacks = stacks
        self.namespace = namespace
        self.operands = StackOperands(
            self.client,
            applier,
            DRA_OPERANDS if operands is None else operands,
            _informers.daemonset_pods(manager, namespace),
        )
        self.applier = applier
        self.recorder = recorder or manager.event_recorder("gpu-operator")
        self.report = StackReport(metrics, self.recorder, log, "GPUCluster")
        self.status = StatusWriter(
            self.client, self.recorder, GPU_CLUSTER, report_ready_changes=True
        )
        self.controller: Controller | None = None
        self._label_wait = LabelWait()
        self._admin_access_seen = False
        """The namespace was seen labelled: not read again (we never take the label off)."""

    def setup(self) -> Controller:
        c = self.manager.controller(NAME, self, min_interval=PACE_SECONDS)
        events = ClusterEvents(self.client, self.namespace, self._label_wait)
        events.watch(c, self.manager, self.applier)
        self.controller = c
        return c

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        return await self.report.counted(self._reconcile(request))

    async def _reconcile(self, request: Request) -> Result | None:
        obj = self.client.get(GPU_CLUSTER, request.name)
        if obj is None:
            return None
        obj = self.status.latest(obj)
        if is_deleting(obj):
            try:
                await self._deleting(obj)
            except NotFound:
                # Queued again before the cache saw it released: the copy read still
                # carried the finalizer, and the object is already gone, which is the goal.
                log.debug("GPUCluster %s: already gone", request.name)
            return None
        policy = self.stacks.cluster_refused_by(obj)
        if policy is not None:
            status = refused_status(
                obj.get("status"),
                namespace=self.namespace,
                generation=generation_of(obj),
                policy=name_of(policy),
            )
            await self.status.write(obj, status)
            return None
        try:
            cluster = GPUCluster.from_dict({k: v for k, v in obj.items() if k != "status"})
        except pydantic.ValidationError as exc:
            await self._invalid(obj, exc)
            return None
        await self._prepare(obj)
        stack = dra_stack(cluster)
        with_gpu = self.client.list(NODE, index=(GPU_NODE_INDEX, "true"))
        crds = self.client.list(CRD)
        view = ClusterView(
            namespace=self.namespace,
            gpu_nodes=views_of_gpu_nodes(with_gpu),
            has_service_monitor_crd=any(name_of(c) == SERVICE_MONITOR_CRD for c in crds),
            owner=owner_reference(obj),
        )
        plan = self.operands.render(stack, view)
        applied = await self.operands.apply(
            plan, label_wait=lambda: self._label_wait.remaining(self.client.list(NODE), DRA_LABELS)
        )
        pruned = await self.operands.prune(plan, applied, uid_of(obj))
        findings = Findings(
            namespace=self.namespace,
            generation=generation_of(obj),
            operands=self.operands.readiness(plan),
            problems=[*plan.problems, *applied.problems],
            has_nfd_labels=bool(with_gpu) or any_nfd_labels(self.client.list(NODE)),
            gpu_nodes=len(with_gpu),
        )
        status = cluster_status(obj.get("status"), findings)
        await self.report.changes(obj, [*applied.changes, *pruned])
        wait = await self.status.write(obj, status, progress_every=STATUS_PROGRESS_SECONDS)
        self.report.reconciled(findings, status.state)
        if applied.held:
            # The last label landing asks at once (`_events`); this is the bound.
            wait = min(wait, applied.hold_seconds) if wait else applied.hold_seconds
        return Result(requeue_after=wait) if wait else None

    # -- deletion ------------------------------------------------------------------------

    async def _deleting(self, obj: Object) -> None:
        """Hold the finalizer while claims are allocated on GPUs; say which; then let go."""
        name = name_of(obj)
        if GPU_CLUSTER_FINALIZER not in finalizers_of(obj):
            return
        await self._drain_claim_consumers(obj)
        claims = holding(self.client.list(RESOURCE_CLAIM))
        if claims:
            # Its Ready condition names them; the status writer makes each change an Event.
            status = waiting_status(
                obj.get("status"),
                namespace=self.namespace,
                generation=generation_of(obj),
                claims=claims,
            )
            await self.status.write(obj, status)
            return
        kept = [f for f in finalizers_of(obj) if f != GPU_CLUSTER_FINALIZER]
        await self.client.patch(
            GPU_CLUSTER,
            name,
            {"metadata": {"finalizers": kept or None, "resourceVersion": resource_version_of(obj)}},
        )
        log.info("GPUCluster %s: no claim on its GPUs left, released for deletion", name)

    async def _drain_claim_consumers(self, obj: Object) -> None:
        """Delete our DaemonSets whose pods claim devices (the DRA validator): their claims
        go with their pods, while the kubelet plugin is still there to unprepare them."""
        uid = uid_of(obj)
        for ds in self.client.list(DAEMONSET, namespace=self.namespace):
            owners = owner_references_of(ds)
            if not any(o.get("uid") == uid for o in owners) or is_deleting(ds):
                continue
            pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            if not pod.get("resourceClaims"):
                continue
            await self.client.delete(
                DAEMONSET, name_of(ds), namespace=self.namespace, missing_ok=True
            )
            log.info(
                "GPUCluster %s: deleted DaemonSet %s, its pods hold claims",
                name_of(obj),
                name_of(ds),
            )

    # -- what a live GPUCluster needs ------------------------------------------------------

    async def _prepare(self, obj: Object) -> None:
        """The finalizer and the namespace label, both wanted before the stack is written.
        Neither needs the other: at once, so a new GPUCluster's stack (and every GPU node's
        kubelet plugin) waits one round trip for them, not three."""
        await asyncio.gather(self._hold(obj), self._admin_access())

    async def _hold(self, obj: Object) -> None:
        """Our finalizer on it, so that its deletion waits for the claims on its GPUs."""
        finalizers = finalizers_of(obj)
        if GPU_CLUSTER_FINALIZER in finalizers:
            return
        await self.client.patch(
            GPU_CLUSTER,
            name_of(obj),
            {
                "metadata": {
                    "finalizers": [*finalizers, GPU_CLUSTER_FINALIZER],
                    "resourceVersion": resource_version_of(obj),
                }
            },
        )
        log.info("GPUCluster %s: finalizer %s added", name_of(obj), GPU_CLUSTER_FINALIZER)

    async def _admin_access(self) -> None:
        """The operator's namespace lets admin-access claims in (the validator's). The label
        stays when the GPUCluster goes: other admin-access users may rely on it."""
        if self._admin_access_seen:
            return
        namespace = await self.client.get_live(NAMESPACE, self.namespace)
        if labels_of(namespace).get(ADMIN_ACCESS_LABEL) == "true":
            self._admin_access_seen = True
            return
        await self.client.patch(
            NAMESPACE,
            self.namespace,
            {"metadata": {"labels": {ADMIN_ACCESS_LABEL: "true"}}},
            patch_type=PatchType.MERGE,
        )
        self._admin_access_seen = True
        log.info("labelled namespace %s %s=true", self.namespace, ADMIN_ACCESS_LABEL)

    # -- status, events, metrics ---------------------------------------------------------

    async def _invalid(self, obj: Object, exc: pydantic.ValidationError) -> None:
        findings = invalid_spec(self.namespace, obj, exc)
        await self.status.write(obj, cluster_status(obj.get("status"), findings))
        self.metrics.set_status(ReconciliationStatus.NOT_READY)
