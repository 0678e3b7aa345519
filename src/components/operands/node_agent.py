"""`state-node-agent`: the node agent on every GPU node (ours; the reference has none).

It runs `gpu-operator node-agent` from the operator's own image: reads the GPUs through
NVML and publishes the node's GPUDriverReady, GPUHealthy and GPUValidated conditions, the
GPU processes and their pods (an annotation), and `gpu_operator_node_*` metrics on port
8010, scraped through a Service (and a ServiceMonitor when prometheus-operator's CRD is
installed). Off unless `nodeAgent.enabled`.

It needs the host's PIDs (NVML names processes by host PID; their cgroups name the pods),
the GPU device files (privileged) and the host root read-only (the kernel module's
version, the driver container's root, the toolkit, /proc); with GPU remediation's reboot
on failure, the host's /var/run writable for the reboot sentinel. It must run where no driver
pod does (a host-installed driver), so it is not a GPU client of the toolkit's runtime:
it loads libnvidia-ml from the driver's root itself.
"""

from __future__ import annotations

import posixpath
from typing import Any

from components.api import NODE_AGENT_DEPLOY_LABEL, REBOOT_SENTINEL, OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, MetricsService, Pod
from components.operands._pods import env_field, host_path, mount
from components.operands._rbac import rule

PORT = 8010
PORT_NAME = "node-agent"


class NodeAgent(DeclaredOperand):
    """The node agent DaemonSet, ServiceAccount, RBAC, Service (and ServiceMonitor)."""

    key = "node-agent"
    deploy_label = NODE_AGENT_DEPLOY_LABEL
    workloads = frozenset({CONTAINER})
    app = "gpu-operator-node-agent"
    account = "gpu-operator-node-agent"
    image = OperandImage.NODE_AGENT
    cluster_rules = (
        # Its own node: watch it (a field selector on its name), write its conditions and
        # the process list.
        rule([""], ["nodes"], ["get", "list", "watch", "patch"]),
        rule([""], ["nodes/status"], ["patch"]),
        # The pods on its node: whose is a GPU process.
        rule([""], ["pods"], ["list"]),
    )
    service = MetricsService(PORT, PORT_NAME)

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        agent = ctx.spec.node_agent
        mounts = [mount("host-root", "/host", read_only=True, propagation="HostToContainer")]
        volumes = [host_path("host-root", ctx.host_root)]
        remediation = ctx.spec.remediation
        if remediation.enabled and remediation.reboot_on_failure:
            # The one place it writes on the host: the reboot sentinel that kured watches,
            # mounted over the read-only root where the agent looks for it.
            run = posixpath.dirname(REBOOT_SENTINEL)
            volumes.append(host_path("host-run", posixpath.join(ctx.host_root, run), "Directory"))
            mounts.append(mount("host-run", posixpath.join("/host", run)))
        main = {
            "name": "node-agent",
            # Flags in the command, so that `nodeAgent.args` adds to them.
            "command": [
                "gpu-operator",
                "node-agent",
                "--host-root=/host",
                f"--driver-root={ctx.driver_install_dir}",
                f"--metrics-port={PORT}",
                f"--interval={agent.interval_seconds}",
            ],
            "ports": [{"name": PORT_NAME, "containerPort": PORT}],
            "securityContext": {"privileged": True, "runAsUser": 0},
            "volumeMounts": mounts,
        }
        pod = Pod(
            main,
            env=[env_field("NODE_NAME", "spec.nodeName")],
            volumes=volumes,
            host_pid=True,
        )
        return [self.daemonset(ctx, image, pod)]
