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

from components.api import (
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    ClusterPolicy,
    ImageError,
    OperandImage,
    os_tag,
)
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import VM_VGPU, Rendered
from components.operands._names import deploy_label, nodes_phrase
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    host_path,
    merge_env,
    mount,
    pull_policy,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._sandbox import (
    DRIVER_MANAGER_CLUSTER_RULES,
    labelled_nodes,
    privileged_s0,
    sandbox_on,
    uninstall_driver,
)
from components.operands._workloads import daemonset

NAME = "state-vgpu-manager"
DEPLOY_LABEL = deploy_label("vgpu-manager")
APP = "nvidia-vgpu-manager-daemonset"
ACCOUNT = "nvidia-vgpu-manager"


class VGPUManager(BaseOperand):
    """The vGPU manager DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_VGPU})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy) and policy.spec.vgpu_manager.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec.vgpu_manager
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                cluster_rules=[
                    *DRIVER_MANAGER_CLUSTER_RULES,
                    rule(["apps"], ["daemonsets"], ["get"]),
                ],
            )
        )
        if not (spec.repository or spec.image or spec.version) or not spec.version:
            rendered.conditions.append(
                (
                    "VGPUManagerImageMissing",
                    f"{NAME}: set vgpuManager.repository and vgpuManager.version to the "
                    "vGPU manager image built from NVIDIA's vGPU host driver (there is no "
                    "public default)",
                )
            )
            return rendered
        base = image_or_condition(ctx, OperandImage.VGPU_MANAGER, rendered)
        hosts = labelled_nodes(ctx.view.gpu_nodes, DEPLOY_LABEL)
        if base is None or not hosts:
            return rendered
        releases = {(n.os_id or "", n.os_version or "") for n in hosts}
        if len(releases) > 1:
            rendered.conditions.append(
                (
                    "VGPUManagerMultipleOS",
                    f"{NAME}: vGPU hosts run {len(releases)} OS releases; one vGPU manager "
                    f"image serves one: move them to one release",
                )
            )
            return rendered
        os_id, os_version = releases.pop()
        try:
            tag = os_tag(os_id, os_version)
        except ImageError as exc:
            names = [n.name for n in hosts]
            rendered.conditions.append(
                ("OSLabelsMissing", f"{NAME}: {nodes_phrase(names)} no OS labels: {exc}")
            )
            return rendered
        container = apply_component(
            {
                "name": "nvidia-vgpu-manager-ctr",
                "image": f"{base}-{tag}",
                "imagePullPolicy": pull_policy(spec),
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
            },
            spec,
        )
        if spec.env:
            container["env"] = merge_env([], spec.env)
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            node_selector={OS_ID_LABEL: os_id, OS_VERSION_LABEL: os_version},
            init_containers=[uninstall_driver(ctx, spec.driver_manager, evict=True)],
            containers=[container],
            volumes=[
                host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
                host_path("host-os-release", f"{ctx.host_root.rstrip('/')}/etc/os-release"),
                host_path("cgroup", "/sys/fs/cgroup", "Directory"),
                host_path("vfio", "/dev/vfio", "Directory"),
                host_path("host-root", ctx.host_root),
                host_path("host-sys", "/sys", "Directory"),
                host_path("var-log", "/var/log", "Directory"),
                host_path("dev-log", "/dev/log"),
            ],
            images=[spec, spec.driver_manager],
            host_pid=True,
            host_ipc=True,
            host_network=spec.host_network,
        )
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
