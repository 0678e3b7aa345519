"""The containers of a driver pod: the driver manager (an init container that unloads the
old driver safely), the driver itself and its sidecars: with GPUDirect RDMA the peermem
one, with GPUDirect Storage / GDRCopy those of `_gpudirect`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.api import ContainerProbeSpec, DriverSpec, driver_manager_image
from components.operands._context import Ctx
from components.operands._contract import Rendered
from components.operands._pods import (
    PRIVILEGED,
    VALIDATIONS_DIR,
    env,
    env_field,
    merge_env,
    mount,
    pull_policy,
    resources,
    set_env,
)
from components.operands.driver._files import user_files
from components.operands.driver._gpudirect import gpudirect_containers, gpudirect_env
from components.operands.driver._pools import DriverPool

DRIVER_CONTAINER = "nvidia-driver-ctr"
MANAGER_CONTAINER = "k8s-driver-manager"
SYSFS_DEVICES_SYSTEM_VOLUME = "host-sys-devices-system"
#: Volume and file name of the startup-probe script (the ConfigMap is the DaemonSet's).
STARTUP_PROBE_VOLUME = "driver-startup-probe-script"
_STARTUP_PROBE_FILE = "startup-probe.sh"
_STARTUP_PROBE_PATH = f"/usr/local/bin/{_STARTUP_PROBE_FILE}"

#: What the driver container writes for the validator, removed as it stops so that no
#: validation reads a stopped driver's word.
_STATUS_FILES = (
    f"{VALIDATIONS_DIR}/.driver-ctr-ready",
    f"{VALIDATIONS_DIR}/.driver-daemons-status",
)

#: Like the reference: a driver build may take many minutes before the module loads.
_STARTUP_PROBE_TIMING: Mapping[str, int] = {
    "initialDelaySeconds": 60,
    "failureThreshold": 120,
    "successThreshold": 1,
    "periodSeconds": 10,
    "timeoutSeconds": 60,
}


def _driver_security() -> dict[str, Any]:
    return {"privileged": True, "seLinuxOptions": {"level": "s0"}}


def driver_containers(
    ctx: Ctx, driver: DriverSpec, image: str, pool: DriverPool, rendered: Rendered
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The driver container (first, so `containers[0]` is the driver), its sidecars, and
    the volumes the user's files need besides the pod's own."""
    files = user_files(ctx, driver, pool, rendered)
    container = _driver_container(ctx, driver, image, files.mounts)
    if files.env_from:
        container["envFrom"] = files.env_from
    _add_health_probes(container, driver)
    res = resources(driver.resources)
    if res is not None:
        container["resources"] = res
    containers = [container]
    if driver.rdma.enabled:
        containers.append(_peermem_container(driver, image))
    containers += gpudirect_containers(ctx, pool, files.package_mounts, files.env_from, rendered)
    return containers, files.volumes


def manager_container(ctx: Ctx, driver: DriverSpec) -> dict[str, Any]:
    """The driver manager, run before the driver: it evicts GPU pods and unloads the old
    driver so the new one can load."""
    defaults = [
        env_field("NODE_NAME", "spec.nodeName"),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("ENABLE_GPU_POD_EVICTION", "true"),
        env("ENABLE_AUTO_DRAIN", "false"),
        env("DRAIN_USE_FORCE", "false"),
        env("DRAIN_POD_SELECTOR_LABEL", ""),
        env("DRAIN_TIMEOUT_SECONDS", "0s"),
        env("DRAIN_DELETE_EMPTYDIR_DATA", "false"),
        env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    defaults += _rdma_env(driver)
    if ctx.host_root != "/":
        defaults.append(env("HOST_ROOT", ctx.host_root))
    return {
        "name": MANAGER_CONTAINER,
        "image": driver_manager_image(driver, env=ctx.view.image_env),
        "imagePullPolicy": pull_policy(driver.manager),
        "command": ["driver-manager"],
        "args": ["uninstall_driver"],
        "env": merge_env(defaults, driver.manager.env),
        "securityContext": dict(PRIVILEGED),
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("host-sys", "/sys"),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
        ],
    }


def _rdma_env(driver: DriverSpec) -> list[dict[str, Any]]:
    """What the driver and its manager are told about GPUDirect RDMA."""
    if not driver.rdma.enabled:
        return []
    out = [env("GPU_DIRECT_RDMA_ENABLED", "true")]
    if driver.rdma.use_host_mofed:
        out.append(env("USE_HOST_MOFED", "true"))
    return out


def _driver_env(ctx: Ctx, driver: DriverSpec) -> list[dict[str, Any]]:
    defaults = [
        env_field("NODE_NAME", "spec.nodeName"),
        env_field("NODE_IP", "status.hostIP"),
        env("KERNEL_MODULE_TYPE", driver.kernel_module_type),
    ]
    if driver.use_open_kernel_modules or driver.kernel_module_type == "open":
        defaults.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    defaults += [env(name, value) for name, value in gpudirect_env(ctx)]
    defaults += _rdma_env(driver)
    return merge_env(defaults, driver.env)


def _driver_mounts() -> list[dict[str, Any]]:
    """The host paths the driver container works in (the pod's own volumes)."""
    return [
        mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
        mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
        mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log"),
        mount("host-os-release", "/host-etc/os-release", read_only=True),
        mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation="HostToContainer"),
        mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
        # All of it, not only memory/auto_online_blocks: memory hot-plug settings move
        # between kernels (the reference mounts the whole directory too).
        mount(SYSFS_DEVICES_SYSTEM_VOLUME, "/sys/devices/system"),
        mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        mount("nv-firmware", "/lib/firmware"),
        mount(STARTUP_PROBE_VOLUME, _STARTUP_PROBE_PATH, sub_path=_STARTUP_PROBE_FILE),
    ]


def _driver_container(
    ctx: Ctx, driver: DriverSpec, image: str, user_mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "name": DRIVER_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(driver),
        "command": ["nvidia-driver"],
        "args": list(driver.args) or ["init"],
        "env": _driver_env(ctx, driver),
        "securityContext": _driver_security(),
        "volumeMounts": _driver_mounts() + user_mounts,
        "startupProbe": _probe(
            {"exec": {"command": ["sh", _STARTUP_PROBE_PATH]}},
            _STARTUP_PROBE_TIMING,
            driver.startup_probe,
        ),
        "lifecycle": {
            "preStop": {"exec": {"command": ["/bin/sh", "-c", f"rm -f {' '.join(_STATUS_FILES)}"]}}
        },
    }


def _add_health_probes(container: dict[str, Any], driver: DriverSpec) -> None:
    """Liveness and readiness checks (`nvidia-smi`), only where the policy asks for them."""
    check = {"exec": {"command": ["sh", "-c", "nvidia-smi"]}}
    if driver.liveness_probe is not None:
        container["livenessProbe"] = _probe(check, {}, driver.liveness_probe)
    if driver.readiness_probe is not None:
        container["readinessProbe"] = _probe(check, {}, driver.readiness_probe)


def _probe(
    base: Mapping[str, Any], defaults: Mapping[str, int], override: ContainerProbeSpec | None
) -> dict[str, Any]:
    probe = {**base, **defaults}
    if override is not None:
        for key, value in override.to_dict(defaults=True).items():
            probe[key] = value
    return probe


def _peermem_container(driver: DriverSpec, image: str) -> dict[str, Any]:
    """The sidecar that loads `nvidia-peermem` once the MOFED driver is there."""
    peermem_env: list[dict[str, Any]] = []
    if driver.rdma.use_host_mofed:
        set_env(peermem_env, "USE_HOST_MOFED", "true")
    peermem: dict[str, Any] = {
        "name": "nvidia-peermem-ctr",
        "image": image,
        "imagePullPolicy": pull_policy(driver),
        "command": ["nvidia-driver"],
        "args": ["reload_nvidia_peermem"],
        "securityContext": _driver_security(),
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log", read_only=True),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
        ],
        "startupProbe": {
            "exec": {"command": ["sh", "-c", "nvidia-driver probe_nvidia_peermem"]},
            "initialDelaySeconds": 10,
            "failureThreshold": 120,
            "successThreshold": 1,
            "periodSeconds": 10,
            "timeoutSeconds": 10,
        },
        "livenessProbe": {
            "exec": {"command": ["sh", "-c", "nvidia-driver probe_nvidia_peermem"]},
            "initialDelaySeconds": 30,
            "failureThreshold": 1,
            "successThreshold": 1,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
        },
    }
    if peermem_env:
        peermem["env"] = peermem_env
    return peermem
