"""The container runtime's config files and socket as the toolkit and the Kata manager
both edit them: the host defaults per runtime, the env that names them, and the mounts that
bring their directories into the container (see `toolkit`'s docstring for the rules)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from components.operands._pods import get_env, host_path, mount, set_env

#: Host defaults per runtime: (config file, drop-in file, socket file).
RUNTIME_DEFAULTS: Mapping[str, tuple[str, str | None, str | None]] = {
    "containerd": (
        "/etc/containerd/config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml",
        "/run/containerd/containerd.sock",
    ),
    "crio": ("/etc/crio/config.toml", "/etc/crio/crio.conf.d/99-nvidia.conf", None),
    "docker": ("/etc/docker/daemon.json", None, "/var/run/docker.sock"),
}
_CONFIG_ENV: Mapping[str, str] = {
    "containerd": "CONTAINERD_CONFIG",
    "crio": "CRIO_CONFIG",
    "docker": "DOCKER_CONFIG",
}
_SOCKET_ENV: Mapping[str, str] = {"containerd": "CONTAINERD_SOCKET", "docker": "DOCKER_SOCKET"}
CONFIG_DIR = "/runtime/config-dir"
DROP_IN_DIR = "/runtime/config-dir.d"
SOCKET_DIR = "/runtime/sock-dir"


def runtime_config(
    runtime: str, envs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Set the runtime env (in place) and return the mounts and volumes for it (the Kata
    manager configures the runtime the same way)."""
    config_default, drop_in_default, socket_default = RUNTIME_DEFAULTS[runtime]
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []

    config = get_env(envs, _CONFIG_ENV[runtime]) or get_env(envs, "RUNTIME_CONFIG")
    config = config or config_default
    in_ctr = f"{CONFIG_DIR}/{posixpath.basename(config)}"
    set_env(envs, "RUNTIME_CONFIG", in_ctr)
    set_env(envs, _CONFIG_ENV[runtime], in_ctr)
    mounts.append(mount(f"{runtime}-config", CONFIG_DIR))
    volumes.append(host_path(f"{runtime}-config", posixpath.dirname(config), "DirectoryOrCreate"))

    if drop_in_default is not None:
        drop_in = get_env(envs, "RUNTIME_DROP_IN_CONFIG") or drop_in_default
        set_env(envs, "RUNTIME_DROP_IN_CONFIG", f"{DROP_IN_DIR}/{posixpath.basename(drop_in)}")
        set_env(envs, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", drop_in)
        mounts.append(mount(f"{runtime}-drop-in-config", DROP_IN_DIR))
        volumes.append(
            host_path(f"{runtime}-drop-in-config", posixpath.dirname(drop_in), "DirectoryOrCreate")
        )

    if socket_default is not None:
        socket = get_env(envs, _SOCKET_ENV[runtime]) or socket_default
        in_ctr = f"{SOCKET_DIR}/{posixpath.basename(socket)}"
        set_env(envs, "RUNTIME_SOCKET", in_ctr)
        set_env(envs, _SOCKET_ENV[runtime], in_ctr)
        mounts.append(mount(f"{runtime}-socket", SOCKET_DIR))
        volumes.append(host_path(f"{runtime}-socket", posixpath.dirname(socket)))
    return mounts, volumes
