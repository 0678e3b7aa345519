"""`state-container-toolkit`: installs the NVIDIA Container Toolkit and configures the node's
container runtime for the `nvidia` runtime (and CDI).

**Runtime detection**: see `_runtime` (the runtime most GPU nodes run). Nodes on another
runtime get a condition naming them: one DaemonSet can configure one runtime.

**Runtime modes**, as the reference sets them: with CDI (`cdi.enabled`, the default)
`CDI_ENABLED`, `NVIDIA_CONTAINER_RUNTIME_MODE=cdi`, `NVIDIA_RUNTIME_SET_AS_DEFAULT=false`
and `CRIO_CONFIG_MODE=config`; CRI-O without CDI gets `CRIO_CONFIG_MODE=hook` (the OCI
prestart hook). With the NRI plugin (`cdi.nriPluginEnabled`) `ENABLE_NRI_PLUGIN=true` and
`NRI_SOCKET` (default `/var/run/nri/nri.sock` on the host, its directory mounted at
`/runtime/nri-sock-dir`), and none of the runtime's config files or socket below: the plugin
does not touch them.

**Runtime config** (env of `nvidia-container-toolkit-ctr`), as the reference sets it:
`RUNTIME`, and per runtime the host files the toolkit edits, mounted into the container:

- containerd: config `/etc/containerd/config.toml`, drop-in
  `/etc/containerd/conf.d/99-nvidia.toml`, socket `/run/containerd/containerd.sock`
- crio: config `/etc/crio/config.toml`, drop-in `/etc/crio/crio.conf.d/99-nvidia.conf`
- docker: config `/etc/docker/daemon.json`, socket `/var/run/docker.sock`

`toolkit.env` overrides every default. For the path variables (`CONTAINERD_CONFIG`,
`CONTAINERD_SOCKET`, `RUNTIME_CONFIG`, `RUNTIME_DROP_IN_CONFIG`, `CRIO_CONFIG`,
`DOCKER_CONFIG`, `DOCKER_SOCKET`) a user value is the path **on the host** (k3s, RKE2,
MicroK8s keep containerd elsewhere), exactly as with the reference: its directory is mounted
into the container under `/runtime/...` and the variable then names the file there
(`RUNTIME_DROP_IN_CONFIG_HOST_PATH` keeps the host path). `CONTAINERD_RUNTIME_CLASS`
defaults to `operator.runtimeClass`. `RUNTIME_CONFIG_SOURCE` entries `file=<host path>`
become `file=/host<host path>`, where the toolkit sees the host's files.
"""

from __future__ import annotations

import posixpath
from typing import Any

from components.api import OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._names import nodes_phrase
from components.operands._pods import (
    AS_ROOT,
    VALIDATIONS_DIR,
    driver_location_env,
    env,
    env_field,
    get_env,
    host_path,
    merge_env,
    mount,
    pull_policy,
    set_env,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._runtime import RUNTIMES, node_runtime
from components.operands._runtime_config import runtime_config
from components.operands._workloads import (
    entrypoint_config_map,
    entrypoint_mount,
    entrypoint_volume,
)

APP = "nvidia-container-toolkit-daemonset"
ENTRYPOINT_CONFIG_MAP = "nvidia-container-toolkit-entrypoint"
DEFAULT_INSTALL_DIR = "/usr/local/nvidia"

_ENTRYPOINT = """#!/bin/bash
# Start once the validator has judged the driver, with the driver settings it recorded in
# driver-ready (NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT, ...: a driver
# container's root, or the host's for a preinstalled driver).
until [[ -f /run/nvidia/validations/driver-ready ]]; do
  echo "waiting for the driver validation to finish"
  sleep 5
done
set -o allexport
. /run/nvidia/validations/driver-ready
set +o allexport
# containerd (1.6.9 and later) can send SIGTERM right after its own restart; give it time.
sleep 5
exec nvidia-toolkit
"""

#: Where the runtime's NRI socket is on the host unless `NRI_SOCKET` says, and where its
#: directory is mounted in the toolkit container.
NRI_SOCKET_DEFAULT = "/var/run/nri/nri.sock"
NRI_SOCKET_DIR = "/runtime/nri-sock-dir"


def _nri_socket(envs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Point `NRI_SOCKET` into the container (in place); the mount and volume for it."""
    socket = get_env(envs, "NRI_SOCKET") or NRI_SOCKET_DEFAULT
    set_env(envs, "NRI_SOCKET", f"{NRI_SOCKET_DIR}/{posixpath.basename(socket)}")
    return (
        mount("nri-socket", NRI_SOCKET_DIR),
        host_path("nri-socket", posixpath.dirname(socket), "DirectoryOrCreate"),
    )


def _config_sources_in_container(envs: list[dict[str, Any]]) -> None:
    """`RUNTIME_CONFIG_SOURCE` names files on the host (`file=/etc/k3s/config.toml`); the
    toolkit reads them through the host's root, mounted at `/host` (in place)."""
    sources = get_env(envs, "RUNTIME_CONFIG_SOURCE")
    if not sources:
        return
    out = []
    for source in sources.split(","):
        kind, sep, path = source.partition("=")
        if sep and kind == "file":
            source = f"file={posixpath.join('/host', path.lstrip('/'))}"
        out.append(source)
    set_env(envs, "RUNTIME_CONFIG_SOURCE", ",".join(out))


def _driver_validation(ctx: Ctx) -> dict[str, Any]:
    """Waits until the validator has found a working driver (`driver-ready`)."""
    return {
        "name": "driver-validation",
        "image": ctx.validator_image,
        "imagePullPolicy": pull_policy(ctx.spec.validator),
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        # As every driver validation in the reference: with the validator's driver step env.
        "env": merge_env(
            [
                env("WITH_WAIT", "true"),
                env("COMPONENT", "driver"),
                env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
                *driver_location_env(ctx),
            ],
            ctx.spec.validator.driver.env,
        ),
        "securityContext": {**AS_ROOT, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": [
            mount("driver-install-dir", ctx.driver_install_dir, propagation="HostToContainer"),
            mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="Bidirectional"),
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("host-dev-char", "/host-dev-char"),
        ],
    }


class Toolkit(DeclaredOperand):
    """The container toolkit DaemonSet, its ServiceAccount and entrypoint ConfigMap."""

    key = "container-toolkit"
    workloads = frozenset({CONTAINER})
    app = APP
    image = OperandImage.CONTAINER_TOOLKIT
    # The validator's driver step (driver-validation, below) lists the driver DaemonSets
    # of its namespace to tell a driver of ours from the host's.
    rules = (rule(["apps"], ["daemonsets"], ["list"]),)

    def always(self, ctx: Ctx) -> list[dict[str, Any]]:
        return [entrypoint_config_map(ctx, ENTRYPOINT_CONFIG_MAP, _ENTRYPOINT, app=APP)]

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        _tell_mixed_runtimes(ctx, rendered)
        install_dir = ctx.spec.toolkit.install_dir or DEFAULT_INSTALL_DIR
        envs, runtime = _toolkit_env(ctx, install_dir, rendered)
        mounts, volumes = _host_files(ctx, install_dir, runtime, envs)
        main = {
            "name": "nvidia-container-toolkit-ctr",
            "command": ["/bin/bash", "-c"],
            "args": ["/bin/entrypoint.sh"],
            "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
            "volumeMounts": mounts,
        }
        pod = Pod(
            main,
            volumes,
            env=envs,
            user_env=False,
            init_containers=[_driver_validation(ctx)],
            host_pid=True,
        )
        return [self.daemonset(ctx, image, pod)]


def _host_files(
    ctx: Ctx, install_dir: str, runtime: str, envs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The toolkit's mounts and volumes: where it installs, the CDI root, the CRI-O hooks
    and the runtime's config (its env pointed into the container, in place)."""
    _config_sources_in_container(envs)
    if ctx.nri_plugin:
        # The NRI plugin neither reads nor writes the runtime's config: mount only its
        # socket (a read-only host such as Talos has no config directories to create).
        nri_mount, nri_volume = _nri_socket(envs)
        runtime_mounts, runtime_volumes = [nri_mount], [nri_volume]
    else:
        runtime_mounts, runtime_volumes = runtime_config(runtime, envs)
    mounts = [
        entrypoint_mount(ENTRYPOINT_CONFIG_MAP),
        mount("toolkit-root", "/run/nvidia/toolkit"),
        mount("run-nvidia-validations", VALIDATIONS_DIR),
        mount("toolkit-install-dir", install_dir),
        mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
        mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
        mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
        mount("cdi-root", "/var/run/cdi"),
        *runtime_mounts,
    ]
    crio_hooks = (
        "/usr/share/containers/oci/hooks.d" if runtime == "crio" else "/run/containers/oci/hooks.d"
    )
    volumes = [
        entrypoint_volume(ENTRYPOINT_CONFIG_MAP),
        host_path("toolkit-root", "/run/nvidia/toolkit", "DirectoryOrCreate"),
        validations_volume(),
        host_path("driver-install-dir", ctx.driver_install_dir, "DirectoryOrCreate"),
        host_path("host-root", ctx.host_root),
        host_path("toolkit-install-dir", install_dir),
        host_path("crio-hooks", crio_hooks),
        host_path("host-dev-char", f"{ctx.host_root.rstrip('/')}/dev/char"),
        host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
        *runtime_volumes,
    ]
    return mounts, volumes


def _tell_mixed_runtimes(ctx: Ctx, rendered: Rendered) -> None:
    detected = ctx.container_runtime
    others = [
        n.name
        for n in ctx.view.gpu_nodes
        if (r := node_runtime(n.container_runtime)) is not None and r != detected
    ]
    if others:
        rendered.conditions.append(
            (
                "MixedContainerRuntimes",
                f"{nodes_phrase(others, ('does', 'do'))} not run {detected}, the runtime "
                "the container toolkit is configured for",
            )
        )


def _toolkit_env(
    ctx: Ctx, install_dir: str, rendered: Rendered
) -> tuple[list[dict[str, Any]], str]:
    """The toolkit's env with `toolkit.env` applied, and the runtime it configures."""
    spec = ctx.spec
    detected = ctx.container_runtime
    defaults = [
        env("ROOT", install_dir),
        env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
        env_field("NRI_NAMESPACE", "metadata.namespace"),
        env("RUNTIME", detected),
    ]
    if detected == "containerd" and not ctx.nri_plugin:
        defaults.append(env("CONTAINERD_RUNTIME_CLASS", ctx.runtime_class))
    if spec.cdi.enabled:
        # Workloads get GPUs through the runtime's own CDI support, so `nvidia` is not the
        # default runtime; management pods name it (or use the NRI plugin).
        defaults += [
            env("CDI_ENABLED", "true"),
            env("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
            env("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
            env("CRIO_CONFIG_MODE", "config"),
        ]
        if ctx.nri_plugin:
            defaults.append(env("ENABLE_NRI_PLUGIN", "true"))
    elif detected == "crio":
        # Without CDI, CRI-O gets the OCI prestart hook rather than a runtime handler
        # (which would make `nvidia` its default runtime), as with the reference.
        defaults.append(env("CRIO_CONFIG_MODE", "hook"))
    if spec.cdi.nri_plugin_enabled and not spec.cdi.enabled:
        rendered.conditions.append(
            (
                "NRIPluginNeedsCDI",
                "cdi.nriPluginEnabled is ignored while cdi.enabled is false: the NRI "
                "plugin injects CDI devices; set cdi.enabled: true to use it",
            )
        )
    if ctx.host_root != "/":
        defaults.append(env("HOST_ROOT", ctx.host_root))
    return _with_user_env(defaults, ctx, rendered)


def _with_user_env(
    defaults: list[dict[str, Any]], ctx: Ctx, rendered: Rendered
) -> tuple[list[dict[str, Any]], str]:
    """`toolkit.env` over the defaults; a `RUNTIME` it names that no runtime is goes back
    to the detected one, with a condition."""
    detected = ctx.container_runtime
    envs = merge_env(defaults, ctx.spec.toolkit.env)
    runtime = get_env(envs, "RUNTIME") or detected
    if runtime not in RUNTIMES:
        rendered.conditions.append(
            (
                "RuntimeUnsupported",
                f"toolkit.env sets RUNTIME={runtime!r}; use one of {', '.join(RUNTIMES)}",
            )
        )
        runtime = detected
        set_env(envs, "RUNTIME", runtime)
    return envs, runtime
