"""`state-sandbox-validation`: the validator of VM nodes. It writes the node's workload to
`/run/nvidia/validations/workload-type` and checks, in order, what that workload needs:
GPUs bound to `vfio-pci` (`vfio-pci-ready`, passthrough), the vGPU manager loaded
(`vgpu-manager-ready`) and the vGPU devices created (`vgpu-devices-ready`); a step whose
manager the policy switches off is left out, as the reference does. The sandbox device
plugin waits for these files. On whenever `sandboxWorkloads.enabled`.
"""

from __future__ import annotations

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import VM_PASSTHROUGH, VM_VGPU, Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    VALIDATIONS_DIR,
    apply_component,
    build_pod_spec,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
    validations_volume,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._sandbox import sandbox_on
from components.operands._validation import PART_OF, validation_step
from components.operands._workloads import daemonset

NAME = "state-sandbox-validation"
DEPLOY_LABEL = deploy_label("sandbox-validator")
APP = "nvidia-sandbox-validator"
ACCOUNT = "nvidia-sandbox-validator"


class SandboxValidator(BaseOperand):
    """The sandbox validator DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy)

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec
        validator = spec.validator
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                # It gets its node (nvidia.com/gpu.workload.config); no pods of its own.
                cluster_rules=[rule([""], ["nodes"], ["get"])],
            )
        )
        image = image_or_condition(ctx, OperandImage.OPERATOR_VALIDATOR, rendered)
        if image is None:
            return rendered
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
            driver = mount(
                "driver-install-dir", "/run/nvidia/driver", propagation="HostToContainer"
            )
            steps.append(
                validation_step(ctx, image, "vgpu-manager", waiting, (), [host_root, driver])
            )
        if spec.vgpu_device_manager.enabled:
            steps.append(validation_step(ctx, image, "vgpu-devices", waiting, ()))
        main = apply_component(
            {
                "name": APP,
                "image": image,
                "imagePullPolicy": pull_policy(validator),
                "command": ["sh", "-c"],
                "args": ["echo all validations are successful; sleep infinity"],
                "securityContext": {"privileged": True},
                # Gone validator, gone files: the device plugin waits again on restart.
                "lifecycle": {
                    "preStop": {
                        "exec": {"command": ["/bin/sh", "-c", f"rm -f {VALIDATIONS_DIR}/*"]}
                    }
                },
                "volumeMounts": [
                    mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="Bidirectional")
                ],
            },
            validator,
        )
        if validator.env:
            main["env"] = merge_env([], validator.env)
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=steps,
            containers=[main],
            volumes=[
                validations_volume(),
                host_path("driver-install-dir", "/run/nvidia/driver"),
                host_path("host-root", ctx.host_root),
            ],
            images=[validator],
        )
        rendered.objects.append(daemonset(ctx, APP, pod, selector=PART_OF))
        return rendered
