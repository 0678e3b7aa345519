"""`state-driver`: the NVIDIA driver, one DaemonSet per OS (and per kernel when precompiled).

Where the reference runs one `nvidia-driver-daemonset` whose image tag comes from the first
GPU node's OS (so a mixed-OS cluster pulls the wrong image on some nodes), we group the GPU
nodes by what picks their image and render one DaemonSet per group:

* **default**: one per OS release (`system-os_release.ID` + `VERSION_ID`), named
  `nvidia-driver-daemonset-<ID><VERSION_ID>` (`nvidia-driver-daemonset-ubuntu22.04`),
  selecting on both labels; image `<driver>:<version>-<ostag>`.
* **`usePrecompiled: true`**: one per (kernel, OS release), named as the reference names
  them, `nvidia-driver-daemonset-<kernel>-<ID><VERSION_ID>`, labelled
  `nvidia.com/precompiled=true`; image `<driver>:<branch>-<kernel>-<ostag>`. Where the
  reference selects on `kernel-version.full`, these select on the kernel the node is
  pinned to (`DRIVER_KERNEL_PIN_LABEL`, written by the upgrade controller), so a node that
  boots another kernel keeps its driver pod until it has been cordoned and cleared. One is
  rendered for every kernel a node runs or is pinned to: the new kernel's DaemonSet is
  there (and its image pulled) before the node moves to it.

The per-OS DaemonSets leave pinned nodes alone (a `DoesNotExist` node affinity on the pin),
so turning `usePrecompiled` on or off also moves each node by its pin, one node at a time
through the upgrade's safe path, while the DaemonSets of the old kind stay until no node
needs them.

Selectors are exact node labels (never lists), so a DaemonSet's spec does not change when
nodes join or leave, and a node whose OS (or pinned kernel) label changes simply stops
matching one DaemonSet and starts matching another. A DaemonSet is rendered only for a
group some GPU node is in: the controller prunes the rest, so a DaemonSet goes away only
when no node selects it. GPU nodes without the labels get a condition naming them, and no
DaemonSet.

Names are Kubernetes DNS labels (kernel strings lose their architecture suffix and `_`
becomes `.`, as in the reference; anything longer than 63 characters is cut and hashed).
Every driver DaemonSet has its own `app` label (its name) for its pods; all share
`app.kubernetes.io/component: nvidia-driver`, which the pod anti-affinity uses so two driver
pods never run on one node. Update strategy is always `OnDelete`: the upgrade controller
decides when a node's driver pod is replaced.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    ClusterPolicy,
    ContainerProbeSpec,
    DriverSpec,
    ImageError,
    driver_image,
    driver_manager_image,
)
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import GPUNode, Rendered
from components.operands._names import (
    deploy_label,
    name_list,
    nodes_phrase,
    safe_name,
    wants_operand,
)
from components.operands._pods import (
    PRIVILEGED,
    VALIDATIONS_DIR,
    config_map_volume,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pod_spec,
    pull_policy,
    resources,
    set_env,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import config_map, daemonset

NAME = "state-driver"
DEPLOY_LABEL = deploy_label("driver")
APP_PREFIX = "nvidia-driver-daemonset"
ACCOUNT = "nvidia-driver"
COMPONENT = "nvidia-driver"
STARTUP_PROBE_CONFIG_MAP = "nvidia-driver-startup-probe"
PRECOMPILED_LABEL = "nvidia.com/precompiled"
PRECOMPILED_KERNEL_LABEL = "nvidia.com/precompiled.kernel-version"
OS_RELEASE_LABEL = "nvidia.com/node.os-version"

#: Where package repository and certificate files go in the driver container, per OS.
REPO_CONFIG_DIRS: Mapping[str, str] = {
    "ubuntu": "/etc/apt/sources.list.d",
    "centos": "/etc/yum.repos.d",
    "rhel": "/etc/yum.repos.d",
    "rhcos": "/etc/yum.repos.d",
    "rocky": "/etc/yum.repos.d",
}
CERT_CONFIG_DIRS: Mapping[str, str] = {
    "ubuntu": "/usr/local/share/ca-certificates",
    "centos": "/etc/pki/ca-trust/extracted/pem",
    "rhel": "/etc/pki/ca-trust/extracted/pem",
    "rhcos": "/etc/pki/ca-trust/extracted/pem",
    "rocky": "/etc/pki/ca-trust/extracted/pem",
}

_ARCH = re.compile(r"x86_64(?:_64k)?|aarch64(?:_64k)?")


def sanitize_kernel(kernel: str) -> str:
    """A kernel version as it appears in names and label values: no architecture suffix,
    `_` as `.`, lower case, valid and at most 63 characters
    (`5.14.0-427.13.1.el9_4.x86_64` -> `5.14.0-427.13.1.el9.4`)."""
    cleaned = _ARCH.sub("", kernel).replace("_", ".").rstrip(".").lower()
    return safe_name(cleaned)


@dataclass(frozen=True)
class DriverPool:
    """GPU nodes that share one driver DaemonSet (same OS release, same kernel if
    precompiled)."""

    os_id: str
    os_version: str
    kernel: str | None
    nodes: tuple[str, ...]

    @property
    def release(self) -> str:
        """`<ID><VERSION_ID>`, e.g. `ubuntu22.04`, `rhel9.4`."""
        return f"{self.os_id}{self.os_version}"

    @property
    def node_selector(self) -> dict[str, str]:
        selector = {OS_ID_LABEL: self.os_id, OS_VERSION_LABEL: self.os_version}
        if self.kernel is not None:
            selector[DRIVER_KERNEL_PIN_LABEL] = self.kernel
        return selector

    def base_name(self) -> str:
        if self.kernel is None:
            return f"{APP_PREFIX}-{self.release}"
        return f"{APP_PREFIX}-{sanitize_kernel(self.kernel)}-{self.release}"


def driver_pools(
    nodes: Sequence[GPUNode], *, precompiled: bool
) -> tuple[list[tuple[str, DriverPool]], list[tuple[str, str]]]:
    """Group GPU nodes into driver DaemonSets: `[(daemonset name, pool)]`, sorted by name,
    and the conditions for nodes that fit no group."""
    groups: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
    no_os: list[str] = []
    no_kernel: list[str] = []
    for node in nodes:
        if not wants_operand(node, DEPLOY_LABEL):
            continue
        if not node.kernel and not (precompiled and node.pinned_kernel):
            no_kernel.append(node.name)
        if not node.os_id or not node.os_version:
            no_os.append(node.name)
            continue
        if not precompiled:
            groups[(node.os_id, node.os_version, None)].append(node.name)
            continue
        # The kernel it runs (where it is going) and the one it is pinned to (where its
        # driver runs now); the same one but for a node between kernels.
        for kernel in dict.fromkeys(k for k in (node.kernel, node.pinned_kernel) if k):
            groups[(node.os_id, node.os_version, kernel)].append(node.name)
    pools = [
        DriverPool(os_id, os_version, kernel, tuple(sorted(names)))
        for (os_id, os_version, kernel), names in groups.items()
    ]
    # Names must be unique: two groups whose names sanitize to the same string (kernels
    # that differ only by architecture or case) get a hash of what sets them apart.
    by_name: dict[str, list[DriverPool]] = defaultdict(list)
    for pool in pools:
        by_name[safe_name(pool.base_name())].append(pool)
    named: list[tuple[str, DriverPool]] = []
    for name, same in by_name.items():
        if len(same) == 1:
            named.append((name, same[0]))
            continue
        for pool in same:
            key = f"{pool.os_id}/{pool.os_version}/{pool.kernel}"
            named.append((safe_name(pool.base_name(), unique_by=key), pool))
    named.sort(key=lambda item: item[0])

    conditions: list[tuple[str, str]] = []
    if no_os:
        conditions.append(
            (
                "OSLabelsMissing",
                f"{nodes_phrase(no_os)} no {OS_ID_LABEL} / {OS_VERSION_LABEL} label, so no "
                "driver DaemonSet selects them (is node-feature-discovery running there?)",
            )
        )
    if no_kernel:
        consequence = (
            ", so no precompiled driver DaemonSet selects them"
            if precompiled
            else " (is node-feature-discovery running there?)"
        )
        conditions.append(
            (
                "KernelLabelMissing",
                f"{nodes_phrase(no_kernel)} no {KERNEL_LABEL} label{consequence}",
            )
        )
    return named, conditions


# --- the objects ------------------------------------------------------------------------

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

_RBAC_RULES = [
    rule([""], ["nodes"], ["get", "list", "watch", "patch", "update"]),
    rule([""], ["pods"], ["get", "list", "watch", "delete"]),
    rule([""], ["pods/eviction"], ["create"]),
    rule(["apps"], ["daemonsets"], ["get", "list", "watch"]),
]


def _probe(
    base: Mapping[str, Any], defaults: Mapping[str, int], override: ContainerProbeSpec | None
) -> dict[str, Any]:
    probe = {**base, **defaults}
    if override is not None:
        for key, value in override.to_dict(defaults=True).items():
            probe[key] = value
    return probe


def _manager_container(ctx: Ctx, driver: DriverSpec) -> dict[str, Any]:
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
    if driver.rdma.enabled:
        defaults.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if driver.rdma.use_host_mofed:
            defaults.append(env("USE_HOST_MOFED", "true"))
    if ctx.host_root != "/":
        defaults.append(env("HOST_ROOT", ctx.host_root))
    return {
        "name": "k8s-driver-manager",
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


def _config_map_files(
    ctx: Ctx,
    rendered: Rendered,
    field_name: str,
    config_map_name: str,
    directory: str,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Mounts of each file of a user's ConfigMap into `directory` (subPath, so what the
    image has there stays), and the volume; a condition when the ConfigMap is missing."""
    keys = ctx.view.config_map_keys.get(config_map_name)
    if keys is None:
        rendered.conditions.append(
            (
                "ConfigMapMissing",
                f"driver.{field_name} names ConfigMap {config_map_name!r}, which does not "
                f"exist in namespace {ctx.namespace}",
            )
        )
        return [], None
    files = sorted(keys)
    mounts = [
        mount(config_map_name, f"{directory}/{key}", read_only=True, sub_path=key) for key in files
    ]
    return mounts, config_map_volume(config_map_name, config_map_name, items=files)


def _driver_container(
    ctx: Ctx, driver: DriverSpec, image: str, pool: DriverPool, rendered: Rendered
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The driver container (first, so `containers[0]` is the driver), its sidecars, and
    the extra volumes they need."""
    defaults = [
        env_field("NODE_NAME", "spec.nodeName"),
        env_field("NODE_IP", "status.hostIP"),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("KERNEL_MODULE_TYPE", driver.kernel_module_type),
    ]
    if driver.use_open_kernel_modules or driver.kernel_module_type == "open":
        defaults.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    if driver.rdma.enabled:
        defaults.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if driver.rdma.use_host_mofed:
            defaults.append(env("USE_HOST_MOFED", "true"))
    env_list = merge_env(defaults, driver.env)

    mounts = [
        mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
        mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
        mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log"),
        mount("host-os-release", "/host-etc/os-release", read_only=True),
        mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation="HostToContainer"),
        mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"),
        mount("sysfs-memory-online", "/sys/devices/system/memory/auto_online_blocks"),
        mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        mount("nv-firmware", "/lib/firmware"),
        mount(
            "driver-startup-probe-script",
            "/usr/local/bin/startup-probe.sh",
            sub_path="startup-probe.sh",
        ),
    ]
    volumes: list[dict[str, Any]] = []
    env_from: list[dict[str, Any]] = []

    licensing = driver.licensing_config
    if licensing.secret_name or licensing.config_map_name:
        items = ["gridd.conf"]
        mounts.append(
            mount("licensing-config", "/drivers/gridd.conf", read_only=True, sub_path="gridd.conf")
        )
        if licensing.nls_enabled:
            token = "client_configuration_token.tok"
            items.append(token)
            mounts.append(
                mount(
                    "licensing-config",
                    f"/drivers/ClientConfigToken/{token}",
                    read_only=True,
                    sub_path=token,
                )
            )
        if licensing.secret_name:
            volumes.append(
                {
                    "name": "licensing-config",
                    "secret": {
                        "secretName": licensing.secret_name,
                        "items": [{"key": k, "path": k} for k in items],
                    },
                }
            )
        else:
            volumes.append(
                config_map_volume("licensing-config", licensing.config_map_name, items=items)
            )
    if driver.virtual_topology.config:
        conf = "nvidia-topologyd.conf"
        mounts.append(
            mount("topology-config", f"/etc/nvidia/{conf}", read_only=True, sub_path=conf)
        )
        volumes.append(
            config_map_volume("topology-config", driver.virtual_topology.config, items=[conf])
        )
    if driver.kernel_module_config.name:
        extra, volume = _config_map_files(
            ctx, rendered, "kernelModuleConfig", driver.kernel_module_config.name, "/drivers"
        )
        mounts += extra
        volumes += [volume] if volume else []
    if not driver.use_precompiled:
        for field_name, config_name, dirs in (
            ("repoConfig", driver.repo_config.config_map_name, REPO_CONFIG_DIRS),
            ("certConfig", driver.cert_config.name, CERT_CONFIG_DIRS),
        ):
            if not config_name:
                continue
            directory = dirs.get(pool.os_id)
            if directory is None:
                rendered.conditions.append(
                    (
                        "DriverConfigUnsupported",
                        f"driver.{field_name} is not supported on {pool.release} (nodes "
                        f"{name_list(pool.nodes)}); supported: {', '.join(sorted(dirs))}",
                    )
                )
                continue
            extra, volume = _config_map_files(ctx, rendered, field_name, config_name, directory)
            mounts += extra
            if volume is not None and all(v["name"] != volume["name"] for v in volumes):
                volumes.append(volume)
        if driver.secret_env:
            env_from.append({"secretRef": {"name": driver.secret_env}})

    container: dict[str, Any] = {
        "name": "nvidia-driver-ctr",
        "image": image,
        "imagePullPolicy": pull_policy(driver),
        "command": ["nvidia-driver"],
        "args": list(driver.args) or ["init"],
        "env": env_list,
        "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": mounts,
        "startupProbe": _probe(
            {"exec": {"command": ["sh", "/usr/local/bin/startup-probe.sh"]}},
            {
                "initialDelaySeconds": 60,
                "failureThreshold": 120,
                "successThreshold": 1,
                "periodSeconds": 10,
                "timeoutSeconds": 60,
            },
            driver.startup_probe,
        ),
        "lifecycle": {
            "preStop": {
                "exec": {"command": ["/bin/sh", "-c", f"rm -f {VALIDATIONS_DIR}/.driver-ctr-ready"]}
            }
        },
    }
    if env_from:
        container["envFrom"] = env_from
    check = {"exec": {"command": ["sh", "-c", "nvidia-smi"]}}
    if driver.liveness_probe is not None:
        container["livenessProbe"] = _probe(check, {}, driver.liveness_probe)
    if driver.readiness_probe is not None:
        container["readinessProbe"] = _probe(check, {}, driver.readiness_probe)
    res = resources(driver.resources)
    if res is not None:
        container["resources"] = res

    containers = [container]
    if driver.rdma.enabled:
        peermem_env: list[dict[str, Any]] = []
        if driver.rdma.use_host_mofed:
            set_env(peermem_env, "USE_HOST_MOFED", "true")
        peermem: dict[str, Any] = {
            "name": "nvidia-peermem-ctr",
            "image": image,
            "imagePullPolicy": pull_policy(driver),
            "command": ["nvidia-driver"],
            "args": ["reload_nvidia_peermem"],
            "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
            "volumeMounts": [
                mount("run-nvidia", "/run/nvidia", propagation="Bidirectional"),
                mount("var-log", "/var/log"),
                mount("dev-log", "/dev/log", read_only=True),
                mount(
                    "run-mellanox-drivers", "/run/mellanox/drivers", propagation="HostToContainer"
                ),
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
        containers.append(peermem)
    return containers, volumes


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
        host_path("sysfs-memory-online", "/sys/devices/system/memory/auto_online_blocks"),
        host_path("nv-firmware", f"{ctx.driver_install_dir}/lib/firmware", "DirectoryOrCreate"),
        config_map_volume("driver-startup-probe-script", STARTUP_PROBE_CONFIG_MAP, mode=0o755),
    ]


def _daemonset(
    ctx: Ctx, name: str, pool: DriverPool, image: str, rendered: Rendered
) -> dict[str, Any]:
    driver = ctx.spec.driver
    containers, extra_volumes = _driver_container(ctx, driver, image, pool, rendered)
    pod = pod_spec(
        ctx,
        account=ACCOUNT,
        deploy=DEPLOY_LABEL,
        node_selector=pool.node_selector,
        init_containers=[_manager_container(ctx, driver)],
        containers=containers,
        volumes=_volumes(ctx, driver) + extra_volumes,
        images=[driver, driver.manager],
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
    if pool.kernel is None:
        # Pinned nodes belong to the precompiled DaemonSets: a node leaves this one when
        # the upgrade pins it (precompiled turned on), not before.
        pod["affinity"]["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": DRIVER_KERNEL_PIN_LABEL, "operator": "DoesNotExist"}
                        ]
                    }
                ]
            }
        }
    labels = {
        "app.kubernetes.io/component": COMPONENT,
        PRECOMPILED_LABEL: "true" if pool.kernel is not None else "false",
        OS_RELEASE_LABEL: safe_name(pool.release),
    }
    if pool.kernel is not None:
        labels[PRECOMPILED_KERNEL_LABEL] = sanitize_kernel(pool.kernel)
    return daemonset(
        ctx,
        name,
        pod,
        labels=labels,
        pod_annotations={"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"},
        strategy={"type": "OnDelete"},
    )


class Driver(BaseOperand):
    """The driver DaemonSets, their ServiceAccount, RBAC and startup-probe ConfigMap."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL

    def enabled(self, policy: ClusterPolicy) -> bool:
        """On unless `driver.enabled: false`, or NVIDIADriver resources manage drivers
        (`driver.useNvidiaDriverCRD: true`)."""
        driver = policy.spec.driver
        return driver.enabled and not driver.use_nvidia_driver_crd

    def _render(self, ctx: Ctx) -> Rendered:
        driver = ctx.spec.driver
        view = ctx.view
        rendered = Rendered(
            objects=[
                *account_and_rbac(ctx, ACCOUNT, cluster_rules=_RBAC_RULES),
                config_map(
                    ctx,
                    STARTUP_PROBE_CONFIG_MAP,
                    {"startup-probe.sh": _STARTUP_PROBE_SCRIPT},
                    labels={"app.kubernetes.io/component": COMPONENT},
                ),
            ]
        )
        pools, conditions = driver_pools(view.gpu_nodes, precompiled=driver.use_precompiled)
        rendered.conditions.extend(conditions)
        for name, pool in pools:
            try:
                image = driver_image(
                    driver,
                    os_id=pool.os_id,
                    os_version=pool.os_version,
                    kernel=pool.kernel,
                    env=view.image_env,
                )
            except ImageError as exc:
                rendered.conditions.append(
                    (
                        "DriverImageInvalid",
                        f"no driver image for nodes {name_list(pool.nodes)}: {exc}",
                    )
                )
                continue
            rendered.objects.append(_daemonset(ctx, name, pool, image, rendered))
        # One condition per problem, however many DaemonSets ran into it.
        unique = list(dict.fromkeys(rendered.conditions))
        return Rendered(objects=rendered.objects, conditions=unique)
