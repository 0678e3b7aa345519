"""`state-device-plugin`: the NVIDIA device plugin makes `nvidia.com/gpu` (or, with MIG
strategy `mixed`, `nvidia.com/mig-<profile>`) allocatable on each GPU node.

With `devicePlugin.config.name` (a ConfigMap of plugin configurations the admin provides),
a `config-manager` init container and sidecar pick the configuration each node names in its
`nvidia.com/device-plugin.config` label (else `devicePlugin.config.default`) and signal the
plugin when it changes; GPU feature discovery uses the same ConfigMap the same way.
"""

from __future__ import annotations

import posixpath
from typing import Any

from components.api import OperandImage
from components.operands._context import DEFAULT_KUBELET_ROOT_DIR, Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._plugin_config import (
    DEFAULT_MPS_ROOT,
    apply_plugin_config,
    cdi_hook_path,
    mig_env,
)
from components.operands._pods import (
    VALIDATIONS_DIR,
    env,
    host_path,
    mount,
    set_env,
    toolkit_validation,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._workloads import (
    entrypoint_config_map,
    entrypoint_mount,
    entrypoint_volume,
)

APP = "nvidia-device-plugin-daemonset"
ENTRYPOINT_CONFIG_MAP = "nvidia-device-plugin-entrypoint"

_ENTRYPOINT = """#!/bin/sh
# Start the plugin once the validator has found a working driver; take the driver
# settings it recorded.
until [ -f /run/nvidia/validations/driver-ready ]; do
  echo "waiting for the driver validation to finish"
  sleep 5
done
set -o allexport
. /run/nvidia/validations/driver-ready
echo "starting nvidia-device-plugin"
exec nvidia-device-plugin
"""


class DevicePlugin(DeclaredOperand):
    """The device plugin DaemonSet, its ServiceAccount, RBAC and entrypoint ConfigMap."""

    key = "device-plugin"
    workloads = frozenset({CONTAINER})
    app = APP
    image = OperandImage.DEVICE_PLUGIN
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch"]),)

    def always(self, ctx: Ctx) -> list[dict[str, Any]]:
        return [entrypoint_config_map(ctx, ENTRYPOINT_CONFIG_MAP, _ENTRYPOINT, app=APP)]

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        mps_root = ctx.spec.device_plugin.mps.root or DEFAULT_MPS_ROOT
        main = {
            "name": "nvidia-device-plugin",
            "command": ["/bin/bash", "-c"],
            "args": ["/bin/entrypoint.sh"],
            "securityContext": {"privileged": True},
            "volumeMounts": [
                entrypoint_mount(ENTRYPOINT_CONFIG_MAP),
                mount("device-plugin", f"{DEFAULT_KUBELET_ROOT_DIR}/device-plugins"),
                mount("run-nvidia-validations", VALIDATIONS_DIR),
                mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
                mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                mount("cdi-root", "/var/run/cdi"),
                mount("mps-shm", "/dev/shm"),
                mount("mps-root", "/mps"),
            ],
        }
        volumes = [
            entrypoint_volume(ENTRYPOINT_CONFIG_MAP),
            host_path("device-plugin", ctx.kubelet_host_dir("device-plugins")),
            validations_volume(),
            host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
            host_path("host-root", ctx.host_root),
            host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            host_path("mps-root", mps_root, "DirectoryOrCreate"),
            host_path("mps-shm", posixpath.join(mps_root, "shm")),
        ]

        def config_manager(pod: dict[str, Any], main: dict[str, Any]) -> None:
            apply_plugin_config(ctx, pod, main, image=image, process="nvidia-device-plugin")

        pod = Pod(
            main,
            volumes,
            env=_plugin_env(ctx, mps_root),
            init_containers=[toolkit_validation(ctx)],
            runtime_class=True,
            finish=config_manager,
        )
        return [self.daemonset(ctx, image, pod)]


def _plugin_env(ctx: Ctx, mps_root: str) -> list[dict[str, Any]]:
    spec = ctx.spec
    envs: list[dict[str, Any]] = [
        env("PASS_DEVICE_SPECS", "true"),
        env("FAIL_ON_INIT_ERROR", "true"),
        env("DEVICE_LIST_STRATEGY", "envvar"),
        env("DEVICE_ID_STRATEGY", "uuid"),
        env("NVIDIA_VISIBLE_DEVICES", "all"),
        env("NVIDIA_DRIVER_CAPABILITIES", "all"),
        env("MPS_ROOT", mps_root),
    ]
    mig_env(envs, spec.mig.strategy)
    # Containers that ask for GPUs also get the GPUDirect devices the driver pods set up:
    # /dev/nvidia-fs* and the InfiniBand devices (GDS), /dev/gdrdrv (GDRCopy).
    if spec.gds.enabled:
        set_env(envs, "GDS_ENABLED", "true")
        set_env(envs, "MOFED_ENABLED", "true")
    if spec.gdrcopy.enabled:
        set_env(envs, "GDRCOPY_ENABLED", "true")
    if spec.cdi.enabled:
        set_env(envs, "CDI_ENABLED", "true")
        set_env(envs, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
        set_env(envs, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/")
        hook = cdi_hook_path(ctx)
        if hook:
            set_env(envs, "NVIDIA_CDI_HOOK_PATH", hook)
    return envs
