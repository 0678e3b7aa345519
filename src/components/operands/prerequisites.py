"""`pre-requisites`: the cluster-wide objects operands need before any of them runs.

The RuntimeClass that GPU management pods (device plugin, GFD, DCGM, ...) and, with CDI,
user workloads name: `operator.runtimeClass` (default `nvidia`), whose handler is the
`nvidia` runtime the container toolkit configures. With CDI on (`cdi.enabled`, the
default) also `nvidia-cdi` and `nvidia-legacy`, for the toolkit's runtime handlers of the
same names (a workload picks CDI injection or the legacy hook by naming one). Named as the
reference names them; turning CDI off prunes the two.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import Rendered

NAME = "pre-requisites"
#: The RuntimeClasses (name = handler) that exist only while CDI is on.
CDI_RUNTIME_CLASSES = ("nvidia-cdi", "nvidia-legacy")


def _runtime_class(ctx: Ctx, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": ctx.meta(
            name, namespaced=False, labels={"app.kubernetes.io/component": "gpu-operator"}
        ),
        "handler": name,
    }


class Prerequisites(BaseOperand):
    """The RuntimeClasses (cluster-scoped, owned by the ClusterPolicy)."""

    name: str = NAME
    deploy_label: str | None = None

    def enabled(self, policy: ClusterPolicy) -> bool:
        return True

    def _render(self, ctx: Ctx) -> Rendered:
        names = [ctx.runtime_class]
        if ctx.spec.cdi.enabled:
            names += [n for n in CDI_RUNTIME_CLASSES if n != ctx.runtime_class]
        return Rendered(objects=[_runtime_class(ctx, name) for name in names])
