"""What the device plugin shares with the operands that read its configs (GPU feature
discovery, the MPS control daemon) or its CDI hook (the MIG manager): the config-manager
containers that pick each node's plugin config, the MIG strategy's env, where the toolkit
puts `nvidia-cdi-hook`. Here, not in `device_plugin`, so that operands never import each
other."""

from __future__ import annotations

import posixpath
from typing import Any

from components.api import MIGStrategy
from components.operands._context import Ctx
from components.operands._names import deploy_label
from components.operands._pods import (
    config_map_volume,
    env,
    env_field,
    mount,
    pull_policy,
    set_env,
)

DEVICE_PLUGIN_DEPLOY_LABEL = deploy_label("device-plugin")
DEFAULT_MPS_ROOT = "/run/nvidia/mps"
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def mig_env(envs: list[dict[str, Any]], strategy: MIGStrategy) -> None:
    """`MIG_STRATEGY`, and `NVIDIA_MIG_MONITOR_DEVICES=all` unless the strategy is none."""
    set_env(envs, "MIG_STRATEGY", strategy)
    if strategy != "none":
        set_env(envs, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def cdi_hook_path(ctx: Ctx) -> str | None:
    """Where the toolkit installs `nvidia-cdi-hook` (None when the toolkit is off)."""
    toolkit = ctx.spec.toolkit
    if not toolkit.enabled:
        return None
    return posixpath.join(toolkit.install_dir or "/usr/local/nvidia", "toolkit/nvidia-cdi-hook")


def _config_manager(ctx: Ctx, image: str, *, oneshot: bool, process: str) -> dict[str, Any]:
    config = ctx.spec.device_plugin.config
    return {
        "name": "config-manager-init" if oneshot else "config-manager",
        "image": image,
        "imagePullPolicy": pull_policy(ctx.spec.device_plugin),
        "command": ["config-manager"],
        "env": [
            env("ONESHOT", "true" if oneshot else "false"),
            env("KUBECONFIG", ""),
            env_field("NODE_NAME", "spec.nodeName"),
            env("NODE_LABEL", CONFIG_LABEL),
            env("CONFIG_FILE_SRCDIR", "/available-configs"),
            env("CONFIG_FILE_DST", "/config/config.yaml"),
            env("DEFAULT_CONFIG", config.default),
            env("SEND_SIGNAL", "false" if oneshot else "true"),
            env("SIGNAL", "" if oneshot else "1"),
            env("PROCESS_TO_SIGNAL", "" if oneshot else process),
            env("FALLBACK_STRATEGIES", "empty"),
        ],
        **({} if oneshot else {"securityContext": {"privileged": True}}),
        "volumeMounts": _config_mounts(ctx),
    }


def _config_mounts(ctx: Ctx) -> list[dict[str, Any]]:
    name = ctx.spec.device_plugin.config.name
    return [mount("config", "/config"), mount(name, "/available-configs")]


def apply_plugin_config(
    ctx: Ctx,
    pod: dict[str, Any],
    main: dict[str, Any],
    *,
    image: str,
    process: str,
) -> None:
    """With `devicePlugin.config.name`: the config-manager init container and sidecar, the
    ConfigMap and shared volumes, `CONFIG_FILE` on the main container (in place)."""
    name = ctx.spec.device_plugin.config.name
    if not name:
        return
    set_env(main["env"], "CONFIG_FILE", "/config/config.yaml")
    main["volumeMounts"] += _config_mounts(ctx)
    pod.setdefault("initContainers", []).append(
        _config_manager(ctx, image, oneshot=True, process=process)
    )
    pod["containers"].append(_config_manager(ctx, image, oneshot=False, process=process))
    pod["volumes"] += [config_map_volume(name, name), {"name": "config", "emptyDir": {}}]
    if not pod.get("hostPID"):
        pod["shareProcessNamespace"] = True
