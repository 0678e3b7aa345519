"""A driver DaemonSet for one pool of nodes, and the objects all of them share (the
ServiceAccount with its RBAC, the startup-probe script)."""

from __future__ import annotations

import json
from typing import Any

from components.api import (
    DRIVER_CONFIG_DIGEST_ANNOTATION,
    DRIVER_CONFIG_DIGEST_ENV,
    DRIVER_KERNEL_PIN_LABEL,
    KEEP_OFF_TAKEN_OVER,
    DriverSpec,
)
from components.operands._context import DEFAULT_DRIVER_INSTALL_DIR, Ctx
from components.operands._contract import Rendered
from components.operands._names import safe_name, short_hash
from components.operands._pods import (
    VALIDATIONS_DIR,
    build_pod_spec,
    config_map_volume,
    host_path,
    set_env,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import config_map, daemonset
from components.operands.driver._containers import (
    DRIVER_CONTAINER,
    MANAGER_CONTAINER,
    STARTUP_PROBE_VOLUME,
    SYSFS_DEVICES_SYSTEM_VOLUME,
    driver_containers,
    manager_container,
)
from components.operands.driver._gpudirect import gpudirect_specs
from components.operands.driver._pools import APP, DEPLOY_LABEL, DriverPool, sanitize_kernel
from reconciler import metadata_of

ACCOUNT = "nvidia-driver"
COMPONENT = "nvidia-driver"
STARTUP_PROBE_CONFIG_MAP = "nvidia-driver-startup-probe"
PRECOMPILED_LABEL = "nvidia.com/precompiled"
PRECOMPILED_KERNEL_LABEL = "nvidia.com/precompiled.kernel-version"
OS_RELEASE_LABEL = "nvidia.com/node.os-version"

_STARTUP_PROBE_SCRIPT = """#!/bin/sh
# Ready when the kernel module is loaded and nvidia-smi answers; then tell the
# validator (it waits for this file) which optional modules this pod set up.
set -eu
ready="/run/nvidia/validations/.driver-ctr-ready"
mkdir -p "$(dirname "$ready")"
[ -f /sys/module/nvidia/refcnt ] || { echo "nvidia kernel module is not loaded"; exit 1; }
nvidia-smi || { echo "nvidia-smi failed"; exit 1; }
{
  echo "GDRCOPY_ENABLED: ${GDRCOPY_ENABLED:-false}"
  echo "GDS_ENABLED: ${GDS_ENABLED:-false}"
  echo "GPU_DIRECT_RDMA_ENABLED: ${GPU_DIRECT_RDMA_ENABLED:-false}"
} > "$ready.tmp"
mv "$ready.tmp" "$ready"
"""

# NVIDIA's driver manager (k8s-driver-manager), as the reference grants it: it reads and
# labels its node and cordons it, lists the pods on it in every namespace and evicts the
# GPU ones (kubectl's drain: an eviction, never a delete where the eviction API exists),
# and gets the DaemonSet of a DaemonSet pod to leave it be.
_RBAC_RULES = [
    rule([""], ["nodes"], ["get", "list", "watch", "patch", "update"]),
    rule([""], ["pods"], ["get", "list", "watch"]),
    rule([""], ["pods/eviction"], ["create"]),
    rule(["apps"], ["daemonsets"], ["get"]),
]


def shared_objects(ctx: Ctx) -> list[dict[str, Any]]:
    """The ServiceAccount every driver pod runs as, its RBAC, and the startup-probe
    ConfigMap every driver DaemonSet mounts."""
    return [
        *account_and_rbac(ctx, ACCOUNT, cluster_rules=_RBAC_RULES),
        config_map(
            ctx,
            STARTUP_PROBE_CONFIG_MAP,
            {"startup-probe.sh": _STARTUP_PROBE_SCRIPT},
            labels={"app.kubernetes.io/component": COMPONENT},
        ),
    ]


def _volumes(ctx: Ctx, driver: DriverSpec) -> list[dict[str, Any]]:
    return [
        host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
        host_path("var-log", "/var/log"),
        host_path("dev-log", "/dev/log"),
        host_path("host-os-release", "/etc/os-release"),
        host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", "DirectoryOrCreate"),
        host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", "DirectoryOrCreate"),
        host_path(
            "mlnx-ofed-usr-src",
            "/usr/src" if driver.rdma.use_host_mofed else "/run/mellanox/drivers/usr/src",
            "DirectoryOrCreate",
        ),
        host_path("run-mellanox-drivers", "/run/mellanox/drivers", "DirectoryOrCreate"),
        host_path("run-nvidia-validations", VALIDATIONS_DIR, "DirectoryOrCreate"),
        host_path("host-root", ctx.host_root),
        host_path("host-sys", "/sys", "Directory"),
        host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        host_path(SYSFS_DEVICES_SYSTEM_VOLUME, "/sys/devices/system", "Directory"),
        # Where this pod's driver container installs (run-nvidia), whatever
        # hostPaths.driverInstallDir says of a driver installed elsewhere.
        host_path("nv-firmware", f"{DEFAULT_DRIVER_INSTALL_DIR}/lib/firmware", "DirectoryOrCreate"),
        config_map_volume(STARTUP_PROBE_VOLUME, STARTUP_PROBE_CONFIG_MAP, mode=0o755),
    ]


def pool_selector(name: str, labels: dict[str, str]) -> dict[str, str]:
    """What a driver DaemonSet selects its pods by, besides `app=nvidia-driver-daemonset`.

    Every driver pod carries `app=nvidia-driver-daemonset`, so runbooks find them all;
    the only DaemonSet of a single-OS cluster selects on just that (the reference's
    selector), the DaemonSet of one OS release (and kernel) on those labels too, so the
    selectors of several never overlap. Each is fixed by the name, as a selector must be.
    """
    if name == APP:
        return {}
    keys = (OS_RELEASE_LABEL, PRECOMPILED_KERNEL_LABEL)
    return {key: labels[key] for key in keys if key in labels}


def driver_daemonset(
    ctx: Ctx, name: str, pool: DriverPool, image: str, rendered: Rendered
) -> dict[str, Any]:
    """The DaemonSet of one pool: its pods run on the pool's nodes only, never two on a
    node, and are replaced only when the upgrade controller deletes them."""
    driver = ctx.spec.driver
    containers, extra_volumes = driver_containers(ctx, driver, image, pool, rendered)
    pod = build_pod_spec(
        ctx,
        host_network=ctx.spec.driver.host_network,
        account=ACCOUNT,
        deploy=DEPLOY_LABEL,
        node_selector=pool.node_selector,
        init_containers=[manager_container(ctx, driver)],
        containers=containers,
        volumes=_volumes(ctx, driver) + extra_volumes,
        images=[driver, driver.manager, *gpudirect_specs(ctx)],
        host_pid=True,
    )
    pod["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {
                                "key": "app.kubernetes.io/component",
                                "operator": "In",
                                "values": [COMPONENT, "nvidia-vgpu-manager"],
                            }
                        ]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    # A node still on the reference operator's driver comes to us when the upgrade walk
    # hands it over (it removes the takeover label), not before.
    expressions: list[dict[str, Any]] = [dict(KEEP_OFF_TAKEN_OVER)]
    if pool.kernel is None:
        # Pinned nodes belong to the precompiled DaemonSets: a node leaves this one when
        # the upgrade pins it (precompiled turned on), not before.
        expressions.insert(0, {"key": DRIVER_KERNEL_PIN_LABEL, "operator": "DoesNotExist"})
    pod["affinity"]["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]
        }
    }
    labels = {
        "app.kubernetes.io/component": COMPONENT,
        PRECOMPILED_LABEL: "true" if pool.kernel is not None else "false",
        OS_RELEASE_LABEL: safe_name(pool.release),
    }
    if pool.kernel is not None:
        labels[PRECOMPILED_KERNEL_LABEL] = sanitize_kernel(pool.kernel)
    ds = daemonset(
        ctx,
        name,
        pod,
        app=APP,
        selector=pool_selector(name, labels),
        labels=labels,
        pod_annotations={"kubectl.kubernetes.io/default-container": DRIVER_CONTAINER},
        strategy={"type": "OnDelete"},
    )
    _set_config_digest(ds)
    return ds


def _set_config_digest(ds: dict[str, Any]) -> None:
    """`DRIVER_CONFIG_DIGEST` on the driver manager and the driver container: a digest of
    what the driver is installed with (the pod's containers and volumes). A driver pod
    that restarts with the digest the running driver was installed with keeps that driver
    (no unload, no rebuild): only a change of configuration pays for a reinstall, not a
    new label, toleration or priority class on the pods. The upgrade compares it between
    a running pod and the template (`DRIVER_CONFIG_DIGEST_ANNOTATION`, its twin on the
    template's annotations): equal, the pod is restarted in place, without a walk."""
    pod = ds["spec"]["template"]["spec"]
    installed_with = {key: pod.get(key, []) for key in ("initContainers", "containers", "volumes")}
    text = json.dumps(installed_with, sort_keys=True, separators=(",", ":"))
    digest = short_hash(text, length=16)
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        if container["name"] in (MANAGER_CONTAINER, DRIVER_CONTAINER):
            set_env(container.setdefault("env", []), DRIVER_CONFIG_DIGEST_ENV, digest)
    metadata_of(ds["spec"]["template"]).setdefault("annotations", {})[
        DRIVER_CONFIG_DIGEST_ANNOTATION
    ] = digest
