"""Files the driver container gets besides its own: from Secrets and ConfigMaps the policy
names (vGPU licensing, the virtual topology, kernel module parameters, package
repositories and certificates; each mounted file by file with subPath, so what the image
has in the same directory stays), and the host's subscription files on RHEL and SLES, so
it can install the distribution's packages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.api import DriverSpec
from components.operands._context import Ctx
from components.operands._contract import Rendered
from components.operands._names import name_list
from components.operands._pods import config_map_volume, host_path, mount
from components.operands.driver._pools import DriverPool

#: Where package repository and certificate files go in the driver container, per OS
#: (`os_release.ID`): the reference's OS families, and Rocky Linux with RHEL's paths.
REPO_CONFIG_DIRS: Mapping[str, str] = {
    "ubuntu": "/etc/apt/sources.list.d",
    "debian": "/etc/apt/sources.list.d",
    "centos": "/etc/yum.repos.d",
    "rhel": "/etc/yum.repos.d",
    "rhcos": "/etc/yum.repos.d",
    "rocky": "/etc/yum.repos.d",
}
CERT_CONFIG_DIRS: Mapping[str, str] = {
    "ubuntu": "/usr/local/share/ca-certificates",
    "debian": "/usr/local/share/ca-certificates",
    "centos": "/etc/pki/ca-trust/extracted/pem",
    "rhel": "/etc/pki/ca-trust/extracted/pem",
    "rhcos": "/etc/pki/ca-trust/extracted/pem",
    "rocky": "/etc/pki/ca-trust/extracted/pem",
    "sles": "/etc/pki/trust/anchors",
    "sl-micro": "/etc/pki/trust/anchors",
}

_RHEL_SUBSCRIPTION = (
    ("/run/secrets/etc-pki-entitlement", "/etc/pki/entitlement", "Directory"),
    ("/run/secrets/redhat.repo", "/etc/yum.repos.d/redhat.repo", "File"),
    ("/run/secrets/rhsm", "/etc/rhsm", "Directory"),
)
_SUSE_SUBSCRIPTION = (
    ("/etc/SUSEConnect", "/etc/SUSEConnect", "FileOrCreate"),
    ("/etc/zypp/credentials.d", "/etc/zypp/credentials.d", "Directory"),
)
#: The host's subscription / entitlement files, per OS: (path in the container, path on
#: the host, hostPath type), in the order of the container path (volumes are numbered so).
SUBSCRIPTION_PATHS: Mapping[str, Sequence[tuple[str, str, str]]] = {
    "rhel": _RHEL_SUBSCRIPTION,
    "sles": _SUSE_SUBSCRIPTION,
    "sl-micro": _SUSE_SUBSCRIPTION,
}

_LICENSING_VOLUME = "licensing-config"
_TOPOLOGY_VOLUME = "topology-config"


@dataclass
class UserFiles:
    """What the user's files add to the driver pod: mounts into the driver container, the
    volumes behind them, and `envFrom` sources; `package_mounts` is the part of `mounts`
    that GPUDirect sidecars, which install packages too, also get."""

    mounts: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    env_from: list[dict[str, Any]] = field(default_factory=list)
    package_mounts: list[dict[str, Any]] = field(default_factory=list)


def user_files(ctx: Ctx, driver: DriverSpec, pool: DriverPool, rendered: Rendered) -> UserFiles:
    """Everything the policy's driver section mounts from the user's objects, in the order
    the container lists it; problems (a ConfigMap missing, an OS without a known
    directory) become conditions on `rendered`."""
    files = UserFiles()
    _licensing(driver, files)
    _virtual_topology(driver, files)
    if driver.kernel_module_config.name:
        _add_config_map(
            files, ctx, rendered, "kernelModuleConfig", driver.kernel_module_config.name, "/drivers"
        )
    if not driver.use_precompiled:
        # Precompiled images install nothing, so they need no repositories or secrets.
        _package_config(ctx, driver, pool, rendered, files)
        if driver.secret_env:
            files.env_from.append({"secretRef": {"name": driver.secret_env}})
        _subscriptions(ctx, pool, files)
    return files


def _subscriptions(ctx: Ctx, pool: DriverPool, files: UserFiles) -> None:
    """The host's entitlements, read-only, on SLES and on RHEL, as the reference mounts
    them (on RHEL not with CRI-O, which passes them to containers itself)."""
    if pool.os_id == "rhel" and ctx.container_runtime == "crio":
        return
    for number, (in_ctr, on_host, kind) in enumerate(SUBSCRIPTION_PATHS.get(pool.os_id, ())):
        volume = f"subscription-config-{number}"
        files.mounts.append(mount(volume, in_ctr, read_only=True))
        files.volumes.append(host_path(volume, on_host, kind))


def _licensing(driver: DriverSpec, files: UserFiles) -> None:
    """`gridd.conf` (and the NLS client token) from a Secret or a ConfigMap."""
    licensing = driver.licensing_config
    if not (licensing.secret_name or licensing.config_map_name):
        return
    items = ["gridd.conf"]
    files.mounts.append(
        mount(_LICENSING_VOLUME, "/drivers/gridd.conf", read_only=True, sub_path="gridd.conf")
    )
    if licensing.nls_enabled:
        token = "client_configuration_token.tok"
        items.append(token)
        files.mounts.append(
            mount(
                _LICENSING_VOLUME,
                f"/drivers/ClientConfigToken/{token}",
                read_only=True,
                sub_path=token,
            )
        )
    if licensing.secret_name:
        files.volumes.append(
            {
                "name": _LICENSING_VOLUME,
                "secret": {
                    "secretName": licensing.secret_name,
                    "items": [{"key": k, "path": k} for k in items],
                },
            }
        )
    else:
        files.volumes.append(
            config_map_volume(_LICENSING_VOLUME, licensing.config_map_name, items=items)
        )


def _virtual_topology(driver: DriverSpec, files: UserFiles) -> None:
    if not driver.virtual_topology.config:
        return
    conf = "nvidia-topologyd.conf"
    files.mounts.append(
        mount(_TOPOLOGY_VOLUME, f"/etc/nvidia/{conf}", read_only=True, sub_path=conf)
    )
    files.volumes.append(
        config_map_volume(_TOPOLOGY_VOLUME, driver.virtual_topology.config, items=[conf])
    )


def _package_config(
    ctx: Ctx, driver: DriverSpec, pool: DriverPool, rendered: Rendered, files: UserFiles
) -> None:
    """Repository and certificate files, into the directory the pool's OS reads them from."""
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
        # One ConfigMap may hold both; its volume is listed once.
        before = len(files.mounts)
        _add_config_map(files, ctx, rendered, field_name, config_name, directory, shared=True)
        files.package_mounts += files.mounts[before:]


def _add_config_map(
    files: UserFiles,
    ctx: Ctx,
    rendered: Rendered,
    field_name: str,
    config_map_name: str,
    directory: str,
    *,
    shared: bool = False,
) -> None:
    """Mount each file of a user's ConfigMap into `directory`, and add its volume (unless
    `shared` and a volume of that name is there already); a condition when the ConfigMap
    is missing."""
    keys = ctx.view.config_map_keys.get(config_map_name)
    if keys is None:
        rendered.conditions.append(
            (
                "ConfigMapMissing",
                f"driver.{field_name} names ConfigMap {config_map_name!r}, which does not "
                f"exist in namespace {ctx.namespace}",
            )
        )
        return
    names = sorted(keys)
    files.mounts += [
        mount(config_map_name, f"{directory}/{key}", read_only=True, sub_path=key) for key in names
    ]
    if shared and any(v["name"] == config_map_name for v in files.volumes):
        return
    files.volumes.append(config_map_volume(config_map_name, config_map_name, items=names))
