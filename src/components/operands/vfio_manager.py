"""`state-vfio-manager`: binds every GPU of a `vm-passthrough` node to the `vfio-pci`
driver (`vfio-manage bind --all`) so KubeVirt can hand whole GPUs to virtual machines, and
unbinds them when its pod stops. A container driver still loaded on the node is unloaded
first (the driver manager init container). On while `sandboxWorkloads.enabled` and
`vfioManager.enabled` (the default).
"""

from __future__ import annotations

from components.api import ClusterPolicy, OperandImage
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import VM_PASSTHROUGH, Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    env,
    host_path,
    merge_env,
    mount,
    pull_policy,
)
from components.operands._rbac import account_and_rbac
from components.operands._sandbox import (
    DRIVER_MANAGER_CLUSTER_RULES,
    manager_resources,
    privileged_s0,
    sandbox_on,
    uninstall_driver,
)
from components.operands._workloads import daemonset

NAME = "state-vfio-manager"
DEPLOY_LABEL = deploy_label("vfio-manager")
APP = "nvidia-vfio-manager"
ACCOUNT = "nvidia-vfio-manager"


class VFIOManager(BaseOperand):
    """The VFIO manager DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({VM_PASSTHROUGH})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return sandbox_on(policy) and policy.spec.vfio_manager.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec.vfio_manager
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                cluster_rules=DRIVER_MANAGER_CLUSTER_RULES,
            )
        )
        image = image_or_condition(ctx, OperandImage.VFIO_MANAGER, rendered)
        if image is None:
            return rendered
        container = apply_component(
            {
                "name": APP,
                "image": image,
                "imagePullPolicy": pull_policy(spec),
                "command": ["/bin/sh", "-c"],
                "args": ["vfio-manage bind --all && while true; do sleep 86400; done"],
                "env": merge_env([env("HOST_ROOT", "/host")], spec.env),
                "resources": manager_resources(),
                "securityContext": privileged_s0(),
                "volumeMounts": [
                    mount("host-sys", "/sys"),
                    mount("host-lib-modules", "/lib/modules", read_only=True),
                    mount("host-root", "/host"),
                ],
                # Give the GPUs back to the host when the node leaves passthrough.
                "lifecycle": {
                    "preStop": {"exec": {"command": ["/bin/sh", "-c", "vfio-manage unbind --all"]}}
                },
            },
            spec,
        )
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[uninstall_driver(ctx, spec.driver_manager, evict=False)],
            containers=[container],
            volumes=[
                host_path("host-sys", "/sys", "Directory"),
                host_path("host-lib-modules", "/lib/modules", "Directory"),
                host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
                host_path("host-root", ctx.host_root),
            ],
            images=[spec, spec.driver_manager],
            host_network=spec.host_network,
        )
        pod["terminationGracePeriodSeconds"] = 30
        rendered.objects.append(daemonset(ctx, APP, pod))
        return rendered
