"""`state-node-status-exporter`: per-node metrics about the GPU stack's own state (which
validations passed), on port 8000, from the validator image (`COMPONENT=metrics`). Off
unless `nodeStatusExporter.enabled`. A ServiceMonitor is added when the prometheus-operator
CRD is installed.
"""

from __future__ import annotations

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    VALIDATIONS_DIR,
    apply_component,
    build_pod_spec,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
    validations_volume,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import daemonset, prometheus_scrape, service, service_monitor

NAME = "state-node-status-exporter"
DEPLOY_LABEL = deploy_label("node-status-exporter")
APP = "nvidia-node-status-exporter"
ACCOUNT = "nvidia-node-status-exporter"
PORT = 8000
PORT_NAME = "node-status"


class NodeStatusExporter(BaseOperand):
    """The node status exporter DaemonSet, ServiceAccount, RBAC, Service (and
    ServiceMonitor)."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.node_status_exporter.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        exporter = ctx.spec.node_status_exporter
        rendered = Rendered(
            objects=[
                *account_and_rbac(
                    ctx,
                    ACCOUNT,
                    rules=[rule([""], ["pods"], ["get", "list"])],
                    cluster_rules=[rule([""], ["nodes"], ["get", "list", "watch"])],
                ),
                service(
                    ctx,
                    APP,
                    port=PORT,
                    port_name=PORT_NAME,
                    selector={"app": APP},
                    annotations=prometheus_scrape(PORT),
                ),
            ]
        )
        if ctx.view.has_service_monitor_crd:
            rendered.objects.append(
                service_monitor(ctx, APP, {"port": PORT_NAME, "path": "/metrics"})
            )
        image = image_or_condition(ctx, OperandImage.NODE_STATUS_EXPORTER, rendered)
        if image is None:
            return rendered
        envs = [
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("COMPONENT", "metrics"),
            env("METRICS_PORT", str(PORT)),
            env_field("NODE_NAME", "spec.nodeName"),
            env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
        ]
        container = apply_component(
            {
                "name": "nvidia-node-status-exporter",
                "image": image,
                "imagePullPolicy": pull_policy(exporter),
                "command": ["nvidia-validator"],
                "env": merge_env(envs, exporter.env),
                "ports": [{"name": PORT_NAME, "containerPort": PORT}],
                "securityContext": {"privileged": True, "runAsUser": 0},
                "volumeMounts": [
                    mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer"),
                    mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                ],
            },
            exporter,
        )
        pod = build_pod_spec(
            ctx,
            host_network=ctx.spec.node_status_exporter.host_network,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            containers=[container],
            volumes=[validations_volume(), host_path("host-root", ctx.host_root)],
            images=[exporter],
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
