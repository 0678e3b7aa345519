"""`state-dcgm`: the standalone DCGM host engine on each GPU node, and the `nvidia-dcgm`
Service (port 5555, node-local traffic) that DCGM exporter connects to
(`DCGM_REMOTE_HOSTENGINE_INFO=nvidia-dcgm:5555`).
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, MetricsService, Pod
from components.operands._names import DCGM_APP, DCGM_PORT
from components.operands._pods import run_nvidia_volume, toolkit_validation


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
        pod = Pod(
            main,
            volumes=[run_nvidia_volume()],
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            runtime_class=True,
        )
        return [self.daemonset(ctx, image, pod)]
