"""`state-vgpu-device-manager`: creates the vGPU devices of a `vm-vgpu` node from a named
configuration (`nvidia.com/vgpu.config` on the node, else `vgpuDeviceManager.config.default`)
in the ConfigMap `vgpuDeviceManager.config.name`, once the vGPU manager is loaded
(`vgpu-manager-ready`). The reference's built-in table of vGPU types is not shipped: the
policy names its ConfigMap. On while `sandboxWorkloads.enabled` and
`vgpuDeviceManager.enabled` (the default); without a named ConfigMap it runs nowhere, and
says so (`VGPUDevicesConfigMissing`) only while a node is a vGPU host.
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_VGPU, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import (
    PRIVILEGED,
    config_map_volume,
    env,
    env_field,
    host_path,
    mount,
    validations_volume,
    wait_for_file,
)
from components.operands._rbac import rule
from components.operands._sandbox import labelled_nodes

CONFIG_DIR = "/vgpu-config"


class VGPUDeviceManager(DeclaredOperand):
    """The vGPU device manager DaemonSet, its ServiceAccount and RBAC."""

    key = "vgpu-device-manager"
    workloads = frozenset({VM_VGPU})
    image = OperandImage.VGPU_DEVICE_MANAGER
    # It waits for the sandbox operand pods it paused (by node label) to go.
    rules = (rule([""], ["pods"], ["get", "list", "watch"]),)
    # It watches its node's nvidia.com/vgpu.config and writes its labels (vgpu.config.state,
    # the paused operands) with an update, not a patch.
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch", "update"]),)
    sandbox = True

    def can_run(self, ctx: Ctx, rendered: Rendered) -> bool:
        if ctx.spec.vgpu_device_manager.config.name:
            return True
        # Only a vGPU host needs it: a passthrough-only cluster is not told off.
        if labelled_nodes(ctx.view.gpu_nodes, self.deploy_label):
            rendered.conditions.append(
                (
                    "VGPUDevicesConfigMissing",
                    f"{self.name}: set vgpuDeviceManager.config.name to the ConfigMap (key "
                    "config.yaml) that lists the vGPU devices of each configuration",
                )
            )
        return False

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        config = ctx.spec.vgpu_device_manager.config
        envs = [
            env_field("NAMESPACE", "metadata.namespace"),
            env_field("NODE_NAME", "spec.nodeName"),
            env("CONFIG_FILE", f"{CONFIG_DIR}/config.yaml"),
            env("DEFAULT_VGPU_CONFIG", config.default),
        ]
        main = {
            "name": self.app,
            "securityContext": dict(PRIVILEGED),
            "volumeMounts": [
                mount("vgpu-config", CONFIG_DIR),
                mount("host-sys", "/sys"),
                mount("host-root", "/host", propagation="HostToContainer"),
                mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
            ],
        }
        volumes = [
            config_map_volume("vgpu-config", config.name),
            host_path("host-sys", "/sys", "Directory"),
            host_path("host-root", ctx.host_root),
            host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
            validations_volume(),
        ]
        wait = wait_for_file(
            ctx, "vgpu-manager-validation", "vgpu-manager-ready", "the vGPU manager"
        )
        return [self.daemonset(ctx, image, Pod(main, volumes, env=envs, init_containers=[wait]))]
