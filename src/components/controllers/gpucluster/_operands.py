"""One GPUCluster's operands: rendered into one immutable plan, applied, pruned and
judged, each step handing its result to the next (as the ClusterPolicy's, without what
only the device-plugin stack has: the driver's placement, a reference driver's takeover).
New DaemonSets wait for the GPU nodes' DRA deploy labels as the policy's do
(`_label_wait`): created on a half-labelled cluster, the kubelet plugin's pods came 2-4x
slower than on labelled nodes at 1,000 nodes.

Roles, accounts and everything else first, then the bindings (the API server checks a
binding against its role's rules), then the DaemonSets and the Deployment. Readiness is
the DaemonSets' (the reference's rules, `operand_readiness`) and the compute-domain
controller Deployment's ready replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from components.api import GPU_CLUSTER_NAME, ClusterPolicy, GPUCluster, dra_stack
from components.controllers._apply import (
    Change,
    OperandSet,
    OperandWrites,
    Rendering,
    component_of,
    owned_by_kind,
    render_operands,
)
from components.controllers._constants import DAEMONSET, GPU_CLUSTER
from components.controllers._readiness import operand_readiness, readiness_of
from components.controllers._status import OperandReadiness
from components.operands import ClusterView, Operand
from reconciler import GVK, Object, generation_of, name_of, namespace_of

DEPLOYMENT = GVK("apps", "v1", "Deployment")
_WORKLOADS = frozenset({DAEMONSET.kind, DEPLOYMENT.kind})
APPLY_CONCURRENCY = 32
"""Writes in flight at once: each wave (about thirty objects for the reference's sample)
goes out in one round trip, as a new GPUCluster's kubelet plugin waits for all of it."""

Plan = Rendering
"""What one GPUCluster wants, rendered before anything is written."""


@dataclass(frozen=True)
class Applied:
    changes: tuple[Change, ...]
    failed: frozenset[str]
    problems: tuple[tuple[str, str], ...]
    held: tuple[str, ...] = ()
    """DaemonSets not created yet: they wait for the node labels (`_label_wait`)."""
    hold_seconds: float = 0.0
    """How much longer they wait at most."""


class StackOperands(OperandSet):
    """The operands of the GPUCluster, written and judged."""

    def render(self, stack: ClusterPolicy, view: ClusterView) -> Plan:
        return render_operands(
            self.operands, lambda o: o.enabled(stack), lambda o: o.render(stack, view)
        )

    async def apply(self, plan: Plan, *, label_wait: Callable[[], float] | None = None) -> Applied:
        """Write what the plan wants. `label_wait`, asked only when a DaemonSet is new: the
        seconds new DaemonSets should still wait for node labels (0: create them now)."""
        writes = OperandWrites(self.applier, APPLY_CONCURRENCY)
        objects = plan.objects()
        held: list[str] = []
        hold: float | None = None
        for _, obj in objects:
            if label_wait is not None and obj.get("kind") == DAEMONSET.kind and self._is_new(obj):
                hold = label_wait() if hold is None else hold
                if hold > 0:
                    held.append(name_of(obj))
        if held:
            objects = [
                (n, o)
                for n, o in objects
                if not (o.get("kind") == DAEMONSET.kind and name_of(o) in held)
            ]
        await writes.write_waves(objects, _WORKLOADS, (0, 1, 2))
        return Applied(
            tuple(writes.changes),
            frozenset(writes.failed),
            tuple(writes.problems),
            tuple(held),
            hold or 0.0,
        )

    def _is_new(self, obj: Object) -> bool:
        return self.client.get(DAEMONSET, name_of(obj), namespace_of(obj)) is None

    async def prune(self, plan: Plan, applied: Applied, uid: str) -> list[Change]:
        """Delete what this GPUCluster owns and no longer wants (an operand whose render or
        apply failed keeps what it has)."""
        failed = plan.render_failed | applied.failed
        return await self.applier.prune(
            plan.desired,
            owned_by_kind(GPU_CLUSTER.kind, uid),
            keep=lambda o: component_of(o) in failed,
        )

    def readiness(self, plan: Plan) -> list[OperandReadiness]:
        return readiness_of(plan.operands, lambda name: self._judged(plan, name))

    def _judged(self, plan: Plan, name: str) -> OperandReadiness:
        found = operand_readiness(self.client, self.pods, name, plan.of_kind(name, DAEMONSET.kind))
        for deployment in plan.of_kind(name, DEPLOYMENT.kind):
            found = self._with_deployment(found, deployment)
        return found

    def _with_deployment(self, found: OperandReadiness, wanted: Object) -> OperandReadiness:
        """Not ready while the Deployment's replicas are not all ready at its generation."""
        cached = self.client.get(DEPLOYMENT, name_of(wanted), namespace_of(wanted))
        if cached is None:
            why = f"Deployment {name_of(wanted)} not created yet"
        else:
            status = cached.get("status") or {}
            want = int((cached.get("spec") or {}).get("replicas", 1) or 0)
            ready = int(status.get("readyReplicas") or 0)
            seen = int(status.get("observedGeneration") or 0) >= generation_of(cached)
            if seen and ready >= want:
                return found
            why = f"Deployment {name_of(wanted)}: {ready}/{want} replicas ready"
        message = f"{found.message}; {why}" if found.message else why
        return replace(found, ready=False, message=message)


def rendered_kinds(operands: Sequence[Operand]) -> list[tuple[GVK, bool]]:
    """Every kind the operands render (and whether it is namespaced), from a render of a
    GPUCluster with defaults: the operator watches them from the start, so that what it
    owns is cached before its first reconcile."""
    stack = dra_stack(GPUCluster.from_dict({"metadata": {"name": GPU_CLUSTER_NAME}}))
    view = ClusterView(namespace="-", gpu_nodes=[], has_service_monitor_crd=False, owner=None)
    seen: dict[GVK, bool] = {}
    for operand in operands:
        if operand.enabled(stack):
            for obj in operand.render(stack, view).objects:
                seen.setdefault(GVK.of(obj), bool(namespace_of(obj)))
    return list(seen.items())
