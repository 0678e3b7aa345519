"""What the ClusterPolicy controller would apply for a policy, without applying it
(`gpu-operator plan`): the controller's own render, over a cache that only reads.

The controller is built as the operator builds it, but never registered to run: its view
of the cluster (`_view`) and its render (`PolicyOperands.render`) make the plan, so the
preview cannot drift from the reconcile. The objects come out as the applier writes them
(`with_ownership_labels`), and what the operator owns now is what its prune would weigh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components.api import ClusterPolicy
from components.controllers import _informers
from components.controllers._apply import (
    Applier,
    component_of,
    owned_by_kind,
    ref_of,
    with_ownership_labels,
)
from components.controllers._constants import CLUSTER_POLICY, NODE
from components.controllers._informers import GPU_NODE_INDEX
from components.controllers._policies import parse_spec
from components.controllers.clusterpolicy._controller import ClusterPolicyController
from components.controllers.clusterpolicy._operands import Plan
from components.metrics import OperatorMetrics
from components.operands import Operand
from reconciler import Manager, Object


@dataclass(frozen=True)
class Preview:
    """One policy's plan, and the objects it would apply (component, object)."""

    policy: ClusterPolicy
    plan: Plan
    objects: tuple[tuple[str, Object], ...]


class PolicyPreview:
    """Renders policies with the ClusterPolicy controller's code over `manager`'s cache
    (start it with `start`; nothing here writes)."""

    def __init__(
        self, manager: Manager, namespace: str, operands: Sequence[Operand] | None = None
    ) -> None:
        self.manager = manager
        _informers.register_all(manager, namespace)
        self.applier = Applier(manager, namespace)
        self.controller = ClusterPolicyController(
            manager,
            self.applier,
            OperatorMetrics(manager.registry),
            namespace=namespace,
            operands=operands,
        )

    async def start(self) -> None:
        await self.manager.cache.start()
        await self.manager.cache.wait_for_sync()

    async def stop(self) -> None:
        await self.manager.cache.stop()
        await self.manager.transport.close()

    async def render(self, obj: Object) -> Preview:
        """`obj`'s plan against the cluster as cached. Raises `pydantic.ValidationError`."""
        policy = parse_spec(obj)
        with_gpu = self.controller.client.list(NODE, index=(GPU_NODE_INDEX, "true"))
        view = await self.controller._view(obj, policy, with_gpu)
        plan = self.controller.operands.render(policy, view)
        objects = tuple((name, with_ownership_labels(o, name)) for name, o in plan.objects())
        return Preview(policy, plan, objects)

    async def cache_kinds_of(self, objects: Sequence[Object]) -> None:
        """Cache each kind of `objects`, as a first apply would, and wait for its list."""
        for obj in objects:
            self.applier.ensure_informer(obj)
        await self.manager.cache.wait_for_sync()

    def unwanted(self, preview: Preview) -> list[tuple[str, Object]]:
        """What the prune would delete (component, object): the cached objects a
        ClusterPolicy owns that the plan does not want, but a driver DaemonSet some node
        still depends on alone."""
        plan = preview.plan
        serving = plan.driver.serving(plan.rendered.get(plan.driver.operand or ""), ())
        return [
            (component_of(obj) or "", obj)
            for obj in self.applier.owned_objects(owned_by_kind(CLUSTER_POLICY.kind))
            if ref_of(obj) not in plan.desired and not plan.driver.stranded(obj, serving)
        ]

    def driver_operand(self, preview: Preview) -> str | None:
        """The operand whose DaemonSets run the driver."""
        return preview.plan.driver.operand
