"""One GPUCluster's operands: rendered into one immutable plan, applied, pruned and
judged, each step handing its result to the next (as the ClusterPolicy's, without what
only the device-plugin stack has: the driver's placement, a reference driver's takeover,
the wait for node labels).

Roles, accounts and everything else first, then the bindings (the API server checks a
binding against its role's rules), then the DaemonSets and the Deployment. Readiness is
the DaemonSets' (the reference's rules, `operand_readiness`) and the compute-domain
controller Deployment's ready replicas.
"""

from __future__ import annotations

from collections.abc import Sequence
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

Plan = Rendering
"""What one GPUCluster wants, rendered before anything is written."""


@dataclass(frozen=True)
class Applied:
    changes: tuple[Change, ...]
    failed: frozenset[str]
    problems: tuple[tuple[str, str], ...]


class StackOperands(OperandSet):
    """The operands of the GPUCluster, written and judged."""

    def render(self, stack: ClusterPolicy, view: ClusterView) -> Plan:
        return render_operands(
            self.operands, lambda o: o.enabled(stack), lambda o: o.render(stack, view)
        )

    async def apply(self, plan: Plan) -> Applied:
        writes = OperandWrites(self.applier)
        await writes.write_waves(plan.objects(), _WORKLOADS, (0, 1, 2))
        return Applied(tuple(writes.changes), frozenset(writes.failed), tuple(writes.problems))

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
