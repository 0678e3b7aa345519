"""`state-cc-manager`: switches the GPUs of a confidential-computing capable node
(`nvidia.com/cc.capable=true`) into the CC mode the node asks for (`nvidia.com/cc.mode`)
or, failing that, `ccManager.defaultMode` (`on`, `off`, `devtools`). It runs on VM nodes
(the node labeller gives them `nvidia.com/gpu.deploy.cc-manager`). On while
`ccManager.enabled`, sandbox workloads or not, as in the reference.
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
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._sandbox import manager_resources, privileged_s0
from components.operands._workloads import daemonset

NAME = "state-cc-manager"
DEPLOY_LABEL = deploy_label("cc-manager")
APP = "nvidia-cc-manager"
ACCOUNT = "nvidia-cc-manager"
CC_CAPABLE_LABEL = "nvidia.com/cc.capable"


class CCManager(BaseOperand):
    """The CC manager DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.cc_manager.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec.cc_manager
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                rules=[rule([""], ["pods"], ["get", "list", "watch", "delete"])],
                # It reports the mode it applied in the node label nvidia.com/cc.mode.state.
                cluster_rules=[rule([""], ["nodes"], ["get", "list", "watch", "patch"])],
            )
        )
        image = image_or_condition(ctx, OperandImage.CC_MANAGER, rendered)
        if image is None:
            return rendered
        envs = [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "void")]
        if spec.default_mode is not None:
            envs.append(env("DEFAULT_CC_MODE", spec.default_mode))
        container = apply_component(
            {
                "name": APP,
                "image": image,
                "imagePullPolicy": pull_policy(spec),
                "env": merge_env(envs, spec.env),
                "resources": manager_resources(),
                "securityContext": privileged_s0(),
                "volumeMounts": [mount("host-sys", "/sys"), mount("run-nvidia", "/run/nvidia")],
                "lifecycle": {
                    "preStop": {
                        "exec": {
                            "command": ["rm", "-f", f"{VALIDATIONS_DIR}/.cc-manager-ctr-ready"]
                        }
                    }
                },
            },
            spec,
        )
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            node_selector={CC_CAPABLE_LABEL: "true"},
            containers=[container],
            volumes=[
                host_path("host-sys", "/sys", "Directory"),
                host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
            ],
            images=[spec],
            host_network=spec.host_network,
        )
        pod["terminationGracePeriodSeconds"] = 30
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
