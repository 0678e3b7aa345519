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

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from components.api import GPU_CLUSTER_NAME, ClusterPolicy, GPUCluster, dra_stack
from components.controllers._apply import (
    Applier,
    Change,
    ObjectRef,
    component_of,
    owned_by_kind,
    ref_of,
)
from components.controllers._constants import DAEMONSET, GPU_CLUSTER
from components.controllers._pod_tally import DaemonSetPodTally
from components.controllers._readiness import operand_readiness
from components.controllers._status import OperandReadiness
from components.operands import ClusterView, Operand, Rendered
from reconciler import GVK, Client, Object, generation_of, name_of, namespace_of
from reconciler.errors import BadRequest, Forbidden, Invalid

DEPLOYMENT = GVK("apps", "v1", "Deployment")
APPLY_CONCURRENCY = 32
"""Writes in flight at once: each wave (about thirty objects for the reference's sample)
goes out in one round trip, as a new GPUCluster's kubelet plugin waits for all of it."""
RENDER_FAILED = "RenderFailed"
APPLY_FAILED = "ApplyFailed"
_BINDINGS = frozenset({"RoleBinding", "ClusterRoleBinding"})
_WORKLOADS = frozenset({DAEMONSET.kind, DEPLOYMENT.kind})


def _wave(obj: Object) -> int:
    kind = obj.get("kind")
    return 2 if kind in _WORKLOADS else 1 if kind in _BINDINGS else 0


@dataclass(frozen=True)
class Plan:
    """What one GPUCluster wants, rendered before anything is written."""

    operands: tuple[tuple[str, bool], ...]
    rendered: Mapping[str, Rendered]
    render_failed: frozenset[str]
    problems: tuple[tuple[str, str], ...]
    desired: frozenset[ObjectRef]

    def objects(self) -> list[tuple[str, Object]]:
        return [(name, obj) for name, r in self.rendered.items() for obj in r.objects]

    def of_kind(self, operand: str, kind: str) -> list[Object]:
        rendered = self.rendered.get(operand)
        return [o for o in rendered.objects if o.get("kind") == kind] if rendered else []


@dataclass(frozen=True)
class Applied:
    changes: tuple[Change, ...]
    failed: frozenset[str]
    problems: tuple[tuple[str, str], ...]


@dataclass
class _Writes:
    changes: list[Change] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)
    problems: list[tuple[str, str]] = field(default_factory=list)


class StackOperands:
    """The operands of the GPUCluster, written and judged."""

    def __init__(
        self,
        client: Client,
        applier: Applier,
        operands: Sequence[Operand],
        pods: DaemonSetPodTally,
    ) -> None:
        self.client = client
        self.applier = applier
        self.operands = list(operands)
        self.pods = pods

    def render(self, stack: ClusterPolicy, view: ClusterView) -> Plan:
        operands: list[tuple[str, bool]] = []
        rendered: dict[str, Rendered] = {}
        failed: set[str] = set()
        problems: list[tuple[str, str]] = []
        for operand in self.operands:
            enabled = operand.enabled(stack)
            operands.append((operand.name, enabled))
            if not enabled:
                continue
            try:
                result = operand.render(stack, view)
            except ValueError as exc:
                failed.add(operand.name)
                problems.append((RENDER_FAILED, f"{operand.name}: {exc}"))
                continue
            rendered[operand.name] = result
            problems += result.conditions
        return Plan(
            operands=tuple(operands),
            rendered=rendered,
            render_failed=frozenset(failed),
            problems=tuple(problems),
            desired=frozenset(ref_of(o) for r in rendered.values() for o in r.objects),
        )

    async def apply(self, plan: Plan) -> Applied:
        writes = _Writes()
        gate = asyncio.Semaphore(APPLY_CONCURRENCY)

        async def apply(name: str, obj: Object) -> None:
            async with gate:
                await self._write(obj, name, writes)

        objects = plan.objects()
        for wave in (0, 1, 2):
            await asyncio.gather(*(apply(n, o) for n, o in objects if _wave(o) == wave))
        return Applied(tuple(writes.changes), frozenset(writes.failed), tuple(writes.problems))

    async def _write(self, obj: Object, component: str, writes: _Writes) -> None:
        try:
            change = await self.applier.write(obj, component)
        except (Invalid, BadRequest, Forbidden) as exc:
            what = f"{obj.get('kind')} {name_of(obj)}"
            writes.problems.append((APPLY_FAILED, f"{component}: {what}: {exc}"))
            writes.failed.add(component)
            return
        if change is not None:
            writes.changes.append(change)

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
        out = []
        for name, enabled in plan.operands:
            if not enabled:
                out.append(OperandReadiness(name, enabled=False))
                continue
            found = operand_readiness(
                self.client, self.pods, name, plan.of_kind(name, DAEMONSET.kind)
            )
            for deployment in plan.of_kind(name, DEPLOYMENT.kind):
                found = self._with_deployment(found, deployment)
            out.append(found)
        return out

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
