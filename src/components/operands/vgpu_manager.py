"""`state-vgpu-manager`: the NVIDIA vGPU host driver on `vm-vgpu` nodes, which lets
KubeVirt carve each GPU into vGPUs. Like the driver its image is tagged per OS
(`vgpu-manager:<version>-ubuntu22.04`); there is no public image, so the policy must name
`vgpuManager.repository` and `.version` (a condition says so otherwise). A container
driver still loaded on the node is unloaded first. On while `sandboxWorkloads.enabled` and
`vgpuManager.enabled`.

One DaemonSet, `nvidia-vgpu-manager-daemonset`, for the OS release of the `vm-vgpu` nodes;
it exists only while such nodes exist. vGPU hosts on several OS releases are not served
(condition `VGPUManagerMultipleOS`).
"""

from __future__ import annotations

from typing import Any

from components.api import OS_ID_LABEL, OS_VERSION_LABEL, ImageError, OperandImage, os_tag
from components.operands._context import Ctx
from components.operands._contract import VM_VGPU, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._names import nodes_phrase
from components.operands._pods import host_path, mount
from components.operands._rbac import rule
from components.operands._sandbox import (
    DRIVER_MANAGER_CLUSTER_RULES,
    labelled_nodes,
    privileged_s0,
    uninstall_driver,
)


class VGPUManager(DeclaredOperand):
    """The vGPU manager DaemonSet, its ServiceAccount and RBAC."""

    key = "vgpu-manager"
    workloads = frozenset({VM_VGPU})
    app = "nvidia-vgpu-manager-daemonset"
    image = OperandImage.VGPU_MANAGER
    cluster_rules = (*DRIVER_MANAGER_CLUSTER_RULES, rule(["apps"], ["daemonsets"], ["get"]))
    sandbox = True

    def can_run(self, ctx: Ctx, rendered: Rendered) -> bool:
        spec = ctx.spec.vgpu_manager
        if spec.version:
            return True
        rendered.conditions.append(
            (
                "VGPUManagerImageMissing",
                f"{self.name}: set vgpuManager.repository and vgpuManager.version to the "
                "vGPU manager image built from NVIDIA's vGPU host driver (there is no "
                "public default)",
            )
        )
        return False

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        release = self._release(ctx, rendered)
        if release is None:
            return []
        (os_id, os_version), tag = release
        main = {
            "name": "nvidia-vgpu-manager-ctr",
            "command": ["nvidia-driver"],
            "args": ["init"],
            "securityContext": privileged_s0(),
            "volumeMounts": [
                mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
                mount("host-os-release", "/host-etc/os-release"),
                mount("vfio", "/dev/vfio"),
                mount("cgroup", "/sys/fs/cgroup"),
                mount("var-log", "/var/log"),
                mount("dev-log", "/dev/log"),
            ],
        }
        volumes = [
            host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
            host_path("host-os-release", f"{ctx.host_root.rstrip('/')}/etc/os-release"),
            host_path("cgroup", "/sys/fs/cgroup", "Directory"),
            host_path("vfio", "/dev/vfio", "Directory"),
            host_path("host-root", ctx.host_root),
            host_path("host-sys", "/sys", "Directory"),
            host_path("var-log", "/var/log", "Directory"),
            host_path("dev-log", "/dev/log"),
        ]
        manager = ctx.spec.vgpu_manager.driver_manager
        pod = Pod(
            main,
            volumes,
            init_containers=[uninstall_driver(ctx, manager, evict=True)],
            images=[manager],
            node_selector={OS_ID_LABEL: os_id, OS_VERSION_LABEL: os_version},
            host_pid=True,
            host_ipc=True,
        )
        return [self.daemonset(ctx, f"{image}-{tag}", pod)]

    def _release(self, ctx: Ctx, rendered: Rendered) -> tuple[tuple[str, str], str] | None:
        """The one OS release of the vGPU hosts and its image tag; None (and why, where
        there are hosts) otherwise."""
        hosts = labelled_nodes(ctx.view.gpu_nodes, self.deploy_label or "")
        if not hosts:
            return None
        releases = {(n.os_id or "", n.os_version or "") for n in hosts}
        if len(releases) > 1:
            rendered.conditions.append(
                (
                    "VGPUManagerMultipleOS",
                    f"{self.name}: vGPU hosts run {len(releases)} OS releases; one vGPU manager "
                    f"image serves one: move them to one release",
                )
            )
            return None
        release = releases.pop()
        try:
            return release, os_tag(*release)
        except ImageError as exc:
            names = [n.name for n in hosts]
            rendered.conditions.append(
                ("OSLabelsMissing", f"{self.name}: {nodes_phrase(names)} no OS labels: {exc}")
            )
            return None
