"""`pre-requisites`: the cluster-wide objects operands need before any of them runs.

The RuntimeClass that GPU management pods (device plugin, GFD, DCGM, ...) and, with CDI,
user workloads name: `operator.runtimeClass` (default `nvidia`), whose handler is the
`nvidia` runtime the container toolkit configures. Named the same, as the reference does.
"""

from __future__ import annotations

from components.api import ClusterPolicy
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import Rendered

NAME = "pre-requisites"


class Prerequisites(BaseOperand):
    """The `nvidia` RuntimeClass (cluster-scoped, owned by the ClusterPolicy)."""

    name: str = NAME
    deploy_label: str | None = None

    def enabled(self, policy: ClusterPolicy) -> bool:
        return True

    def _render(self, ctx: Ctx) -> Rendered:
        runtime_class = ctx.runtime_class
        return Rendered(
            objects=[
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": ctx.meta(
                        runtime_class,
                        namespaced=False,
                        labels={"app.kubernetes.io/component": "gpu-operator"},
                    ),
                    "handler": runtime_class,
                }
            ]
        )
