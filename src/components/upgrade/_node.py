"""The per-node reconcile: everything a node does on its own, from noticing its driver is
outdated to uncordoning it.

It runs when the node, a pod on it, its driver DaemonSet or revision, a
PodDisruptionBudget (for a node being drained) or the policy changes, and requeues only
for a timeout. `plan_node` decides; this carries the step out (pod deletions, evictions,
the kernel record on the driver pod) and, when nothing else has to happen in between,
takes the next transitions back to back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from components.api import (
    COMPONENT_LABEL,
    DRIVER_DEPLOY_LABEL,
    UpgradeState,
    is_fenced,
    pod_spec_targets,
    revisions_before_fence,
    template_pod_spec,
)
from components.upgrade._clearing import gpu_pods
from components.upgrade._fold import Fold, fold
from components.upgrade._kernels import LoadedKernels
from components.upgrade._model import (
    NodeView,
    node_view,
    pdb_view,
    template_digest,
)
from components.upgrade._names import (
    DRIVER_KERNEL_ANNOTATION,
    IN_PROGRESS,
    NODE,
    NODE_ANNOTATIONS,
    PDB,
    POD,
    STATE_LABEL,
)
from components.upgrade._pin import PinChange, pin_change
from components.upgrade._planner import cleanup, in_place, plan_node
from components.upgrade._pods import PodView, is_driver_pod, pick_driver_pod, pod_view
from components.upgrade._reader import POD_NODE_INDEX, ClusterReader, Pool
from components.upgrade._restart import RESTART_ONLY_REASON, restart_only
from components.upgrade._retry import DEFAULT_BACKOFF, Backoff
from components.upgrade._status import Waits
from components.upgrade._step import NodeContext, Step, Transition
from components.upgrade._takeover import takeover_release
from components.upgrade._tracker import DeleteTracker, WriteTracker
from components.upgrade._volumes import ConfigDigests, PodVolumes
from components.upgrade._writer import NodeWriter
from reconciler import (
    NORMAL,
    WARNING,
    Client,
    Eviction,
    Object,
    Request,
    Result,
    labels_of,
    name_of,
)
from reconciler.errors import Conflict as ApiConflict
from reconciler.errors import NotFound

S = UpgradeState
log = logging.getLogger("components.upgrade")

REREAD_AFTER = 0.1
"""Seconds before a reconcile whose write was refused (the node moved) reads it again: the
watch brings the newer node well within that."""
MAX_HOPS = 12
"""Transitions taken back to back in one reconcile when nothing else needs to happen
between them (cordon -> no jobs to wait for -> no GPU pods -> restart the driver)."""

CLEARING_STATES = frozenset(
    s.value for s in IN_PROGRESS - {S.VALIDATION_REQUIRED, S.UNCORDON_REQUIRED}
)
"""States from which a reconcile may reach a decision that reads pods' volumes (emptyDir
data needs consent to be lost), counting the transitions it chains."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """One read of a node and what decides its walk, from the cache."""

    node: NodeView
    pods: list[PodView]
    driver: PodView | None
    ds: Object | None
    pool: Pool | None
    replacing: bool
    release: str | None
    """Why the node's takeover label should go now."""
    pin: PinChange | None


class NodeReconciler:
    def __init__(
        self,
        client: Client,
        reader: ClusterReader,
        writer: NodeWriter,
        waits: Waits,
        kernels: LoadedKernels,
        *,
        operator_pod: tuple[str, str] | None,
        validation_timeout: float,
        expectation_timeout: float,
        clock: Callable[[], float],
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.client = client
        self.cache = reader.cache
        self.namespace = reader.namespace
        self.reader = reader
        self.writer = writer
        self.waits = waits
        self.kernels = kernels
        self.operator_pod = operator_pod
        self.validation_timeout = validation_timeout
        self.backoff = backoff
        self.explained: dict[str, str] = {}
        """Node -> the wait its last Event told (`_explain`)."""
        self.clock = clock
        self.pod_writes = WriteTracker(timeout=expectation_timeout)
        """Driver pod annotations: written again only once the cache shows the last one."""
        self.pod_deletes = DeleteTracker(timeout=expectation_timeout)
        """Pods we deleted: a reconcile waits until its cache shows them going."""
        self.volumes = PodVolumes(client)
        self.digests = ConfigDigests(client)

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        obj = self.cache.get(NODE, name)
        if obj is None:
            self.waits.forget(name)
            self.writer.blocked.pop(name, None)
            self.explained.pop(name, None)
            return None
        if self.writer.tracker.behind(name, obj):
            return None  # our last write is on its way; its event brings us back
        clearing = labels_of(obj).get(STATE_LABEL) in CLEARING_STATES
        seen = await self._read(obj, clearing=clearing and not node_view(obj).restart_only)
        if any(
            self.pod_deletes.behind(p.uid, p.resource_version, terminating=p.terminating)
            for p in seen.pods
        ):
            return None  # a pod we deleted is still shown as it was; its event brings us back
        if self._node_behind_its_driver(obj, seen):
            return None  # the node's labels are on their way; their event brings us back
        node, pool = seen.node, seen.pool
        if seen.release is not None:
            if await self.writer.write_release(obj, node, seen.release) is None:
                return Result(requeue_after=REREAD_AFTER)
            return None  # the node's update brings us back
        if seen.pin is not None:
            if await self.writer.write_pin(obj, node, seen.pin) is None:
                return Result(requeue_after=REREAD_AFTER)
            return None  # the node's update brings us back, pinned
        if pool is None or not pool.enabled:
            if seen.ds is None and self._driver_on_its_way(obj, node):
                self.waits.set(name, "")
                return None
            step = cleanup(node)
            if step.transition is not None:
                await self.writer.transition(obj, node, step.transition, pool)
            self.waits.set(name, "")
            return None
        ctx = self._context(seen)
        return await self._run(obj, ctx, pool)

    async def admission_fold(self, obj: Object, first: Transition) -> Fold | None:
        """Admission's write with the transitions that follow it at once: cordoned, no jobs
        to wait for, no GPU pods, up to the driver's restart. Written apart, the admission
        costs each node a write, a watch event and a reconcile more (tens of milliseconds
        on every node of a walk). None when the node needs something else first (a pin
        moved, a takeover released, no enabled pool): admission then writes `first` alone
        and this node's reconcile takes it from there."""
        seen = await self._read(obj, clearing=True, digest=True)
        if seen.release is not None or seen.pin is not None:
            return None
        if seen.pool is None or not seen.pool.enabled:
            return None
        ctx = self._context(seen)
        if restart_only(ctx):
            # Straight to the restart, uncordoned: the event says which path it takes.
            first = in_place(f"{first.reason}; {RESTART_ONLY_REASON}").transition or first
        return fold(obj, ctx.node, first, self._planner(ctx, seen.pool), self.clock())

    async def _read(self, obj: Object, *, clearing: bool, digest: bool = False) -> _Seen:
        """What the cache shows of the node, its pods, its driver and its pool. `clearing`:
        the pods' volumes are read too (a decision on emptyDir data needs them); `digest`
        (admission): the driver pod's `DRIVER_CONFIG_DIGEST` too, when it does not carry it
        as an annotation (so does a node whose walk may restart it in place)."""
        cached = self.cache.list(POD, index=(POD_NODE_INDEX, name_of(obj)))
        pods = [self.reader.views.pod(p) for p in cached]
        if clearing:
            pods = await self.volumes.with_local_storage(pods)
        driver = pick_driver_pod(
            p for p in pods if p.namespace == self.namespace and is_driver_pod(p.labels)
        )
        if driver is not None:
            driver = self._with_learnt_kernel(driver)
        ds = self.reader.owner_daemonset(driver) if driver is not None else None
        if ds is None:
            ds = self.reader.targeting_daemonset(obj)
            if driver is not None and driver.owner_kind != "DaemonSet":
                driver = None  # an orphaned driver pod is nobody's to upgrade
        pool = self.reader.pool_for_daemonset(ds)
        node = self.reader.views.node(obj)
        in_place = node.state is S.CORDON_REQUIRED or node.restart_only
        if driver is not None and (digest or in_place) and template_digest(ds) is not None:
            driver = await self.digests.with_digest(driver)
        foreign = driver is not None and ds is not None and COMPONENT_LABEL not in labels_of(ds)
        replacing = foreign and ds is not None and is_fenced(ds)
        release = takeover_release(
            node,
            driver,
            foreign=foreign,
            replacing=replacing,
            before_fence=revisions_before_fence(ds) if replacing and ds is not None else None,
        )
        pin = pin_change(
            node,
            driver,
            precompiled=pool.precompiled if pool is not None else None,
            walk_moves_it=pool is not None and pool.enabled,
        )
        return _Seen(node, pods, driver, ds, pool, replacing, release, pin)

    def _with_learnt_kernel(self, driver: PodView) -> PodView:
        """The driver pod with the kernel it was loaded for when the node's kernel changed
        under it and the pod does not say so yet (`_kernels`)."""
        learnt = self.kernels.kernel(driver.uid)
        if learnt is None:
            return driver
        if driver.kernel is not None:
            self.kernels.forget(driver.uid)  # the cached pod carries the record now
            return driver
        return replace(driver, kernel=learnt, kernel_learnt=True)

    def _context(self, seen: _Seen) -> NodeContext:
        assert seen.pool is not None
        node, pool = seen.node, seen.pool
        return NodeContext(
            node=node,
            driver=seen.driver,
            target_revision=self.reader.target_revision(seen.ds),
            target_digest=template_digest(seen.ds),
            pods=seen.pods,
            pdbs=(
                [pdb_view(p) for p in self.cache.list(PDB)]
                if node.state in (S.DRAIN_REQUIRED, S.UPGRADE_FAILED)
                else ()
            ),
            operator_pod=self.operator_pod,
            precompiled=pool.precompiled,
            agent=pool.agent,
            replacing=seen.replacing,
        )

    @staticmethod
    def _node_behind_its_driver(obj: Object, seen: _Seen) -> bool:
        """A node without a state yet whose driver pod its DaemonSet would not have put
        there by the labels cached: the node labeller's write (deploy labels and the first
        state together) reached the DaemonSet controller, and the pod's event reached us,
        before the node's own event did (two watches, no order between them). Read as it
        is, the node would get `upgrade-done` a second time, in a write of its own (no state
        to test, so nothing guards it): 1,000-node rollouts wrote 1.05-1.21 times a node."""
        return (
            seen.node.state is S.UNKNOWN
            and seen.driver is not None
            and seen.ds is not None
            and not pod_spec_targets(template_pod_spec(seen.ds), labels_of(obj))
        )

    def _driver_on_its_way(self, obj: Object, node: NodeView) -> bool:
        """A node labelled for the driver (`nvidia.com/gpu.deploy.driver=true`), at
        `upgrade-done` and nothing else of the walk's, that no driver DaemonSet targets yet,
        while the ClusterPolicy's drivers upgrade automatically: the node labeller wrote that
        first state with the node's deploy labels, before the driver DaemonSet reached our
        cache. Clearing it would cost two writes (off, then on again once the driver pod is
        there) for nothing. A node that lost its GPU or opted out loses the deploy label,
        and then its state is cleared as before."""
        if (
            node.state is not S.UPGRADE_DONE
            or labels_of(obj).get(DRIVER_DEPLOY_LABEL) != "true"
            or any(k in node.annotations for k in NODE_ANNOTATIONS)
        ):
            return False
        pool = self.reader.cluster_policy_pool()
        return pool is not None and pool.enabled

    def _planner(self, ctx: NodeContext, pool: Pool) -> Callable[[NodeView], Step]:
        """Plans for `ctx` with the node as given (a fold plans on the node as its patch
        so far will leave it)."""
        return lambda view: self._plan(replace(ctx, node=view), pool)

    def _plan(self, ctx: NodeContext, pool: Pool) -> Step:
        return plan_node(
            ctx,
            pool.policy,
            self.clock(),
            validation_timeout=self.validation_timeout,
            backoff=self.backoff,
        )

    async def _run(self, obj: Object, ctx: NodeContext, pool: Pool) -> Result | None:
        step = self._plan(ctx, pool)
        for _ in range(MAX_HOPS):
            if await self._gpu_pod_arrived(ctx, step):
                # The cache has not shown it yet; its event sends the node back to clearing.
                return Result(requeue_after=REREAD_AFTER)
            acted = await self._side_effects(ctx, step)
            # The kernel record is a write to the driver pod that nothing in the node's
            # write depends on: both go out together (a kernel change under the pod is the
            # moment of both: the record and the transition that starts the walk).
            record = self._record_kernel(ctx, step)
            if step.record_kernel and ctx.driver is not None:
                recorded = replace(
                    ctx.driver, kernel=step.record_kernel, kernel_recorded=True, kernel_learnt=False
                )
                ctx = replace(ctx, driver=recorded)
            if step.transition is None or acted:
                await record
                break
            # The transitions that follow with nothing to do between them go in the same
            # write (cordoned, no jobs to wait for, no GPU pods: straight to the restart).
            steps = fold(obj, ctx.node, step.transition, self._planner(ctx, pool), self.clock())
            written, _ = await asyncio.gather(self.writer.write_fold(obj, steps, pool), record)
            if written is None:
                # Refused: the node moved; read it again.
                return Result(requeue_after=REREAD_AFTER)
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
            and await self.writer.transition(obj, ctx.node, step.transition, pool) is None
        ):
            # Pods went in the same step as a transition (a driver restart served a
            # request) and the transition was refused: read the node again.
            return Result(requeue_after=REREAD_AFTER)
        # A wait that names what holds the node (the budget behind a refused eviction, say)
        # says more than the API's refusal, which has its own event.
        blocked = self.writer.blocked.get(ctx.node.name)
        wait = step.wait if step.explains or not blocked else blocked
        self.waits.set(ctx.node.name, wait)
        self._explain(ctx.node, step, pool)
        if step.requeue_after is not None:
            # A timeout that fires unless an event moves the node first.
            return Result(requeue_after=step.requeue_after + 0.1)
        return None

    def _explain(self, node: NodeView, step: Step, pool: Pool) -> None:
        """An Event (on the node and its policy) when what holds the node changes: once
        per reason, never once per reconcile."""
        name = node.name
        if not step.explains or not step.wait:
            self.explained.pop(name, None)
            return
        if self.explained.get(name) == step.wait:
            return
        self.explained[name] = step.wait
        message = f"{node.state.value}: {step.wait}"
        self.writer.event_node(node, NORMAL, message)
        self.writer.event(pool.obj, NORMAL, f"node {name}: {message}")

    async def _gpu_pod_arrived(self, ctx: NodeContext, step: Step) -> bool:
        """Right before the driver restarts, whether the server shows a GPU pod on the node
        that the cache did not (the scheduler may bind a pod that tolerates the cordon at
        any moment): the one read from the server the walk makes before that step."""
        moves_pin = step.transition is not None and step.transition.pin_kernel is not None
        releases = step.transition is not None and step.transition.release_takeover
        restarts = moves_pin or releases or any(is_driver_pod(p.labels) for p in step.delete)
        if ctx.node.state is not S.POD_RESTART_REQUIRED or not restarts or ctx.node.restart_only:
            return False  # a restart in place keeps the driver loaded under its GPU pods
        path = (await self.client.mapper.resource_for(POD)).path(None)
        doc = await self.client.request(
            "GET", path, params={"fieldSelector": f"spec.nodeName={ctx.node.name}"}
        )
        live = [pod_view(p) for p in doc.get("items") or []]
        arrived = [p for p in gpu_pods(live) if not p.terminating]
        if arrived:
            log.debug("%s: GPU pods %s arrived; not restarting the driver", ctx.node.name, arrived)
        return bool(arrived)

    async def _side_effects(self, ctx: NodeContext, step: Step) -> bool:
        """Deletes and evictions; True when any pod was asked to go."""
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
            if message and self.writer.blocked.get(ctx.node.name) != message:
                self.writer.event_node(ctx.node, WARNING, message)
            if message:
                self.writer.blocked[ctx.node.name] = message
            else:
                self.writer.blocked.pop(ctx.node.name, None)
            acted = acted or len(blocked) < len(step.evict)
        return acted

    async def _record_kernel(self, ctx: NodeContext, step: Step) -> None:
        """The kernel the driver pod serves, written on it (when the step asks)."""
        d = ctx.driver
        if not step.record_kernel or d is None:
            return
        # A reconcile that runs before our last write of the pod reaches the cache would
        # write the same annotation again.
        if self.pod_writes.behind(d.name, self.cache.get(POD, d.name, d.namespace)):
            return
        annotations = {DRIVER_KERNEL_ANNOTATION: step.record_kernel}
        with contextlib.suppress(NotFound):
            written = await self.client.patch(
                POD, d.name, {"metadata": {"annotations": annotations}}, namespace=d.namespace
            )
            self.pod_writes.record(written)

    async def _delete(self, pod: PodView) -> None:
        # A failed precondition (409): that pod is gone already, replaced, or changed since
        # the cache saw it (our own earlier delete, most often); the next reconcile reads
        # it again.
        with contextlib.suppress(ApiConflict):
            await self.client.delete(
                POD,
                pod.name,
                namespace=pod.namespace,
                uid=pod.uid or None,
                resource_version=pod.resource_version or None,
                missing_ok=True,
            )
            if pod.uid:
                self.pod_deletes.record(pod.uid, pod.resource_version)
                self.kernels.forget(pod.uid)
