"""`state-dcgm`: the standalone DCGM host engine on each GPU node, and the `nvidia-dcgm`
Service (port 5555, node-local traffic) that DCGM exporter connects to
(`DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555`).

Under a GPUCluster the DRA stack has neither the `nvidia` RuntimeClass nor a toolkit to
wait for: the pod claims all of its node's GPUs with admin access instead
(`_dra.all_gpus_template`), as the DRA validator claims its one.
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, MetricsService, Pod
from components.operands._dra import all_gpus_template, claim_gpus, on_dra_stack
from components.operands._names import DCGM_APP, DCGM_PORT
from components.operands._pods import run_nvidia_volume, toolkit_validation

#: Under a GPUCluster: the template of its pods' claim on their node's GPUs.
GPU_TEMPLATE = "nvidia-dcgm-gpus"
GPU_CLAIM = "gpus"


class DCGM(DeclaredOperand):
    """The DCGM DaemonSet, its ServiceAccount and Service."""

    key = "dcgm"
    workloads = frozenset({CONTAINER})
    app = DCGM_APP
    image = OperandImage.DCGM
    service = MetricsService(
        DCGM_PORT, "dcgm", scrape=False, monitor=False, internal_traffic_policy="Local"
    )

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = {
            "name": "nvidia-dcgm-ctr",
            "securityContext": {"privileged": True},
            "ports": [{"name": "dcgm", "containerPort": DCGM_PORT}],
        }
        volumes = [run_nvidia_volume()]
        if on_dra_stack(ctx.policy):

            def claim(spec: dict[str, Any], container: dict[str, Any]) -> None:
                claim_gpus(spec, container, GPU_TEMPLATE, GPU_CLAIM)

            return [
                all_gpus_template(ctx, GPU_TEMPLATE, GPU_CLAIM),
                self.daemonset(ctx, image, Pod(main, volumes, finish=claim)),
            ]
        pod = Pod(
            main,
            volumes=volumes,
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            runtime_class=True,
        )
        return [self.daemonset(ctx, image, pod)]
