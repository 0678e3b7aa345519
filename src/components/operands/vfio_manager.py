"""`state-vfio-manager`: binds every GPU of a `vm-passthrough` node to the `vfio-pci`
driver (`vfio-manage bind --all`) so KubeVirt can hand whole GPUs to virtual machines, and
unbinds them when its pod stops. A container driver still loaded on the node is unloaded
first (the driver manager init container). On while `sandboxWorkloads.enabled` and
`vfioManager.enabled` (the default).
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_PASSTHROUGH, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import env, host_path, mount
from components.operands._sandbox import (
    DRIVER_MANAGER_CLUSTER_RULES,
    manager_resources,
    privileged_s0,
    uninstall_driver,
)


class VFIOManager(DeclaredOperand):
    """The VFIO manager DaemonSet, its ServiceAccount and RBAC."""

    key = "vfio-manager"
    workloads = frozenset({VM_PASSTHROUGH})
    image = OperandImage.VFIO_MANAGER
    cluster_rules = DRIVER_MANAGER_CLUSTER_RULES
    sandbox = True

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        spec = ctx.spec.vfio_manager
        main = {
            "name": self.app,
            "command": ["/bin/sh", "-c"],
            "args": ["vfio-manage bind --all && while true; do sleep 86400; done"],
            "resources": manager_resources(),
            "securityContext": privileged_s0(),
            "volumeMounts": [
                mount("host-sys", "/sys"),
                mount("host-lib-modules", "/lib/modules", read_only=True),
                mount("host-root", "/host"),
            ],
            # Give the GPUs back to the host when the node leaves passthrough.
            "lifecycle": {
                "preStop": {"exec": {"command": ["/bin/sh", "-c", "vfio-manage unbind --all"]}}
            },
        }
        volumes = [
            host_path("host-sys", "/sys", "Directory"),
            host_path("host-lib-modules", "/lib/modules", "Directory"),
            host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
            host_path("host-root", ctx.host_root),
        ]
        pod = Pod(
            main,
            volumes,
            env=[env("HOST_ROOT", "/host")],
            init_containers=[uninstall_driver(ctx, spec.driver_manager, evict=False)],
            images=[spec.driver_manager],
            extra={"terminationGracePeriodSeconds": 30},
        )
        return [self.daemonset(ctx, image, pod)]
