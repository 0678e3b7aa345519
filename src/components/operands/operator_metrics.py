"""`state-operator-metrics`: the ServiceMonitor for the operator's own `/metrics`.

The operator's Service (`gpu-operator`, port `gpu-operator-metrics`, label
`app: gpu-operator`) ships with the operator's manifests, since it must exist before any
policy does; this state adds, as the reference's does, a prometheus-operator ServiceMonitor
`gpu-operator` selecting it when `operator.metrics.serviceMonitor.enabled`, scraping over
HTTPS with Prometheus' token. Without the ServiceMonitor CRD it gives a condition instead.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import Rendered
from components.operands._workloads import configured_service_monitor

NAME = "state-operator-metrics"
#: The `app` label of the operator's metrics Service, which the ServiceMonitor selects.
APP = "gpu-operator"
PORT_NAME = "gpu-operator-metrics"


#: The operator serves /metrics over HTTPS to callers the API server authorizes (its
#: `--metrics-secure` default): Prometheus sends its own ServiceAccount token (which needs
#: the ClusterRole gpu-operator-metrics-reader) and skips verifying the self-signed
#: certificate, as controller-runtime's docs suggest for that default.
SECURE_ENDPOINT = {
    "scheme": "https",
    "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
    "tlsConfig": {"insecureSkipVerify": True},
}


def _service_monitor(ctx: Ctx) -> dict[str, Any]:
    monitor = configured_service_monitor(
        ctx, APP, PORT_NAME, ctx.spec.operator.metrics.service_monitor
    )
    for endpoint in monitor["spec"]["endpoints"]:
        endpoint.update(SECURE_ENDPOINT)
    return monitor


class OperatorServiceMonitor(BaseOperand):
    """The operator's ServiceMonitor; enabled by `operator.metrics.serviceMonitor.enabled`."""

    name: str = NAME
    deploy_label: str | None = None

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.operator.metrics.service_monitor.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        if ctx.view.has_service_monitor_crd:
            return Rendered(objects=[_service_monitor(ctx)])
        return Rendered(
            conditions=[
                (
                    "ServiceMonitorCRDMissing",
                    "operator.metrics.serviceMonitor.enabled is true but the ServiceMonitor "
                    "CRD (servicemonitors.monitoring.coreos.com) is not installed",
                )
            ]
        )
