"""`state-mig-manager`: applies the MIG layout each MIG-capable node asks for in its
`nvidia.com/mig.config` label, and reports progress in `nvidia.com/mig.config.state`.

Rendered only while some GPU node is MIG-capable (`nvidia.com/mig.capable=true`): the node
labeler sets `nvidia.com/gpu.deploy.mig-manager` on those nodes only, so on a cluster
without MIG GPUs there is nothing for it to do.

The layouts come from the `default-mig-parted-config` ConfigMap, generated from the MIG
profile table (`components.api.mig_profiles`, which the simulator's GPUs read too): for
every GPU, `all-disabled`, `all-enabled`, `all-<profile>` (the whole GPU cut into that
profile, e.g. `all-1g.5gb` on an A100-40GB: seven 1g.5gb instances; media-engine variants
as `all-1g.10gb.me`) and `all-balanced`. A layout whose count differs per GPU model has one
entry per model with a `device-filter` of PCI device IDs, as the reference writes it.
The built-in config is always there and reaches the manager as `DEFAULT_CONFIG_FILE`; a
ConfigMap the user names in `migManager.config.name` comes as `CONFIG_FILE` and wins.
`migManager.gpuClientsConfig.name` replaces `default-gpu-clients`: the host services
(`nvsm`, `dcgm`, ...) to stop while the MIG mode changes. With a driver installed on the
host (`driver.enabled: false`) those services run on the host, so the manager gets
`WITH_SHUTDOWN_HOST_GPU_CLIENTS=true`; it always runs in the host's PID and IPC namespaces,
to see and stop the processes holding the GPUs, and mounts the driver install directory
and the CDI root, to reach the driver and regenerate CDI specs after a change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from components.api import OperandImage
from components.api.mig_profiles import MIG_GPUS, Layout, MigGPU, whole_gpu_config
from components.operands._context import Ctx
from components.operands._contract import GPUNode, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._names import deploy_label, wants_operand
from components.operands._plugin_config import cdi_hook_path
from components.operands._pods import (
    VALIDATIONS_DIR,
    config_map_volume,
    env,
    env_field,
    host_path,
    mount,
    toolkit_validation,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._workloads import config_map

DEPLOY_LABEL = deploy_label("mig-manager")
DEFAULT_CONFIG_MAP = "default-mig-parted-config"
DEFAULT_GPU_CLIENTS_CONFIG_MAP = "default-gpu-clients"
DEFAULT_CONFIG_DIR = "/mig-parted-default-config"
USER_CONFIG_DIR = "/mig-parted-config"
CDI_ROOT = "/var/run/cdi"
DRIVER_ROOT_CTR_PATH = "/driver-root"


def _entry(layout: Layout, device_ids: Sequence[str] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {} if device_ids is None else {"device-filter": list(device_ids)}
    entry.update({"devices": "all", "mig-enabled": True, "mig-devices": dict(layout)})
    return entry


def _grouped(layouts: Sequence[tuple[MigGPU, Layout]], always_filter: bool) -> list[Any]:
    """One mig-parted entry per distinct layout, filtered to the GPUs that use it.

    Where every GPU offering the layout agrees, one entry without a `device-filter` (as
    the reference writes it), unless `always_filter`.
    """
    groups: dict[Layout, list[str]] = {}
    for gpu, layout in layouts:
        groups.setdefault(layout, []).extend(gpu.device_ids)
    if len(groups) == 1 and not always_filter:
        return [_entry(next(iter(groups)), None)]
    return [_entry(layout, ids) for layout, ids in groups.items()]


def mig_parted_config(gpus: Sequence[MigGPU] = MIG_GPUS) -> dict[str, Any]:
    """The mig-parted configuration (`version: v1`, `mig-configs: {...}`)."""
    configs: dict[str, Any] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    by_config: dict[str, list[tuple[MigGPU, Layout]]] = {}
    for gpu in gpus:
        for profile, count in (*gpu.profiles, *gpu.variants):
            by_config.setdefault(whole_gpu_config(profile), []).append((gpu, ((profile, count),)))
    for name, layouts in by_config.items():
        configs[name] = _grouped(layouts, always_filter=False)
    balanced = [(gpu, gpu.balanced) for gpu in gpus if gpu.balanced]
    configs["all-balanced"] = _grouped(balanced, always_filter=True)
    return {"version": "v1", "mig-configs": configs}


GPU_CLIENTS = (
    "nvsm.service",
    "nvsm-mqtt.service",
    "nvsm-core.service",
    "nvsm-api-gateway.service",
    "nvsm-notifier.service",
    "nv_peer_mem.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
)


def _dump(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False)


def mig_nodes(nodes: Sequence[GPUNode]) -> list[GPUNode]:
    """The GPU nodes the MIG manager runs on."""
    return [n for n in nodes if n.mig_capable and wants_operand(n, DEPLOY_LABEL)]


class MIGManager(DeclaredOperand):
    """The MIG manager DaemonSet, ServiceAccount, RBAC and its two ConfigMaps, only while
    a node is MIG-capable (the node labeller's own rule gives it the deploy label)."""

    key = "mig-manager"
    deploy_label = DEPLOY_LABEL
    image = OperandImage.MIG_MANAGER
    rules = (
        rule([""], ["pods"], ["get", "list", "watch", "delete"]),
        rule([""], ["pods/eviction"], ["create"]),
    )
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch", "update", "patch"]),)

    def _render(self, ctx: Ctx) -> Rendered:
        if not mig_nodes(ctx.view.gpu_nodes):
            return Rendered()
        return super()._render(ctx)

    def always(self, ctx: Ctx) -> list[dict[str, Any]]:
        """Its default mig-parted config, and the default GPU clients list when used."""
        objects = [config_map(ctx, DEFAULT_CONFIG_MAP, {"config.yaml": _dump(mig_parted_config())})]
        if _clients(ctx) == DEFAULT_GPU_CLIENTS_CONFIG_MAP:
            clients = {"version": "v1", "systemd-services": list(GPU_CLIENTS)}
            objects.append(
                config_map(ctx, DEFAULT_GPU_CLIENTS_CONFIG_MAP, {"clients.yaml": _dump(clients)})
            )
        return objects

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        parted = ctx.spec.mig_manager.config.config_map_name
        user_config = parted != DEFAULT_CONFIG_MAP
        main = {
            "name": "nvidia-mig-manager",
            "securityContext": {"privileged": True},
            "volumeMounts": [
                mount("host-sys", "/sys"),
                mount("mig-parted-default-config", DEFAULT_CONFIG_DIR),
                *([mount("mig-parted-config", USER_CONFIG_DIR)] if user_config else []),
                mount("host-root", "/host", propagation="HostToContainer"),
                mount("gpu-clients", "/gpu-clients"),
                mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer"),
                mount("driver-install-dir", DRIVER_ROOT_CTR_PATH, propagation="HostToContainer"),
                mount("cdi-root", CDI_ROOT),
            ],
        }
        volumes = [
            host_path("host-sys", "/sys", "Directory"),
            config_map_volume("mig-parted-default-config", DEFAULT_CONFIG_MAP),
            *([config_map_volume("mig-parted-config", parted)] if user_config else []),
            validations_volume(),
            host_path("host-root", ctx.host_root),
            config_map_volume("gpu-clients", _clients(ctx)),
            host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
            host_path("cdi-root", CDI_ROOT, "DirectoryOrCreate"),
        ]
        pod = Pod(
            main,
            volumes,
            env=_manager_env(ctx, user_config),
            init_containers=[toolkit_validation(ctx)],
            runtime_class=True,
            host_pid=True,
            host_ipc=True,
        )
        return [self.daemonset(ctx, image, pod)]


def _clients(ctx: Ctx) -> str:
    """The ConfigMap of GPU clients to stop (the user's, else ours)."""
    return ctx.spec.mig_manager.gpu_clients_config.name or DEFAULT_GPU_CLIENTS_CONFIG_MAP


def _manager_env(ctx: Ctx, user_config: bool) -> list[dict[str, Any]]:
    spec = ctx.spec
    host_driver = not spec.driver.enabled
    envs = [
        env_field("NODE_NAME", "spec.nodeName"),
        env("DEFAULT_CONFIG_FILE", f"{DEFAULT_CONFIG_DIR}/config.yaml"),
    ]
    if user_config:
        envs.append(env("CONFIG_FILE", f"{USER_CONFIG_DIR}/config.yaml"))
    envs += [
        env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
        env_field("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
        env("WITH_SHUTDOWN_HOST_GPU_CLIENTS", "true" if host_driver else "false"),
        env("DRIVER_ROOT", "/" if host_driver else ctx.driver_install_dir),
        env("DRIVER_ROOT_CTR_PATH", "/host" if host_driver else DRIVER_ROOT_CTR_PATH),
    ]
    if spec.cdi.enabled:
        envs.append(env("CDI_ENABLED", "true"))
        hook = cdi_hook_path(ctx)
        if hook:
            envs.append(env("NVIDIA_CDI_HOOK_PATH", hook))
    if ctx.host_root != "/":
        envs.append(env("HOST_ROOT", ctx.host_root))
    return envs
