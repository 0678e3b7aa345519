"""`state-cc-manager`: switches the GPUs of a confidential-computing capable node
(`nvidia.com/cc.capable=true`) into the CC mode the node asks for (`nvidia.com/cc.mode`)
or, failing that, `ccManager.defaultMode` (`on`, `off`, `devtools`). It runs on VM nodes
(the node labeller gives them `nvidia.com/gpu.deploy.cc-manager`). On while
`ccManager.enabled`, sandbox workloads or not, as in the reference.
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_PASSTHROUGH, VM_VGPU, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import VALIDATIONS_DIR, env, env_field, host_path, mount
from components.operands._rbac import rule
from components.operands._sandbox import manager_resources, privileged_s0

CC_CAPABLE_LABEL = "nvidia.com/cc.capable"


class CCManager(DeclaredOperand):
    """The CC manager DaemonSet, its ServiceAccount and RBAC (on while `ccManager.enabled`,
    sandbox workloads or not)."""

    key = "cc-manager"
    workloads = frozenset({VM_PASSTHROUGH, VM_VGPU})
    image = OperandImage.CC_MANAGER
    rules = (rule([""], ["pods"], ["get", "list", "watch", "delete"]),)
    # It reports the mode it applied in the node label nvidia.com/cc.mode.state.
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch", "patch"]),)

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        spec = ctx.spec.cc_manager
        envs = [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "void")]
        if spec.default_mode is not None:
            envs.append(env("DEFAULT_CC_MODE", spec.default_mode))
        ready_file = f"{VALIDATIONS_DIR}/.cc-manager-ctr-ready"
        main = {
            "name": self.app,
            "resources": manager_resources(),
            "securityContext": privileged_s0(),
            "volumeMounts": [mount("host-sys", "/sys"), mount("run-nvidia", "/run/nvidia")],
            "lifecycle": {"preStop": {"exec": {"command": ["rm", "-f", ready_file]}}},
        }
        volumes = [
            host_path("host-sys", "/sys", "Directory"),
            host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
        ]
        pod = Pod(
            main,
            volumes,
            env=envs,
            node_selector={CC_CAPABLE_LABEL: "true"},
            extra={"terminationGracePeriodSeconds": 30},
        )
        return [self.daemonset(ctx, image, pod)]
