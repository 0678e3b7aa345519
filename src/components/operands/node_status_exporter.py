"""`state-node-status-exporter`: per-node metrics about the GPU stack's own state (which
validations passed), on port 8000, from the validator image (`COMPONENT=metrics`). Off
unless `nodeStatusExporter.enabled`. A ServiceMonitor is added when the prometheus-operator
CRD is installed.
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, MetricsService, Pod
from components.operands._pods import (
    VALIDATIONS_DIR,
    env,
    env_field,
    host_path,
    mount,
    validations_volume,
)
from components.operands._rbac import rule

PORT = 8000
PORT_NAME = "node-status"


class NodeStatusExporter(DeclaredOperand):
    """The node status exporter DaemonSet, ServiceAccount, RBAC, Service (and
    ServiceMonitor)."""

    key = "node-status-exporter"
    workloads = frozenset({CONTAINER})
    image = OperandImage.NODE_STATUS_EXPORTER
    rules = (rule([""], ["pods"], ["get", "list"]),)
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch"]),)
    service = MetricsService(PORT, PORT_NAME)

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = {
            "name": "nvidia-node-status-exporter",
            "command": ["nvidia-validator"],
            "ports": [{"name": PORT_NAME, "containerPort": PORT}],
            "securityContext": {"privileged": True, "runAsUser": 0},
            "volumeMounts": [
                mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer"),
                mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            ],
        }
        envs = [
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("COMPONENT", "metrics"),
            env("METRICS_PORT", str(PORT)),
            env_field("NODE_NAME", "spec.nodeName"),
            env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
        ]
        volumes = [validations_volume(), host_path("host-root", ctx.host_root)]
        return [self.daemonset(ctx, image, Pod(main, volumes, env=envs))]
