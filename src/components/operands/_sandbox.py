"""What the sandbox (VM) operands share: the switch that turns them all on, and the
containers the VFIO and vGPU managers start with.

A GPU handed to a virtual machine is not driven by the container stack: the node labeller
gives a `vm-passthrough` or `vm-vgpu` node these operands' deploy labels instead of the
driver's, toolkit's and device plugin's (`controllers._labels`). The operands themselves
only render while `sandboxWorkloads.enabled`, as the reference's states do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.api import (
    ClusterPolicy,
    DriverManagerSpec,
    OperandImage,
    opted_out,
    resolve_image,
)
from components.operands._context import Ctx
from components.operands._contract import GPUNode
from components.operands._pods import (
    PRIVILEGED,
    VALIDATIONS_DIR,
    env,
    env_field,
    merge_env,
    mount,
    pull_policy,
)
from components.operands._rbac import rule

#: The file the sandbox validator writes with the node's workload (`vm-passthrough`, ...).
WORKLOAD_TYPE_FILE = f"{VALIDATIONS_DIR}/workload-type"


def sandbox_on(policy: ClusterPolicy) -> bool:
    """`sandboxWorkloads.enabled`: without it no VM operand is deployed anywhere."""
    return policy.spec.sandbox_workloads.enabled


def labelled_nodes(nodes: Sequence[GPUNode], deploy_label: str) -> list[GPUNode]:
    """The nodes the node labeller gave `deploy_label=true` (not opted out): unlike the
    container operands, absent means no, as only VM nodes ever get these labels."""
    return [n for n in nodes if not opted_out(n.labels) and n.labels.get(deploy_label) == "true"]


def uninstall_driver(ctx: Ctx, spec: DriverManagerSpec, *, evict: bool) -> dict[str, Any]:
    """The k8s-driver-manager init container that unloads a container driver left on the
    node (a node moved from `container` to a VM workload) before the GPUs are rebound.

    `evict`: whether it may evict GPU pods on the way (the VFIO manager says no: a
    passthrough node runs no GPU pods of its own)."""
    defaults = [env_field("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "void")]
    if not evict:
        defaults.append(env("ENABLE_GPU_POD_EVICTION", "false"))
    defaults += [
        env("ENABLE_AUTO_DRAIN", "false"),
        env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    return {
        "name": "k8s-driver-manager",
        "image": resolve_image(spec, OperandImage.DRIVER_MANAGER, env=ctx.view.image_env),
        "imagePullPolicy": pull_policy(spec),
        "command": ["driver-manager"],
        "args": ["uninstall_driver"],
        "env": merge_env(defaults, spec.env),
        "securityContext": dict(PRIVILEGED),
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("host-sys", "/sys"),
        ],
    }


def manager_resources() -> dict[str, Any]:
    """What the VFIO and CC managers ask for unless the policy says otherwise (as the
    reference); a fresh copy per object."""
    return {"limits": {"memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}


def privileged_s0() -> dict[str, Any]:
    """Privileged, with the SELinux level the reference gives host-level managers."""
    return {"privileged": True, "seLinuxOptions": {"level": "s0"}}


#: The RBAC of NVIDIA's driver manager that the VFIO and vGPU managers run first, as the
#: reference grants it: it labels its node (a patch) to pause the operands, lists the pods
#: on it (any namespace) to wait for them, and evicts GPU pods (kubectl's drain, never a
#: delete); the vGPU manager's drain also gets a DaemonSet pod's DaemonSet.
DRIVER_MANAGER_CLUSTER_RULES = [
    rule([""], ["nodes"], ["get", "list", "watch", "patch"]),
    rule([""], ["pods"], ["get", "list", "watch"]),
    rule([""], ["pods/eviction"], ["create"]),
]
