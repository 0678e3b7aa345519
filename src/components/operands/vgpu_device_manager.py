"""`state-vgpu-device-manager`: creates the vGPU devices of a `vm-vgpu` node from a named
configuration (`nvidia.com/vgpu.config` on the node, else `vgpuDeviceManager.config.default`)
in the ConfigMap `vgpuDeviceManager.config.name`, once the vGPU manager is loaded
(`vgpu-manager-ready`). The reference's built-in table of vGPU types is not shipped: the
policy names its ConfigMap. On while `sandboxWorkloads.enabled` and
`vgpuDeviceManager.enabled` (the default); without a named ConfigMap it runs nowhere, and
says so (`VGPUDevicesConfigMissing`) only while a node is a vGPU host.
"""

from __future__ import annotations

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import VM_VGPU, Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    PRIVILEGED,
    apply_component,
    build_pod_spec,
    config_map_volume,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
    validations_volume,
    wait_for_file,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._sandbox import labelled_nodes, sandbox_on
from components.operands._workloads import daemonset

NAME = "state-vgpu-device-manager"
DEPLOY_LABEL = deploy_label("vgpu-device-manager")
APP = "nvidia-vgpu-device-manager"
ACCOUNT = "nvidia-vgpu-device-manager"
CONFIG_DIR = "/vgpu-config"


class VGPUDeviceManager(BaseOperand):
    """The vGPU device manager DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_VGPU})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy) and policy.spec.vgpu_device_manager.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec.vgpu_device_manager
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                # It waits for the sandbox operand pods it paused (by node label) to go.
                rules=[rule([""], ["pods"], ["get", "list", "watch"])],
                # It watches its node's nvidia.com/vgpu.config and writes its labels
                # (vgpu.config.state, the paused operands) with an update, not a patch.
                cluster_rules=[rule([""], ["nodes"], ["get", "list", "watch", "update"])],
            )
        )
        if not spec.config.name:
            # Only a vGPU host needs it: a passthrough-only cluster is not told off.
            if not labelled_nodes(ctx.view.gpu_nodes, DEPLOY_LABEL):
                return rendered
            rendered.conditions.append(
                (
                    "VGPUDevicesConfigMissing",
                    f"{NAME}: set vgpuDeviceManager.config.name to the ConfigMap (key "
                    "config.yaml) that lists the vGPU devices of each configuration",
                )
            )
            return rendered
        image = image_or_condition(ctx, OperandImage.VGPU_DEVICE_MANAGER, rendered)
        if image is None:
            return rendered
        envs = [
            env_field("NAMESPACE", "metadata.namespace"),
            env_field("NODE_NAME", "spec.nodeName"),
            env("CONFIG_FILE", f"{CONFIG_DIR}/config.yaml"),
            env("DEFAULT_VGPU_CONFIG", spec.config.default),
        ]
        container = apply_component(
            {
                "name": APP,
                "image": image,
                "imagePullPolicy": pull_policy(spec),
                "env": merge_env(envs, spec.env),
                "securityContext": dict(PRIVILEGED),
                "volumeMounts": [
                    mount("vgpu-config", CONFIG_DIR),
                    mount("host-sys", "/sys"),
                    mount("host-root", "/host", propagation="HostToContainer"),
                    mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                ],
            },
            spec,
        )
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[
                wait_for_file(
                    ctx, "vgpu-manager-validation", "vgpu-manager-ready", "the vGPU manager"
                )
            ],
            containers=[container],
            volumes=[
                config_map_volume("vgpu-config", spec.config.name),
                host_path("host-sys", "/sys", "Directory"),
                host_path("host-root", ctx.host_root),
                host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
                validations_volume(),
            ],
            images=[spec],
            host_network=spec.host_network,
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
