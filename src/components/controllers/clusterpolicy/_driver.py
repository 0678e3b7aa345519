"""Where the driver DaemonSets of a policy come from: the one place the driver differs from
the other operands in a policy's reconcile.

With `spec.driver.useNvidiaDriverCRD` the policy renders only what every driver pod shares
(ServiceAccount, RBAC, ConfigMaps) and NVIDIADriver resources make the DaemonSets (one set
per NVIDIADriver, `components.controllers._nvidiadriver`); otherwise the policy renders
them itself. Each of the two is a `DriverPlacement`, chosen once per reconcile, so the
render, apply, prune and readiness steps ask it instead of testing for the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from components.api import DRIVER_DEPLOY_LABEL, ClusterPolicy
from components.controllers._apply import component_of, owned_by_kind
from components.controllers._constants import DAEMONSET, NODE, NVIDIA_DRIVER
from components.controllers._driver_crd import policy_without_driver_crd, uses_driver_crd
from components.controllers._selection import nodes_only_served_by
from components.operands import ClusterView, Operand, Rendered
from reconciler import Client, Object, name_of


def driver_operand(operands: Sequence[Operand]) -> str | None:
    """The name of the operand that deploys the driver (None: none does)."""
    return next((op.name for op in operands if op.deploy_label == DRIVER_DEPLOY_LABEL), None)


def _daemonsets(objects: Sequence[Object]) -> list[Object]:
    return [o for o in objects if o.get("kind") == DAEMONSET.kind]


@dataclass(frozen=True)
class DriverPlacement:
    """The driver DaemonSets rendered from the policy itself."""

    client: Client
    namespace: str
    operand: str | None
    """The driver operand's name (None: no operand deploys the driver)."""

    @staticmethod
    def of(
        policy: ClusterPolicy, client: Client, namespace: str, operand: str | None
    ) -> DriverPlacement:
        cls = NVIDIADriverPlacement if uses_driver_crd(policy) else DriverPlacement
        return cls(client, namespace, operand)

    def is_driver(self, name: str | None) -> bool:
        return name is not None and name == self.operand

    def enabled(self, operand: Operand, policy: ClusterPolicy) -> bool:
        return operand.enabled(policy)

    def render(self, operand: Operand, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        return operand.render(policy, view)

    def readiness_daemonsets(self, rendered: Rendered | None) -> list[Object]:
        """The DaemonSets the driver's readiness is judged on."""
        return _daemonsets(rendered.objects) if rendered else []

    def serving(self, rendered: Rendered | None, held: Sequence[str]) -> list[Object] | None:
        """The driver DaemonSets that should serve the nodes (None: the driver is disabled).
        One still held does not exist: no pod is handed to it, no node counted as served."""
        if rendered is None:
            return None
        return [o for o in _daemonsets(rendered.objects) if name_of(o) not in held]

    def stranded(self, obj: Object, serving: Sequence[Object] | None) -> set[str]:
        """The nodes an unwanted driver DaemonSet of ours still serves alone (it stays
        while there are any)."""
        if obj.get("kind") != DAEMONSET.kind or not self.is_driver(component_of(obj)):
            return set()
        if serving is None:
            return set()  # the driver is disabled: its DaemonSets go
        return nodes_only_served_by(obj, serving, self.client.list(NODE))


@dataclass(frozen=True)
class NVIDIADriverPlacement(DriverPlacement):
    """The driver DaemonSets made by NVIDIADriver resources (`useNvidiaDriverCRD`)."""

    def enabled(self, operand: Operand, policy: ClusterPolicy) -> bool:
        # Its shared objects are ours; its DaemonSets NVIDIADrivers'.
        return self.is_driver(operand.name) or operand.enabled(policy)

    def render(self, operand: Operand, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        if not self.is_driver(operand.name):
            return operand.render(policy, view)
        # The ServiceAccount, RBAC and ConfigMaps every driver pod uses, and no DaemonSet:
        # those come from the NVIDIADriver controller, one set per NVIDIADriver.
        shared = operand.render(policy_without_driver_crd(policy), replace(view, gpu_nodes=[]))
        return Rendered(objects=[o for o in shared.objects if o.get("kind") != DAEMONSET.kind])

    def readiness_daemonsets(self, rendered: Rendered | None) -> list[Object]:
        return self._made_by_nvidia_drivers()

    def serving(self, rendered: Rendered | None, held: Sequence[str]) -> list[Object] | None:
        return self._made_by_nvidia_drivers()

    def _made_by_nvidia_drivers(self) -> list[Object]:
        """The driver DaemonSets NVIDIADriver resources made (cached)."""
        owned = owned_by_kind(NVIDIA_DRIVER.kind)
        return [
            ds
            for ds in self.client.list(DAEMONSET, namespace=self.namespace)
            if self.is_driver(component_of(ds)) and owned(ds)
        ]
