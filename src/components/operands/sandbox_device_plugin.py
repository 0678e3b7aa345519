"""`state-sandbox-device-plugin`: NVIDIA's KubeVirt GPU device plugin. On a
`vm-passthrough` node it advertises each GPU bound to `vfio-pci` as the resource KubeVirt
asks for, `nvidia.com/<GPU model>` (the model's PCI device name, e.g.
`nvidia.com/GA100_A100_PCIE_80GB`); on a `vm-vgpu` node the vGPU types it finds. It starts
only after the sandbox validator has written the node's workload and, for that workload,
`vfio-pci-ready` or `vgpu-devices-ready`. Users steer it through `sandboxDevicePlugin.env`
and `.args` (the plugin's own settings, e.g. which devices it serves). On while
`sandboxWorkloads.enabled` and `sandboxDevicePlugin.enabled` (the default).
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import VM_PASSTHROUGH, VM_VGPU, Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    PRIVILEGED,
    VALIDATIONS_DIR,
    apply_component,
    build_pod_spec,
    env,
    host_path,
    merge_env,
    mount,
    pull_policy,
    validations_volume,
)
from components.operands._rbac import account_and_rbac
from components.operands._sandbox import WORKLOAD_TYPE_FILE, sandbox_on
from components.operands._workloads import daemonset

NAME = "state-sandbox-device-plugin"
DEPLOY_LABEL = deploy_label("sandbox-device-plugin")
APP = "nvidia-sandbox-device-plugin-daemonset"
ACCOUNT = "nvidia-sandbox-device-plugin"


def _wait_for_workload(ctx: Ctx, name: str, workload: str, ready_file: str) -> dict[str, Any]:
    """An init container that waits for `ready_file` on a node of `workload` and passes
    straight through on a node of the other VM workload."""
    script = (
        f"until [ -f {WORKLOAD_TYPE_FILE} ]; do echo waiting for the workload type; sleep 5; "
        f'done; if [ "$(cat {WORKLOAD_TYPE_FILE})" != "{workload}" ]; then '
        f"echo not a {workload} node, nothing to wait for; exit 0; fi; "
        f"until [ -f {VALIDATIONS_DIR}/{ready_file} ]; do echo waiting for {ready_file}; "
        "sleep 5; done"
    )
    return {
        "name": name,
        "image": ctx.validator_image,
        "imagePullPolicy": pull_policy(ctx.spec.validator),
        "command": ["sh", "-c"],
        "args": [script],
        "env": [env("NVIDIA_VISIBLE_DEVICES", "void")],
        "securityContext": dict(PRIVILEGED),
        "volumeMounts": [
            mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer")
        ],
    }


class SandboxDevicePlugin(BaseOperand):
    """The KubeVirt GPU device plugin DaemonSet and its ServiceAccount."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy) and policy.spec.sandbox_device_plugin.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec.sandbox_device_plugin
        rendered = Rendered(objects=account_and_rbac(ctx, ACCOUNT))
        image = image_or_condition(ctx, OperandImage.SANDBOX_DEVICE_PLUGIN, rendered)
        if image is None:
            return rendered
        container = apply_component(
            {
                "name": "nvidia-sandbox-device-plugin-ctr",
                "image": image,
                "imagePullPolicy": pull_policy(spec),
                # The image starts the plugin by CMD alone, which sandboxDevicePlugin.args
                # would replace: name the program, as the reference does.
                "command": ["nvidia-kubevirt-gpu-device-plugin"],
                "securityContext": dict(PRIVILEGED),
                "volumeMounts": [
                    mount("device-plugin", "/var/lib/kubelet/device-plugins"),
                    mount("vfio", "/dev/vfio"),
                ],
            },
            spec,
        )
        if spec.env:
            container["env"] = merge_env([], spec.env)
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[
                _wait_for_workload(ctx, "vfio-pci-validation", "vm-passthrough", "vfio-pci-ready"),
                _wait_for_workload(ctx, "vgpu-devices-validation", "vm-vgpu", "vgpu-devices-ready"),
            ],
            containers=[container],
            volumes=[
                host_path("device-plugin", ctx.kubelet_host_dir("device-plugins")),
                validations_volume(),
                host_path("vfio", "/dev/vfio"),
            ],
            images=[spec],
            host_network=spec.host_network,
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
