"""What GPUDirect Storage / GDRCopy and the host's files add to driver pods, per OS
family: the sidecars and their images, the env other operands read, the subscription and
package-repository mounts, the whole /sys/devices/system, and the configuration digest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.operands import DevicePlugin, Driver, GPUNode, Rendered

from .cases import (
    CLUSTER,
    DIGEST,
    RHEL_KERNEL,
    container,
    daemonsets,
    env_of,
    gpu_node,
    init_container,
    mounts,
    pod,
    policy,
    view,
    volumes,
)

pytestmark = pytest.mark.unit

UBUNTU_DS = "nvidia-driver-daemonset-ubuntu22.04"
RHEL_DS = "nvidia-driver-daemonset-rhel9.4"
GPUDIRECT = {"gds": {"enabled": True}, "gdrcopy": {"enabled": True}}
SLES = gpu_node("gpu-sles-1", "sles", "15.6", "6.4.0-150600.23.7-default")


def render(
    spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER, **kw: Any
) -> Rendered:
    return Driver().render(policy(spec), view(nodes, **kw))


def names(ds: Mapping[str, Any]) -> list[str]:
    return [c["name"] for c in pod(ds)["containers"]]


def test_gpudirect_sidecars_with_images_for_each_os() -> None:
    dss = daemonsets(render(GPUDIRECT))
    for name, tag in ((UBUNTU_DS, "ubuntu22.04"), (RHEL_DS, "rhel9")):
        ds = dss[name]
        assert names(ds) == ["nvidia-driver-ctr", "nvidia-fs-ctr", "nvidia-gdrcopy-ctr"]
        fs = container(ds, "nvidia-fs-ctr")
        assert fs["image"] == f"nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4-{tag}"
        assert "exec nvidia-gds-driver install" in fs["args"][0]
        assert fs["startupProbe"]["exec"]["command"] == ["sh", "-c", "lsmod | grep nvidia_fs"]
        assert mounts(fs)["/run/nvidia"] == "run-nvidia"
        gdr = container(ds, "nvidia-gdrcopy-ctr")
        assert gdr["image"] == f"nvcr.io/nvidia/cloud-native/gdrdrv:v2.6-{tag}"
        assert "exec nvidia-gdrcopy-driver install" in gdr["args"][0]
        assert gdr["startupProbe"]["exec"]["command"] == ["sh", "-c", "lsmod | grep gdrdrv"]
        driver_env = env_of(container(ds))
        assert driver_env["GDS_ENABLED"] == "true"
        assert driver_env["GDRCOPY_ENABLED"] == "true"


def test_without_gpudirect_no_sidecars_and_no_env() -> None:
    for ds in daemonsets(render()).values():
        assert names(ds) == ["nvidia-driver-ctr"]
        assert not {"GDS_ENABLED", "GDRCOPY_ENABLED"} & set(env_of(container(ds)))


def test_gpudirect_section_settings_reach_its_sidecar() -> None:
    spec = {
        "gds": {
            "enabled": True,
            "repository": "registry.example/nv",
            "version": DIGEST,
            "imagePullPolicy": "Always",
            "imagePullSecrets": ["gds-pull"],
            "env": [{"name": "NVFS_MAX_PEER_CHUNK", "value": "1"}],
        },
        "driver": {
            "resources": {"limits": {"memory": "4Gi"}},
            "secretEnv": "proxy",
            "repoConfig": {"configMapName": "repos"},
        },
    }
    rendered = render(spec, [gpu_node("a")], config_map_keys={"repos": ["local.list"]})
    ds = daemonsets(rendered)["nvidia-driver-daemonset"]
    fs = container(ds, "nvidia-fs-ctr")
    assert fs["image"] == f"registry.example/nv/nvidia-fs@{DIGEST}"  # a digest: no OS tag
    assert fs["imagePullPolicy"] == "Always"
    assert env_of(fs) == {"NVFS_MAX_PEER_CHUNK": "1"}
    assert fs["resources"] == {"limits": {"memory": "4Gi"}}
    assert fs["envFrom"] == [{"secretRef": {"name": "proxy"}}]
    assert mounts(fs)["/etc/apt/sources.list.d/local.list"] == "repos"
    assert {"name": "gds-pull"} in pod(ds)["imagePullSecrets"]
    assert rendered.conditions == []


def test_gpudirect_with_precompiled_drivers_is_a_condition_not_a_sidecar() -> None:
    spec = {**GPUDIRECT, "driver": {"usePrecompiled": True, "version": "595"}}
    rendered = render(spec, [gpu_node("a", pinned_kernel="5.15.0-105-generic")])
    for ds in daemonsets(rendered).values():
        assert names(ds) == ["nvidia-driver-ctr"]
    reasons = [reason for reason, _ in rendered.conditions]
    assert reasons == ["GPUDirectUnsupported", "GPUDirectUnsupported"]
    assert "gds.enabled" in rendered.conditions[0][1]
    assert "gdrcopy.enabled" in rendered.conditions[1][1]


def test_device_plugin_injects_the_gpudirect_devices_only_when_asked() -> None:
    def plugin_env(spec: Mapping[str, Any]) -> dict[str, Any]:
        (ds,) = daemonsets(DevicePlugin().render(policy(spec), view())).values()
        return env_of(container(ds))

    env = plugin_env(GPUDIRECT)
    assert (env["GDS_ENABLED"], env["MOFED_ENABLED"], env["GDRCOPY_ENABLED"]) == (
        "true",
        "true",
        "true",
    )
    assert (
        plugin_env({"gdrcopy": {"enabled": True}}).keys()
        & {
            "GDS_ENABLED",
            "MOFED_ENABLED",
        }
        == set()
    )
    assert not {"GDS_ENABLED", "MOFED_ENABLED", "GDRCOPY_ENABLED"} & plugin_env({}).keys()


def test_the_whole_sys_devices_system_is_mounted() -> None:
    ds = daemonsets(render())[UBUNTU_DS]
    assert mounts(container(ds))["/sys/devices/system"] == "host-sys-devices-system"
    assert volumes(ds)["host-sys-devices-system"]["hostPath"] == {
        "path": "/sys/devices/system",
        "type": "Directory",
    }
    assert "/sys/devices/system/memory/auto_online_blocks" not in mounts(container(ds))


def test_subscriptions_are_mounted_on_rhel_and_sles_only() -> None:
    dss = daemonsets(render(nodes=[*CLUSTER, SLES]))
    rhel = dss[RHEL_DS]
    assert {p: n for p, n in mounts(container(rhel)).items() if "secrets" in p} == {
        "/run/secrets/etc-pki-entitlement": "subscription-config-0",
        "/run/secrets/redhat.repo": "subscription-config-1",
        "/run/secrets/rhsm": "subscription-config-2",
    }
    assert volumes(rhel)["subscription-config-1"]["hostPath"] == {
        "path": "/etc/yum.repos.d/redhat.repo",
        "type": "File",
    }
    sles = dss["nvidia-driver-daemonset-sles15.6"]
    assert mounts(container(sles))["/etc/SUSEConnect"] == "subscription-config-0"
    assert mounts(container(sles))["/etc/zypp/credentials.d"] == "subscription-config-1"
    assert volumes(sles)["subscription-config-0"]["hostPath"]["type"] == "FileOrCreate"
    for mount in container(sles)["volumeMounts"]:
        if mount["name"].startswith("subscription-config"):
            assert mount["readOnly"] is True
    assert not any(v.startswith("subscription") for v in volumes(dss[UBUNTU_DS]))


def test_no_subscriptions_on_rhel_with_crio_or_precompiled() -> None:
    crio = [gpu_node("r", "rhel", "9.4", RHEL_KERNEL, runtime="cri-o://1.31.0")]
    ds = daemonsets(render(nodes=crio))["nvidia-driver-daemonset"]
    assert not any(v.startswith("subscription") for v in volumes(ds))
    precompiled = {"driver": {"usePrecompiled": True, "version": "595"}}
    pinned = [gpu_node("r", "rhel", "9.4", RHEL_KERNEL, pinned_kernel=RHEL_KERNEL)]
    for ds in daemonsets(render(precompiled, pinned)).values():
        assert not any(v.startswith("subscription") for v in volumes(ds))


def test_repo_and_cert_config_go_where_each_os_family_reads_them() -> None:
    spec = {
        "driver": {
            "repoConfig": {"configMapName": "repos"},
            "certConfig": {"name": "certs"},
        }
    }
    debian = gpu_node("gpu-debian-1", "debian", "12", "6.1.0-25-amd64")
    rendered = render(
        spec,
        [*CLUSTER, SLES, debian],
        config_map_keys={"repos": ["local.repo"], "certs": ["ca.crt"]},
    )
    dss = daemonsets(rendered)
    where = {
        name: {p: n for p, n in mounts(container(ds)).items() if n in ("repos", "certs")}
        for name, ds in dss.items()
    }
    assert where[UBUNTU_DS] == {
        "/etc/apt/sources.list.d/local.repo": "repos",
        "/usr/local/share/ca-certificates/ca.crt": "certs",
    }
    assert where["nvidia-driver-daemonset-debian12"] == where[UBUNTU_DS]
    assert where[RHEL_DS] == {
        "/etc/yum.repos.d/local.repo": "repos",
        "/etc/pki/ca-trust/extracted/pem/ca.crt": "certs",
    }
    # SLES: certificates yes; the reference knows no repository directory for it.
    assert where["nvidia-driver-daemonset-sles15.6"] == {
        "/etc/pki/trust/anchors/ca.crt": "certs",
    }
    (unsupported,) = rendered.conditions
    assert unsupported[0] == "DriverConfigUnsupported"
    assert "driver.repoConfig is not supported on sles15.6" in unsupported[1]


def test_config_digest_follows_what_the_driver_is_installed_with() -> None:
    def digest(spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER) -> str:
        ds = daemonsets(render(spec, nodes))[UBUNTU_DS]
        value = env_of(container(ds))["DRIVER_CONFIG_DIGEST"]
        assert env_of(init_container(ds, "k8s-driver-manager"))["DRIVER_CONFIG_DIGEST"] == value
        assert isinstance(value, str) and len(value) == 16
        return value

    plain = digest()
    assert digest() == plain  # the same config, the same digest: a fast restart
    assert digest(nodes=[*CLUSTER, gpu_node("gpu-ubuntu-9")]) == plain  # nodes joining
    assert digest({"daemonsets": {"labels": {"team": "a"}, "priorityClassName": "p"}}) == plain
    assert digest({"driver": {"env": [{"name": "X", "value": "1"}]}}) != plain
    assert digest({"driver": {"version": "595.100.01"}}) != plain
    assert digest({"gds": {"enabled": True}}) != plain
