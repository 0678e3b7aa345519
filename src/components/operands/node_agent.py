"""`state-node-agent`: the node agent on every GPU node (ours; the reference has none).

It runs `gpu-operator node-agent` from the operator's own image: reads the GPUs through
NVML and publishes the node's GPUDriverReady, GPUHealthy and GPUValidated conditions, the
GPU processes and their pods (an annotation), and `gpu_operator_node_*` metrics on port
8010, scraped through a Service (and a ServiceMonitor when prometheus-operator's CRD is
installed). Off unless `nodeAgent.enabled`.

It needs the host's PIDs (NVML names processes by host PID; their cgroups name the pods),
the GPU device files (privileged) and the host root read-only (the kernel module's
version, the driver container's root, the toolkit, /proc). It must run where no driver
pod does (a host-installed driver), so it is not a GPU client of the toolkit's runtime:
it loads libnvidia-ml from the driver's root itself.
"""

from __future__ import annotations

from components.api import NODE_AGENT_DEPLOY_LABEL, ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import Rendered
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import daemonset, prometheus_scrape, service, service_monitor

NAME = "state-node-agent"
DEPLOY_LABEL = NODE_AGENT_DEPLOY_LABEL
APP = "gpu-operator-node-agent"
ACCOUNT = "gpu-operator-node-agent"
PORT = 8010
PORT_NAME = "node-agent"


class NodeAgent(BaseOperand):
    """The node agent DaemonSet, ServiceAccount, RBAC, Service (and ServiceMonitor)."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.node_agent.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        agent = ctx.spec.node_agent
        rendered = Rendered(
            objects=[
                *account_and_rbac(
                    ctx,
                    ACCOUNT,
                    cluster_rules=[
                        # Its own node: watch it (a field selector on its name), write
                        # its conditions and the process list.
                        rule([""], ["nodes"], ["get", "list", "watch", "patch"]),
                        rule([""], ["nodes/status"], ["patch"]),
                        # The pods on its node: whose is a GPU process.
                        rule([""], ["pods"], ["list"]),
                    ],
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
        image = image_or_condition(ctx, OperandImage.NODE_AGENT, rendered)
        if image is None:
            return rendered
        envs = [env_field("NODE_NAME", "spec.nodeName")]
        container = apply_component(
            {
                "name": "node-agent",
                "image": image,
                "imagePullPolicy": pull_policy(agent),
                # Flags in the command, so that `nodeAgent.args` adds to them.
                "command": [
                    "gpu-operator",
                    "node-agent",
                    "--host-root=/host",
                    f"--driver-root={ctx.driver_install_dir}",
                    f"--metrics-port={PORT}",
                    f"--interval={agent.interval_seconds}",
                ],
                "env": merge_env(envs, agent.env),
                "ports": [{"name": PORT_NAME, "containerPort": PORT}],
                "securityContext": {"privileged": True, "runAsUser": 0},
                "volumeMounts": [
                    mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                ],
            },
            agent,
        )
        pod = build_pod_spec(
            ctx,
            host_network=agent.host_network,
            host_pid=True,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            containers=[container],
            volumes=[host_path("host-root", ctx.host_root)],
            images=[agent],
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
