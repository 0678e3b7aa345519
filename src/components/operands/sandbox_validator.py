"""`state-sandbox-validation`: the validator of VM nodes. It writes the node's workload to
`/run/nvidia/validations/workload-type` and checks, in order, what that workload needs:
GPUs bound to `vfio-pci` (`vfio-pci-ready`, passthrough), the vGPU manager loaded
(`vgpu-manager-ready`) and the vGPU devices created (`vgpu-devices-ready`); a step whose
manager the policy switches off is left out, as the reference does. The sandbox device
plugin waits for these files. On whenever `sandboxWorkloads.enabled`.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy, OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_PASSTHROUGH, VM_VGPU, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import (
    env,
    env_field,
    host_path,
    mount,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._sandbox import sandbox_on
from components.operands._validation import PART_OF, validation_step, validator_main


class SandboxValidator(DeclaredOperand):
    """The sandbox validator DaemonSet, its ServiceAccount and RBAC."""

    key = "sandbox-validator"
    name = "state-sandbox-validation"
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})
    image = OperandImage.OPERATOR_VALIDATOR
    # It gets its node (nvidia.com/gpu.workload.config); no pods of its own.
    cluster_rules = (rule([""], ["nodes"], ["get"]),)

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy)

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        # Gone validator, gone files: the device plugin waits again on restart.
        main = validator_main(self.app, {"privileged": True}, "*")
        volumes = [
            validations_volume(),
            host_path("driver-install-dir", "/run/nvidia/driver"),
            host_path("host-root", ctx.host_root),
        ]
        pod = Pod(
            main,
            volumes,
            init_containers=_steps(ctx, image),
            host_network=False,
            selector=PART_OF,
        )
        return [self.daemonset(ctx, image, pod)]


def _steps(ctx: Ctx, image: str) -> list[dict[str, Any]]:
    """One validation init container per VM operand the policy switches on."""
    spec = ctx.spec
    waiting = [
        env("WITH_WAIT", "true"),
        env_field("NODE_NAME", "spec.nodeName"),
        # What a node without the workload label runs, which each step checks for.
        env("DEFAULT_GPU_WORKLOAD_CONFIG", spec.sandbox_workloads.default_workload),
    ]
    host_root = mount("host-root", "/host", read_only=True, propagation="HostToContainer")
    steps = []
    if spec.vfio_manager.enabled:
        steps.append(validation_step(ctx, image, "vfio-pci", waiting, (), [host_root]))
    if spec.vgpu_manager.enabled:
        driver = mount("driver-install-dir", "/run/nvidia/driver", propagation="HostToContainer")
        steps.append(validation_step(ctx, image, "vgpu-manager", waiting, (), [host_root, driver]))
    if spec.vgpu_device_manager.enabled:
        steps.append(validation_step(ctx, image, "vgpu-devices", waiting, ()))
    return steps
