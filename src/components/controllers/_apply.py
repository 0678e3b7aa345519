"""Writing what the renderers want: server-side apply, skipped when nothing changed, and
pruning what we own but no longer want. Both stacks' controllers (the ClusterPolicy's and
the GPUCluster's) render every enabled operand into one immutable `Rendering` before
anything is written, and write it a bounded number of objects at a time, a failed write a
problem and not an error (`OperandWrites`).

Every write goes through `Client.apply` with the one field manager and the hash
annotation, so an object whose cached copy already carries the desired hash costs nothing.
Each real change (the apply says whether it created or updated) is returned as a `Change`
for the caller to report (an Event, a line).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from components.api import (
    COMPONENT_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
)
from components.controllers import _informers
from components.controllers._readiness import DaemonSetPodTally
from components.operands import Operand, Rendered
from reconciler import (
    GVK,
    Client,
    Informer,
    Manager,
    Object,
    is_deleting,
    labels_of,
    metadata_of,
    name_of,
    namespace_of,
    owner_references_of,
    uid_of,
)
from reconciler.errors import BadRequest, Forbidden, Invalid

log = logging.getLogger("components.controllers.apply")

ObjectRef = tuple[str, str, str, str]
"""(group, kind, namespace, name): which object, whatever its API version."""


def ref_of(obj: Object) -> ObjectRef:
    gvk = GVK.of(obj)
    return (gvk.group, gvk.kind, namespace_of(obj), name_of(obj))


def describe(obj: Object) -> str:
    ns = namespace_of(obj)
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{name_of(obj)}"


@dataclass(frozen=True)
class Change:
    """One write that changed the cluster."""

    verb: str  # created | updated | deleted
    what: str  # "DaemonSet gpu-operator/nvidia-driver-daemonset-ubuntu22.04"
    component: str

    def __str__(self) -> str:
        return f"{self.verb} {self.what}"


def controller_owner(obj: Object) -> dict[str, object] | None:
    return next((r for r in owner_references_of(obj) if r.get("controller")), None)


def component_of(obj: Object) -> str:
    return labels_of(obj).get(COMPONENT_LABEL, "")


def with_ownership_labels(obj: Object, component: str) -> Object:
    """`obj` with the labels every object we render must carry (added if missing)."""
    labels = labels_of(obj)
    if (
        labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        and labels.get(COMPONENT_LABEL) == component
    ):
        return obj
    meta = dict(metadata_of(obj))
    meta["labels"] = {**labels, MANAGED_BY_LABEL: MANAGED_BY_VALUE, COMPONENT_LABEL: component}
    return {**obj, "metadata": meta}


class Applier:
    """Applies and prunes the objects of the controllers, through one manager's client."""

    def __init__(self, manager: Manager, namespace: str) -> None:
        self.manager = manager
        self.client: Client = manager.client
        self.namespace = namespace
        self._listeners: list[Callable[[Informer], None]] = []

    def on_new_informer(self, listener: Callable[[Informer], None]) -> None:
        """Call `listener` with each owned-kind informer created from now on (a controller
        that watches what it owns watches the new kind too)."""
        self._listeners.append(listener)

    @property
    def owned_informers(self) -> list[Informer]:
        return [i for i in self.manager.cache.informers if _informers.is_owned_kind(i)]

    def ensure_informer(self, obj: Object) -> None:
        """Cache the kind of `obj` (first time it is rendered), so it can be pruned and its
        applies skipped.

        Does not wait for the new informer's first list: a worker must not sit in a
        reconcile for a cache. Until the list lands `Client.apply` reads the object from
        the server, and the list's adds bring the owners back to prune what it finds.
        """
        gvk = GVK.of(obj)
        if self.manager.cache.is_cached(gvk):
            return
        informer = _informers.owned(
            self.manager, gvk, self.namespace if namespace_of(obj) else None
        )
        log.debug("caching %s, first rendered now", gvk)
        for listener in self._listeners:
            listener(informer)

    async def write(self, obj: Object, component: str) -> Change | None:
        """Label `obj` as ours and server-side apply it; a Change when the cluster changed."""
        obj = with_ownership_labels(obj, component)
        self.ensure_informer(obj)
        applied = await self.client.apply(obj)
        if not applied.changed:
            return None
        return Change(applied.operation.value, describe(obj), component)

    def owned_objects(self, owned_by: Callable[[Object], bool]) -> list[Object]:
        """Cached objects we rendered whose controlling owner passes `owned_by`."""
        out: list[Object] = []
        for informer in self.owned_informers:
            for obj in informer.store.list():
                if component_of(obj) and owned_by(obj):
                    out.append(obj)
        return out

    async def prune(
        self,
        desired: Iterable[ObjectRef],
        owned_by: Callable[[Object], bool],
        *,
        keep: Callable[[Object], bool] = lambda _: False,
    ) -> list[Change]:
        """Delete what `owned_by` says is ours, is not `desired`, and `keep` lets go."""
        wanted = set(desired)
        changes: list[Change] = []
        for obj in self.owned_objects(owned_by):
            if ref_of(obj) in wanted or keep(obj):
                continue
            if is_deleting(obj):
                continue
            await delete_judged(self.client, obj)
            changes.append(Change("deleted", describe(obj), component_of(obj)))
        return changes


async def delete_judged(client: Client, obj: Object) -> None:
    """Delete `obj`, the very object judged (its uid a precondition: one replaced meanwhile
    under its name refuses, 409); one already gone is no error."""
    await client.delete(
        GVK.of(obj),
        name_of(obj),
        namespace=namespace_of(obj),
        uid=uid_of(obj) or None,
        missing_ok=True,
    )


def owned_by_kind(kind: str, uid: str | None = None) -> Callable[[Object], bool]:
    """Objects whose controlling owner is of `kind` (and has `uid`, when given)."""

    def test(obj: Object) -> bool:
        ref = controller_owner(obj)
        if ref is None or ref.get("kind") != kind:
            return False
        return uid is None or ref.get("uid") == uid

    return test


# -- what both stacks' controllers (ClusterPolicy, GPUCluster) do alike with their operands

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

    def __init__(self, applier: Applier, concurrency: int = APPLY_CONCURRENCY) -> None:
        self.applier = applier
        self.changes: list[Change] = []
        self.failed: set[str] = set()
        self.problems: list[tuple[str, str]] = []
        self._gate = asyncio.Semaphore(concurrency)

    async def write_all(self, objects: Iterable[tuple[str, Object]]) -> None:
        """Write each (operand, object) at once, at most `concurrency` in flight."""
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
