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

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_PASSTHROUGH, VM_VGPU, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import (
    PRIVILEGED,
    VALIDATIONS_DIR,
    env,
    host_path,
    mount,
    pull_policy,
    validations_volume,
)
from components.operands._sandbox import WORKLOAD_TYPE_FILE


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


class SandboxDevicePlugin(DeclaredOperand):
    """The KubeVirt GPU device plugin DaemonSet and its ServiceAccount."""

    key = "sandbox-device-plugin"
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})
    app = "nvidia-sandbox-device-plugin-daemonset"
    image = OperandImage.SANDBOX_DEVICE_PLUGIN
    sandbox = True

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = {
            "name": "nvidia-sandbox-device-plugin-ctr",
            # The image starts the plugin by CMD alone, which sandboxDevicePlugin.args
            # would replace: name the program, as the reference does.
            "command": ["nvidia-kubevirt-gpu-device-plugin"],
            "securityContext": dict(PRIVILEGED),
            "volumeMounts": [
                mount("device-plugin", "/var/lib/kubelet/device-plugins"),
                mount("vfio", "/dev/vfio"),
            ],
        }
        volumes = [
            host_path("device-plugin", ctx.kubelet_host_dir("device-plugins")),
            validations_volume(),
            host_path("vfio", "/dev/vfio"),
        ]
        waits = [
            _wait_for_workload(ctx, "vfio-pci-validation", "vm-passthrough", "vfio-pci-ready"),
            _wait_for_workload(ctx, "vgpu-devices-validation", "vm-vgpu", "vgpu-devices-ready"),
        ]
        return [self.daemonset(ctx, image, Pod(main, volumes, init_containers=waits))]
