"""The remediation controller: carries out `_model.decide` on each node, one write a step.

One request per node. A node comes back when its GPU conditions, our labels, annotations
or taint change (the node agent's answers are annotations), when a pod on a draining node
comes or goes, when a PodDisruptionBudget changes, when the policy changes, and on a short
timer while it waits (a slot, the agent, a budget). Evictions go through the Eviction API:
a budget's refusal is an answer to wait on. Reconciles run one at a time, so the
cluster-wide limit (`maxParallel`) is counted from the cache plus the nodes this process
started that the cache has not shown yet.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pydantic

from components.api import (
    GPU_HEALTHY,
    GPU_VALIDATED,
    REBOOT_REQUEST_ANNOTATION,
    REMEDIATION_FAILED_CONDITION,
    REMEDIATION_SINCE_ANNOTATION,
    REMEDIATION_STATE_LABEL,
    RESET_REQUEST_ANNOTATION,
    PodDeletionSpec,
    RemediationSpec,
    active_cluster_policy,
    node_agent_enabled,
    scaled_value,
)
from components.kinds import CACHED_PODS, CLUSTER_POLICY, SCHEDULED_PODS
from components.remediation._metrics import RemediationMetrics, remediation_metrics_for
from components.remediation._model import (
    IN_PROGRESS,
    Act,
    Move,
    NodeView,
    State,
    condition,
    decide,
    has_taint,
    node_view,
    reset_id,
    taints_with,
)
from components.upgrade import (
    POD_NODE_INDEX,
    PodEvictor,
    deletion_plan,
    describe,
    disruption_blocker,
    format_time,
    gpu_pods,
    node_of_pod,
    node_ref,
    node_request,
    nodes_labelled,
    pod_as_read,
    pod_node,
)
from reconciler import (
    NORMAL,
    WARNING,
    Controller,
    EventRecorder,
    Funcs,
    Manager,
    Object,
    PatchType,
    Request,
    Result,
    annotations_of,
    is_deleting,
    label_index_name,
    labels_of,
    metadata_of,
    name_of,
    resource_version_of,
    uid_of,
)
from reconciler.errors import Conflict, NotFound
from reconciler.kinds import NODE, PDB, POD

log = logging.getLogger("components.remediation")

NAME = "gpu-remediation-controller"
SECTION = "driver.upgradePolicy.podDeletion"
"""The pod-deletion rules remediation shares with the driver upgrade."""
EVENT_REASONS = {
    State.TAINT: "GPURemediationTainted",
    State.DRAIN: "GPURemediationDraining",
    State.RESET: "GPURemediationResetting",
    State.VALIDATE: "GPURemediationValidating",
    State.DONE: "GPURemediationDone",
    State.FAILED: REMEDIATION_FAILED_CONDITION,
}
BLOCKED_REASON = "GPURemediationBlocked"
APPROVAL_REASON = "GPURemediationAwaitingApproval"
DRY_RUN_REASON = "GPURemediationDryRun"


def remediation_spec(policy: Mapping[str, Any] | None) -> RemediationSpec | None:
    """The active policy's remediation section; None when off (or no agent to act on)."""
    spec = (policy or {}).get("spec")
    raw = spec.get("remediation") if isinstance(spec, Mapping) else None
    if not isinstance(raw, Mapping) or raw.get("enabled") is not True:
        return None
    if not node_agent_enabled(policy):
        return None
    try:
        return RemediationSpec.model_validate(dict(raw))
    except pydantic.ValidationError:
        return None  # the API server refuses such a policy; do nothing


def pod_deletion(policy: Mapping[str, Any] | None) -> PodDeletionSpec:
    spec = (policy or {}).get("spec") or {}
    raw = ((spec.get("driver") or {}).get("upgradePolicy") or {}).get("podDeletion") or {}
    try:
        return PodDeletionSpec.model_validate(dict(raw))
    except pydantic.ValidationError:
        return PodDeletionSpec()


def _watched(node: Object) -> tuple[Any, ...]:
    """What of a node the remediation reads (heartbeats and the rest change nothing)."""
    notes = {
        k: v for k, v in annotations_of(node).items() if k.startswith("nvidia.com/gpu-remediation")
    }
    conds = tuple(
        (c.get("status"), c.get("message"))
        for c in (condition(node, GPU_HEALTHY), condition(node, GPU_VALIDATED))
        if c is not None
    )
    return labels_of(node).get(REMEDIATION_STATE_LABEL), notes, conds, has_taint(node)


def _policy_said(obj: Object) -> tuple[Any, ...]:
    """What of a ClusterPolicy the remediation reads (its status writes are not it)."""
    spec = obj.get("spec") or {}
    return (
        spec.get("remediation"),
        spec.get("nodeAgent"),
        (spec.get("driver") or {}).get("upgradePolicy"),
        is_deleting(obj),
    )


def _node_ref(node: Object) -> Object:
    return node_ref(name_of(node), uid_of(node))


def _draining(node: Object) -> bool:
    return labels_of(node).get(REMEDIATION_STATE_LABEL) == "drain"


class RemediationController:
    """Registers the controller and its informers on `manager` (`setup`).

    `poll_seconds`: how soon a waiting node looks again without an event (a slot frees,
    a budget allows); `clock`: Unix seconds (the times written on nodes)."""

    def __init__(
        self,
        manager: Manager,
        *,
        recorder: EventRecorder,
        clock: Callable[[], float] = time.time,
        poll_seconds: float = 2.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = recorder
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.on_change = on_change
        self.metrics: RemediationMetrics = remediation_metrics_for(manager.registry)
        self._started: set[str] = set()
        """Nodes this process moved into a step the cache may not show yet."""
        self._evictor = PodEvictor(self.client)
        self._told: dict[str, str] = {}
        """The last waiting Event per node (approval, dry run, blocked): said once."""
        self.controller: Controller | None = None

    def setup(self) -> Controller:
        m = self.manager
        c = m.controller(NAME, self.reconcile)
        nodes = m.informer(NODE, index_labels=(REMEDIATION_STATE_LABEL,))
        pods = m.informer(
            POD,
            field_selector=SCHEDULED_PODS,
            label_selector=CACHED_PODS,
            transform=pod_as_read,
            indexers={POD_NODE_INDEX: pod_node},
        )
        c.watch(
            nodes,
            node_request,
            Funcs(update=lambda old, new: _watched(old) != _watched(new)),
            map_old=False,
        )
        c.watch(pods, self._pod_to_node, map_old=False)
        c.watch(m.informer(PDB), lambda o: self._in_state(State.DRAIN), map_old=False)
        c.watch(
            m.informer(CLUSTER_POLICY),
            lambda o: self._all_nodes(),
            Funcs(update=lambda old, new: _policy_said(old) != _policy_said(new)),
            map_old=False,
        )
        self.controller = c
        return c

    # -- event mapping -------------------------------------------------------------------

    def _pod_to_node(self, obj: Object) -> Iterable[Request]:
        return node_of_pod(self.client.cache, obj, _draining)

    def _in_state(self, state: State) -> list[Request]:
        return nodes_labelled(self.client.cache, REMEDIATION_STATE_LABEL, state)

    def _all_nodes(self) -> list[Request]:
        return [Request("", name_of(n)) for n in self.client.list(NODE)]

    # -- the limits ----------------------------------------------------------------------

    def _with_state(self, state: State) -> list[Object]:
        return self.client.list(NODE, index=(label_index_name(REMEDIATION_STATE_LABEL), state))

    def _busy(self) -> set[str]:
        """Nodes under way: what the cache shows, and what we started since."""
        busy = set(self._started)
        for state in IN_PROGRESS:
            busy.update(name_of(n) for n in self._with_state(state))
        return busy

    def _slot_free(self, name: str, spec: RemediationSpec) -> bool:
        nodes = self.client.list(NODE)
        gpu_nodes = sum(1 for n in nodes if condition(n, GPU_HEALTHY) is not None)
        limit = scaled_value(spec.max_parallel, max(gpu_nodes, 1))
        busy = self._busy() - {name}
        return len(busy) < limit

    def _gauges(self) -> None:
        self.metrics.in_progress.set(sum(len(self._with_state(s)) for s in IN_PROGRESS))
        self.metrics.failed_nodes.set(len(self._with_state(State.FAILED)))

    # -- reconcile -----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        node = self.client.get(NODE, name)
        policy = active_cluster_policy(self.client.list(CLUSTER_POLICY))
        spec = remediation_spec(policy)
        if node is None or spec is None:
            self._started.discard(name)
            return None
        view = node_view(node, spec)
        if view.state is not None and view.state not in IN_PROGRESS:
            self._started.discard(name)
        now = self.clock()
        # Counting the nodes under way is for a sick node that may start only.
        starting = view.sickness is not None and view.state in (None, State.DONE)
        move = decide(view, spec, now, slot_free=starting and self._slot_free(name, spec))
        try:
            result = await self._carry_out(node, view, move, spec, policy, now)
        except Conflict:
            return Result(requeue_after=0.1)  # the node changed under us: read it again
        finally:
            self._gauges()
        return result

    async def _carry_out(
        self,
        node: Object,
        view: NodeView,
        move: Move,
        spec: RemediationSpec,
        policy: Object | None,
        now: float,
    ) -> Result | None:
        act = move.act
        if act is Act.NOTHING:
            return None
        if act is Act.WAIT:
            return Result(requeue_after=self.poll_seconds)
        if act is Act.HOLD_APPROVAL:
            await self._tell(node, WARNING, APPROVAL_REASON, move.why)
            return None
        if act is Act.DRY_RUN:
            if await self._tell(node, NORMAL, DRY_RUN_REASON, move.why):
                reason = view.sickness.reason if view.sickness else "unknown"
                self.metrics.total.labels(reason=reason, result="dry-run").inc()
            return None
        if act is Act.CLEANUP:
            await self._patch(node, {"spec": {"taints": taints_with(node, False)}})
            await self._condition(node, False, "Released", move.why)
            log.info("node %s: GPU remediation taint removed (%s)", view.name, move.why)
            return None
        if act is Act.START:
            body = self._step_body(move.to or State.TAINT, now, move.annotations)
            body["spec"] = {"taints": taints_with(node, True)}
            await self._patch(node, body)
            self._started.add(view.name)
            await self._announce(node, view, State.TAINT, move.why)
            return None
        if act is Act.DRAIN:
            return await self._drain(node, view, move, policy, now)
        if act is Act.FAIL:
            return await self._fail(node, view, move, spec, now)
        # MOVE
        to = move.to or State.DONE
        extra: dict[str, str | None] = {}
        if to is State.DONE:
            extra[RESET_REQUEST_ANNOTATION] = None
        body = self._step_body(to, now, extra)
        if to is State.DONE:
            body["spec"] = {"taints": taints_with(node, False)}
        await self._patch(node, body)
        if to is State.DONE:
            self._started.discard(view.name)
            await self._condition(node, False, "Recovered", move.why)
            reason = _reason(view)
            self.metrics.total.labels(reason=reason, result="succeeded").inc()
            self._changed()
        await self._announce(node, view, to, move.why)
        return None

    def _step_body(
        self, to: State, now: float, annotations: Mapping[str, str | None]
    ) -> dict[str, Any]:
        notes = dict(annotations)
        notes[REMEDIATION_SINCE_ANNOTATION] = format_time(now)
        return {"metadata": {"labels": {REMEDIATION_STATE_LABEL: str(to)}, "annotations": notes}}

    async def _drain(
        self, node: Object, view: NodeView, move: Move, policy: Object | None, now: float
    ) -> Result | None:
        rules = pod_deletion(policy)
        pods = gpu_pods(self._evictor.pods_on(view.name))
        pods = await self._evictor.readable(pods, delete_empty_dir=rules.delete_empty_dir)
        plan = deletion_plan(pods, rules, section=SECTION)
        if plan.clear:
            gpu = view.gpu if view.gpu is not None else 0
            request = f"{gpu}/{reset_id(view)}"
            body = self._step_body(State.RESET, now, {RESET_REQUEST_ANNOTATION: request})
            await self._patch(node, body)
            await self._announce(node, view, State.RESET, move.why)
            return None
        answers = await self._evictor.evict(plan.act)
        refused = [(p, r) for p, r in answers if not r.evicted]
        gone = [p for p, r in answers if r.evicted]
        if gone:
            log.info("node %s: evicted %s for the GPU remediation", view.name, describe(gone))
            await self.recorder.event(
                _node_ref(node),
                NORMAL,
                EVENT_REASONS[State.DRAIN],
                f"evicted {describe(gone)} through the Eviction API: GPU {view.gpu} is remediated",
            )
        blockers: list[str] = [str(b) for b in plan.blocked]
        if refused:
            pdbs = self._evictor.budgets()
            for pod, answer in refused:
                budget = disruption_blocker(pod, pdbs)
                blockers.append(
                    f"{pod.key} (PodDisruptionBudget {budget.namespace}/{budget.name} allows "
                    "no disruption now)"
                    if budget is not None
                    else f"{pod.key} ({answer.message or 'eviction refused'})"
                )
        if blockers:
            await self._tell(
                node, WARNING, BLOCKED_REASON, "GPU remediation waits for: " + "; ".join(blockers)
            )
        return Result(requeue_after=self.poll_seconds)

    async def _fail(
        self, node: Object, view: NodeView, move: Move, spec: RemediationSpec, now: float
    ) -> Result | None:
        notes: dict[str, str | None] = dict(move.annotations)
        if spec.reboot_on_failure:
            notes[REBOOT_REQUEST_ANNOTATION] = format_time(now)
        body = self._step_body(State.FAILED, now, notes)
        body["spec"] = {"taints": taints_with(node, True)}
        await self._patch(node, body)
        self._started.discard(view.name)
        why = move.why + (
            "; the node agent writes the host's reboot sentinel" if spec.reboot_on_failure else ""
        )
        await self._condition(node, True, "GPUDidNotRecover", why)
        xid = move.annotations.get("nvidia.com/gpu-remediation.xid") or view.xid
        reason = f"xid-{xid}" if xid and xid != "ECC" else "ecc"
        self.metrics.total.labels(reason=reason, result="failed").inc()
        self._changed()
        await self._announce(node, view, State.FAILED, why, warning=True)
        return None

    # -- writes --------------------------------------------------------------------------

    async def _patch(self, node: Object, body: dict[str, Any]) -> None:
        """One merge patch, guarded by the resourceVersion we decided on (taints are a
        list: a merge patch replaces it whole)."""
        body = {
            **body,
            "metadata": {**metadata_of(body), "resourceVersion": resource_version_of(node)},
        }
        try:
            await self.client.patch(NODE, name_of(node), body, quiet=True, whole_answer=False)
        except NotFound:
            return

    async def _condition(self, node: Object, failed: bool, reason: str, message: str) -> None:
        old = condition(node, REMEDIATION_FAILED_CONDITION)
        if not failed and old is None:
            return
        now = format_time(self.clock())
        entry = {
            "type": REMEDIATION_FAILED_CONDITION,
            "status": "True" if failed else "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        try:
            await self.client.patch(
                NODE,
                name_of(node),
                {"status": {"conditions": [entry]}},
                subresource="status",
                patch_type=PatchType.STRATEGIC_MERGE,
                quiet=True,
                whole_answer=False,
            )
        except NotFound:
            return

    async def _announce(
        self, node: Object, view: NodeView, to: State, why: str, *, warning: bool = False
    ) -> None:
        log.info("node %s: GPU remediation %s: %s", view.name, to, why)
        self._told.pop(view.name, None)
        self._changed()
        await self.recorder.event(
            _node_ref(node), WARNING if warning else NORMAL, EVENT_REASONS[to], why
        )

    async def _tell(self, node: Object, kind: str, reason: str, message: str) -> bool:
        """An Event, once per node and message; whether it was new."""
        name = name_of(node)
        if self._told.get(name) == message:
            return False
        self._told[name] = message
        log.info("node %s: %s", name, message)
        await self.recorder.event(_node_ref(node), kind, reason, message)
        return True

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


def _reason(view: NodeView) -> str:
    if view.xid and view.xid != "ECC":
        return f"xid-{view.xid}"
    return "ecc" if view.xid == "ECC" else (view.sickness.reason if view.sickness else "unknown")
