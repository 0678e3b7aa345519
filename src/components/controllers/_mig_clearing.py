"""The MIG-change clearing controller: GPU pods leave a node, politely, before its MIG
layout changes (`_mig_change` decides; this carries it out).

One request per node. It runs when a node's MIG labels change, a pod on a node with a
pending change comes, goes or changes, or a PodDisruptionBudget changes while a node waits;
a refused eviction is also retried with a doubling delay. Each eviction goes through the
Eviction API (a 429 from a budget is an answer to wait on, never a reason to delete), and
every pod evicted gets an Event, as does its node. What blocks a node (a pod the policy
does not let go, a budget, a DaemonSet's pod, a host process) is an Event on the node when
it changes and, through `blocked`, a condition on the ClusterPolicy. With the node agent
enabled, a change of the node's process list (its annotation) brings a waiting node back
too, and a change of the active policy's `migManager` brings back every waiting node. The
pod cache drops `spec.volumes`: whether a GPU pod has emptyDir data is read from the server,
once a pod, unless the policy lets such pods go anyway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from components.api import (
    GPU_PROCESSES_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    GpuProcessEntry,
    active_cluster_policy,
    gpu_processes,
    node_agent_enabled,
)
from components.controllers import _informers
from components.controllers._constants import CLUSTER_POLICY, NODE
from components.controllers._mig_change import (
    BLOCKED_REASON,
    EVICTION_REASON,
    backoff,
    blocked_message,
    change_pending,
    clearing,
    evicted_message,
    gpu_users,
    mig_managed,
    mig_pod_deletion,
    node_evicted_message,
    refusal,
)
from components.upgrade import (
    PodEvictor,
    PodView,
    node_of_pod,
    node_ref,
    node_request,
    nodes_labelled,
)
from reconciler import (
    NORMAL,
    WARNING,
    Controller,
    EventRecorder,
    Funcs,
    Manager,
    Object,
    Request,
    Result,
    annotations_of,
    is_deleting,
    labels_of,
    uid_of,
)
from reconciler import Eviction as Outcome

log = logging.getLogger("components.controllers.mig_clearing")

NAME = "mig-clearing-controller"
EVICTED_MEMORY_SECONDS = 30.0
"""How long an evicted pod is not asked again while the cache still shows it running."""


def _mig_labels(obj: Object) -> tuple[str | None, str | None, bool]:
    labels = labels_of(obj)
    return labels.get(MIG_CONFIG_LABEL), labels.get(MIG_CONFIG_STATE_LABEL), mig_managed(labels)


def _mig_labels_changed(old: Object, new: Object) -> bool:
    return _mig_labels(old) != _mig_labels(new)


def _node_changed(old: Object, new: Object) -> bool:
    """The MIG labels moved, or the node agent's process list did on a waiting node."""
    if _mig_labels_changed(old, new):
        return True
    listed = annotations_of(old).get(GPU_PROCESSES_ANNOTATION)
    return _pending(new) and listed != annotations_of(new).get(GPU_PROCESSES_ANNOTATION)


def _pending(obj: Object) -> bool:
    return change_pending(labels_of(obj))


def _policy_said(obj: Object) -> tuple[Any, bool]:
    """What of a ClusterPolicy the clearing reads: its MIG manager section, and whether it
    is going (the next oldest then becomes the active one)."""
    spec = obj.get("spec") or {}
    return spec.get("migManager"), is_deleting(obj)


def _policy_changed(old: Object, new: Object) -> bool:
    return _policy_said(old) != _policy_said(new)


def _pod_ref(pod: PodView) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
    }


class MigClearingController:
    """Registers the controller and its informers on `manager` (`setup`)."""

    def __init__(
        self,
        manager: Manager,
        *,
        recorder: EventRecorder,
        on_blocked_change: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        workers: int = 4,
    ) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = recorder
        self.on_blocked_change = on_blocked_change
        self.clock = clock
        self.workers = workers
        self.blocked: dict[str, str] = {}
        """Node -> what keeps its MIG change waiting (only nodes something blocks)."""
        self._attempts: dict[str, int] = {}
        self._evicted: dict[str, float] = {}
        self._evictor = PodEvictor(self.client)
        self.controller: Controller | None = None

    def setup(self) -> Controller:
        m = self.manager
        c = m.controller(NAME, self.reconcile, max_concurrent_reconciles=self.workers)
        node_events = Funcs(create=_pending, update=_node_changed)
        c.watch(
            _informers.mig_nodes(m),
            node_request,
            node_events,
            map_old=False,
        )
        c.watch(_informers.pods_by_node(m), self._pod_to_node, map_old=False)
        c.watch(_informers.pdbs(m), lambda o: self._waiting_nodes(), map_old=False)
        c.watch(
            _informers.cluster_policies(m),
            lambda o: self._waiting_nodes(),
            Funcs(update=_policy_changed),
            map_old=False,
        )
        self.controller = c
        return c

    def blocked_nodes(self) -> Mapping[str, str]:
        return dict(self.blocked)

    # -- event mapping -------------------------------------------------------------------

    def _pod_to_node(self, obj: Object) -> Iterable[Request]:
        return node_of_pod(self.client.cache, obj, _pending)

    def _waiting_nodes(self) -> list[Request]:
        return nodes_labelled(self.client.cache, MIG_CONFIG_STATE_LABEL, "pending")

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        node = self.client.get(NODE, name)
        policy = active_cluster_policy(self.client.list(CLUSTER_POLICY))
        allowed = mig_pod_deletion(policy)
        if node is None or not _pending(node) or allowed is None:
            if node is not None and _pending(node):
                log.debug(
                    "node %s: MIG change pending, but no ClusterPolicy runs the MIG manager", name
                )
            await self._leave(node, name)
            return None
        if not mig_managed(labels_of(node)):
            log.debug("node %s: MIG change pending on a node the MIG manager does not run on", name)
            await self._leave(node, name)
            return None
        config = labels_of(node)[MIG_CONFIG_LABEL]
        now = self.clock()
        self._evicted = {uid: t for uid, t in self._evicted.items() if t > now}
        processes = self._processes(policy, node)
        pods = gpu_users(self._evictor.pods_on(name), processes)
        pods = await self._evictor.readable(pods, delete_empty_dir=allowed.delete_empty_dir)
        plan = clearing(pods, allowed, self._evicted, processes)
        answers = await self._evictor.evict(plan.evict)
        refused = [(p, r) for p, r in answers if not r.evicted]
        gone = [p for p, r in answers if r.outcome is Outcome.EVICTED]
        for pod in gone:
            self._evicted[pod.uid] = now + EVICTED_MEMORY_SECONDS
        if gone:
            log.debug("node %s: evicted %s for the MIG change to %s", name, gone, config)
            await self.recorder.event(
                node_ref(name, uid_of(node)),
                NORMAL,
                EVICTION_REASON,
                node_evicted_message(config, gone),
            )
            for pod in gone:
                await self.recorder.event(
                    _pod_ref(pod), WARNING, EVICTION_REASON, evicted_message(name, config)
                )
        pdbs = self._evictor.budgets() if refused else []
        blockers = [refusal(p, pdbs, r.message) for p, r in refused] + list(plan.blocked)
        message = blocked_message(config, blockers, refused=plan.drain_refused)
        await self._set_blocked(node, name, message)
        if not refused:
            self._attempts.pop(name, None)
            return None
        attempts = self._attempts.get(name, 0) + 1
        self._attempts[name] = attempts
        retry_after = max((r.retry_after or 0.0 for _, r in refused), default=0.0)
        return Result(requeue_after=max(backoff(attempts), retry_after))

    async def _leave(self, node: Object | None, name: str) -> None:
        """Nothing to clear on the node (any more): forget what blocked it."""
        self._attempts.pop(name, None)
        await self._set_blocked(node, name, "")

    def _processes(self, policy: Object | None, node: Object) -> list[GpuProcessEntry] | None:
        """The node agent's list of the node's GPU processes; None without the agent (a
        list it left behind when disabled is not current)."""
        if not node_agent_enabled(policy):
            return None
        return gpu_processes(annotations_of(node))

    async def _set_blocked(self, node: Object | None, name: str, message: str) -> None:
        if self.blocked.get(name, "") == message:
            return
        if message:
            self.blocked[name] = message
            log.debug("node %s: %s", name, message)
            if node is not None:
                await self.recorder.event(
                    node_ref(name, uid_of(node)), WARNING, BLOCKED_REASON, message
                )
        else:
            self.blocked.pop(name, None)
        if self.on_blocked_change is not None:
            self.on_blocked_change()
