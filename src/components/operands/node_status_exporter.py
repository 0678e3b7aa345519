"""`state-node-status-exporter`: per-node metrics about the GPU stack's own state (which
validations passed), on port 8000, from the validator image (`COMPONENT=metrics`). Off
unless `nodeStatusExporter.enabled`. A ServiceMonitor is added when the prometheus-operator
CRD is installed.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy
from components.api import Operand as ImageOperand
from components.operands._common import (
    VALIDATIONS_DIR,
    ClusterView,
    Ctx,
    Rendered,
    apply_component,
    cluster_role,
    daemonset,
    deploy_label,
    env,
    env_field,
    host_path,
    image_or_condition,
    merge_env,
    mount,
    pod_spec,
    pull_policy,
    role,
    rule,
    service,
    service_account,
    validations_volume,
)

NAME = "state-node-status-exporter"
DEPLOY_LABEL = deploy_label("node-status-exporter")
APP = "nvidia-node-status-exporter"
ACCOUNT = "nvidia-node-status-exporter"
PORT = 8000
PORT_NAME = "node-status"


def _service_monitor(ctx: Ctx) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": ctx.meta(APP, labels={"app": APP}),
        "spec": {
            "endpoints": [{"port": PORT_NAME, "path": "/metrics"}],
            "jobLabel": "app",
            "namespaceSelector": {"matchNames": [ctx.namespace]},
            "selector": {"matchLabels": {"app": APP}},
        },
    }


class NodeStatusExporter:
    """The node status exporter DaemonSet, ServiceAccount, RBAC, Service (and
    ServiceMonitor)."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.node_status_exporter.enabled

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        if not self.enabled(policy):
            return Rendered()
        ctx = Ctx(policy, view, self.name)
        exporter = policy.spec.node_status_exporter
        rendered = Rendered(
            objects=[
                service_account(ctx, ACCOUNT),
                *role(ctx, ACCOUNT, [rule([""], ["pods"], ["get", "list"])]),
                *cluster_role(ctx, ACCOUNT, [rule([""], ["nodes"], ["get", "list", "watch"])]),
                service(
                    ctx,
                    APP,
                    port=PORT,
                    port_name=PORT_NAME,
                    selector={"app": APP},
                    annotations={"prometheus.io/scrape": "true", "prometheus.io/port": str(PORT)},
                ),
            ]
        )
        if view.has_service_monitor_crd:
            rendered.objects.append(_service_monitor(ctx))
        image = image_or_condition(ctx, ImageOperand.NODE_STATUS_EXPORTER, rendered)
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
        pod = pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            containers=[container],
            volumes=[validations_volume(), host_path("host-root", ctx.host_root)],
            images=[exporter],
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
