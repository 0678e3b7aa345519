"""`state-dcgm`: the standalone DCGM host engine on each GPU node, and the `nvidia-dcgm`
Service (port 5555, node-local traffic) that DCGM exporter connects to
(`DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555`).
"""

from __future__ import annotations

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import CONTAINER, Rendered
from components.operands._names import DCGM_APP, DCGM_PORT, deploy_label
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    merge_env,
    pull_policy,
    run_nvidia_volume,
    toolkit_validation,
)
from components.operands._rbac import service_account
from components.operands._workloads import daemonset, service

NAME = "state-dcgm"
DEPLOY_LABEL = deploy_label("dcgm")
APP = DCGM_APP
ACCOUNT = "nvidia-dcgm"
PORT = DCGM_PORT


class DCGM(BaseOperand):
    """The DCGM DaemonSet, its ServiceAccount and Service."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({CONTAINER})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.dcgm.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        dcgm = ctx.spec.dcgm
        rendered = Rendered(
            objects=[
                service_account(ctx, ACCOUNT),
                service(
                    ctx,
                    APP,
                    port=PORT,
                    port_name="dcgm",
                    selector={"app": APP},
                    internal_traffic_policy="Local",
                ),
            ]
        )
        image = image_or_condition(ctx, OperandImage.DCGM, rendered)
        if image is None:
            return rendered
        container = apply_component(
            {
                "name": "nvidia-dcgm-ctr",
                "image": image,
                "imagePullPolicy": pull_policy(dcgm),
                "securityContext": {"privileged": True},
                "ports": [{"name": "dcgm", "containerPort": PORT}],
            },
            dcgm,
        )
        if dcgm.env:
            container["env"] = merge_env([], dcgm.env)
        pod = build_pod_spec(
            ctx,
            host_network=ctx.spec.dcgm.host_network,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            containers=[container],
            volumes=[run_nvidia_volume()],
            images=[dcgm],
            runtime_class=True,
        )
        rendered.objects.append(
            daemonset(ctx, APP, pod, pod_annotations=ctx.management_annotations("nvidia-dcgm-ctr"))
        )
        return rendered
