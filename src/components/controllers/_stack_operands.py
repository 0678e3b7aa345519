"""What both stacks' controllers (the ClusterPolicy's and the GPUCluster's) do alike with
their operands: render every enabled one into one immutable `Rendering` before anything is
written, write objects a bounded number at a time, a failed write a problem and not an
error (`OperandWrites`), and judge each enabled operand's readiness.

Each stack keeps what only it has: the ClusterPolicy's driver placement, its takeover of a
reference driver and its wait for node labels; the GPUCluster's Deployment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from components.controllers._apply import Applier, Change, ObjectRef, ref_of
from components.controllers._pod_tally import DaemonSetPodTally
from components.controllers._status import OperandReadiness
from components.operands import Operand, Rendered
from reconciler import Client, Object, name_of
from reconciler.errors import BadRequest, Forbidden, Invalid

APPLY_CONCURRENCY = 8
"""Objects applied at once, at most: prerequisites (ServiceAccounts, roles, ConfigMaps,
Services, RuntimeClasses) first, then the bindings, then the workloads."""
RENDER_FAILED = "RenderFailed"
APPLY_FAILED = "ApplyFailed"
BINDINGS = frozenset({"RoleBinding", "ClusterRoleBinding"})


def wave(obj: Object, workloads: frozenset[str]) -> int:
    """When an object is applied: 0 with the prerequisites, 1 with the bindings (after the
    roles they name: the API server checks a binding made by anyone without `bind`, the
    operator, against its role's rules and refuses it while that role does not exist yet),
    2 with the workloads (after what their pods use)."""
    kind = obj.get("kind")
    return 2 if kind in workloads else 1 if kind in BINDINGS else 0


@dataclass(frozen=True)
class Rendering:
    """What a stack wants, rendered before anything is written."""

    operands: tuple[tuple[str, bool], ...]
    """Every operand, in order, and whether it is enabled."""
    rendered: Mapping[str, Rendered]
    render_failed: frozenset[str]
    """Operands whose render failed: their existing objects are left alone."""
    problems: tuple[tuple[str, str], ...]
    desired: frozenset[ObjectRef]

    def objects(self) -> list[tuple[str, Object]]:
        return [(name, obj) for name, r in self.rendered.items() for obj in r.objects]

    def of_kind(self, operand: str, kind: str) -> list[Object]:
        rendered = self.rendered.get(operand)
        return [o for o in rendered.objects if o.get("kind") == kind] if rendered else []


def render_operands(
    operands: Sequence[Operand],
    enabled: Callable[[Operand], bool],
    render: Callable[[Operand], Rendered],
) -> Rendering:
    """Every enabled operand rendered; a render that fails is a problem, not an error."""
    listed: list[tuple[str, bool]] = []
    rendered: dict[str, Rendered] = {}
    failed: set[str] = set()
    problems: list[tuple[str, str]] = []
    for operand in operands:
        on = enabled(operand)
        listed.append((operand.name, on))
        if not on:
            continue
        try:
            result = render(operand)
        except ValueError as exc:  # a renderer should say so in a condition instead
            failed.add(operand.name)
            problems.append((RENDER_FAILED, f"{operand.name}: {exc}"))
            continue
        rendered[operand.name] = result
        problems += result.conditions
    return Rendering(
        operands=tuple(listed),
        rendered=rendered,
        render_failed=frozenset(failed),
        problems=tuple(problems),
        desired=frozenset(ref_of(obj) for r in rendered.values() for obj in r.objects),
    )


class OperandSet:
    """A stack's operands, in order, with what writes them (`applier`) and what their
    readiness is judged from (the cache, the DaemonSets' pod counts)."""

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


class OperandWrites:
    """One apply's writes and its running account: the changes made, the operands an
    object of which could not be written, and why."""

    def __init__(self, applier: Applier) -> None:
        self.applier = applier
        self.changes: list[Change] = []
        self.failed: set[str] = set()
        self.problems: list[tuple[str, str]] = []
        self._gate = asyncio.Semaphore(APPLY_CONCURRENCY)

    async def write_all(self, objects: Iterable[tuple[str, Object]]) -> None:
        """Write each (operand, object) at once, at most `APPLY_CONCURRENCY` in flight."""
        await asyncio.gather(*(self._bounded(obj, name) for name, obj in objects))

    async def write_waves(
        self, objects: Sequence[tuple[str, Object]], workloads: frozenset[str], waves: Iterable[int]
    ) -> None:
        """Write each wave of `objects` (`wave`) in turn, all of a wave at once."""
        for w in waves:
            await self.write_all((n, o) for n, o in objects if wave(o, workloads) == w)

    async def _bounded(self, obj: Object, component: str) -> None:
        async with self._gate:
            await self._write(obj, component)

    async def _write(self, obj: Object, component: str) -> None:
        try:
            change = await self.applier.write(obj, component)
        except (Invalid, BadRequest, Forbidden) as exc:
            # The object as rendered cannot be written; say so and go on with the rest.
            what = f"{obj.get('kind')} {name_of(obj)}"
            self.problems.append((APPLY_FAILED, f"{component}: {what}: {exc}"))
            self.failed.add(component)
            return
        if change is not None:
            self.changes.append(change)


def readiness_of(
    operands: Iterable[tuple[str, bool]], judge: Callable[[str], OperandReadiness]
) -> list[OperandReadiness]:
    """Each operand's readiness in order: `judge`'s for an enabled one."""
    return [judge(name) if on else OperandReadiness(name, enabled=False) for name, on in operands]
