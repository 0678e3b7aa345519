"""How GPU management pods reach their GPUs under each runtime mode, as an admin sees it in
the rendered objects: the RuntimeClasses, the toolkit's env and mounts, and which pods name
a RuntimeClass or carry the NRI plugin's annotation (CDI, CRI-O without CDI, NRI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.operands import (
    DCGM,
    DCGMExporter,
    DevicePlugin,
    GPUFeatureDiscovery,
    GPUNode,
    MIGManager,
    Prerequisites,
    Rendered,
    Toolkit,
    Validator,
)

from .cases import (
    CLUSTER,
    RHEL_KERNEL,
    container,
    daemonsets,
    env_of,
    gpu_node,
    init_container,
    kinds_and_names,
    mounts,
    pod,
    policy,
    view,
    volumes,
)

pytestmark = pytest.mark.unit

NRI = {"cdi": {"enabled": True, "nriPluginEnabled": True}}
NO_CDI = {"cdi": {"enabled": False}}
CRIO = [
    gpu_node("gpu-rhel-1", "rhel", "9.4", RHEL_KERNEL, runtime="cri-o://1.31.0"),
    gpu_node("gpu-rhel-2", "rhel", "9.4", RHEL_KERNEL, runtime="cri-o://1.31.0", mig_capable=True),
]
#: Management operands and the container the NRI plugin gives the GPUs to.
MANAGEMENT = (
    (DevicePlugin(), "nvidia-device-plugin"),
    (DCGM(), "nvidia-dcgm-ctr"),
    (DCGMExporter(), "nvidia-dcgm-exporter"),
    (GPUFeatureDiscovery(), "gpu-feature-discovery"),
    (MIGManager(), "nvidia-mig-manager"),
    (Validator(), "toolkit-validation"),
)


def render(
    op: Any, spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER
) -> Rendered:
    rendered: Rendered = op.render(policy(spec), view(nodes))
    return rendered


def only_ds(rendered: Rendered) -> dict[str, Any]:
    (ds,) = daemonsets(rendered).values()
    return ds


def annotations(ds: Mapping[str, Any]) -> dict[str, str]:
    return dict(ds["spec"]["template"]["metadata"].get("annotations", {}))


def toolkit(spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER):  # type: ignore[no-untyped-def]
    rendered = render(Toolkit(), spec, nodes)
    ds = only_ds(rendered)
    return rendered, ds, container(ds)


# --- RuntimeClasses -------------------------------------------------------------------------


def test_with_cdi_the_cdi_and_legacy_runtime_classes_too() -> None:
    runtime_classes = {
        n for k, n in kinds_and_names(render(Prerequisites())) if k == "RuntimeClass"
    }
    assert runtime_classes == {"nvidia", "nvidia-cdi", "nvidia-legacy"}
    for rc in render(Prerequisites()).objects:
        assert rc["handler"] == rc["metadata"]["name"]
    assert kinds_and_names(render(Prerequisites(), NO_CDI)) == {("RuntimeClass", "nvidia")}


# --- management pods ------------------------------------------------------------------------


@pytest.mark.parametrize(("op", "ctr"), MANAGEMENT, ids=[c for _, c in MANAGEMENT])
def test_nri_plugin_mode_annotates_pods_and_names_no_runtime_class(op: Any, ctr: str) -> None:
    ds = only_ds(render(op, NRI))
    assert annotations(ds)[f"nvidia.cdi.k8s.io/container.{ctr}"] == (
        "management.nvidia.com/gpu=all"
    )
    assert "runtimeClassName" not in pod(ds)


@pytest.mark.parametrize(("op", "ctr"), MANAGEMENT, ids=[c for _, c in MANAGEMENT])
def test_without_nri_pods_name_the_runtime_class_and_carry_no_annotation(op: Any, ctr: str) -> None:
    ds = only_ds(render(op))
    assert pod(ds)["runtimeClassName"] == "nvidia"
    assert not any(key.startswith("nvidia.cdi.k8s.io/") for key in annotations(ds))


@pytest.mark.parametrize(("op", "ctr"), MANAGEMENT, ids=[c for _, c in MANAGEMENT])
def test_crio_without_cdi_names_no_runtime_class(op: Any, ctr: str) -> None:
    assert "runtimeClassName" not in pod(only_ds(render(op, NO_CDI, CRIO)))
    # CRI-O with CDI, or containerd without it: the RuntimeClass as usual.
    assert pod(only_ds(render(op, {}, CRIO)))["runtimeClassName"] == "nvidia"
    assert pod(only_ds(render(op, NO_CDI)))["runtimeClassName"] == "nvidia"


def test_validator_test_pods_run_like_the_validator() -> None:
    cuda = env_of(init_container(only_ds(render(Validator())), "cuda-validation"))
    assert cuda["VALIDATOR_RUNTIME_CLASS"] == "nvidia"
    cuda = env_of(init_container(only_ds(render(Validator(), NRI)), "cuda-validation"))
    assert "VALIDATOR_RUNTIME_CLASS" not in cuda


# --- the toolkit ---------------------------------------------------------------------------


def test_cdi_env_on_the_toolkit() -> None:
    _, _, ctr = toolkit()
    env = env_of(ctr)
    assert env["CDI_ENABLED"] == "true"
    assert env["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "false"
    assert env["CRIO_CONFIG_MODE"] == "config"
    assert "ENABLE_NRI_PLUGIN" not in env
    assert "NRI_SOCKET" not in env


def test_crio_without_cdi_gets_the_oci_hook() -> None:
    _, ds, ctr = toolkit(NO_CDI, CRIO)
    env = env_of(ctr)
    assert env["CRIO_CONFIG_MODE"] == "hook"
    assert "CDI_ENABLED" not in env
    assert volumes(ds)["crio-hooks"]["hostPath"]["path"] == "/usr/share/containers/oci/hooks.d"
    _, _, ctr = toolkit({}, CRIO)
    assert env_of(ctr)["CRIO_CONFIG_MODE"] == "config"


def test_nri_plugin_mode_mounts_the_nri_socket_and_no_runtime_config() -> None:
    _, ds, ctr = toolkit(NRI)
    env = env_of(ctr)
    assert env["ENABLE_NRI_PLUGIN"] == "true"
    assert env["NRI_SOCKET"] == "/runtime/nri-sock-dir/nri.sock"
    assert mounts(ctr)["/runtime/nri-sock-dir"] == "nri-socket"
    assert volumes(ds)["nri-socket"]["hostPath"] == {
        "path": "/var/run/nri",
        "type": "DirectoryOrCreate",
    }
    # The plugin neither reads nor writes containerd's config: nothing of it is mounted.
    assert "CONTAINERD_RUNTIME_CLASS" not in env
    assert not {"CONTAINERD_CONFIG", "CONTAINERD_SOCKET", "RUNTIME_CONFIG"} & env.keys()
    assert not any(path.startswith("/runtime/config-dir") for path in mounts(ctr))
    assert env["RUNTIME"] == "containerd"


def test_nri_socket_from_toolkit_env_is_a_host_path() -> None:
    spec = {**NRI, "toolkit": {"env": [{"name": "NRI_SOCKET", "value": "/run/k3s/nri/nri.sock"}]}}
    _, ds, ctr = toolkit(spec)
    assert env_of(ctr)["NRI_SOCKET"] == "/runtime/nri-sock-dir/nri.sock"
    assert volumes(ds)["nri-socket"]["hostPath"]["path"] == "/run/k3s/nri"


def test_nri_without_cdi_is_ignored_with_a_condition() -> None:
    spec = {"cdi": {"enabled": False, "nriPluginEnabled": True}}
    rendered, _, ctr = toolkit(spec)
    assert "ENABLE_NRI_PLUGIN" not in env_of(ctr)
    assert [reason for reason, _ in rendered.conditions] == ["NRIPluginNeedsCDI"]
    assert pod(only_ds(render(DevicePlugin(), spec)))["runtimeClassName"] == "nvidia"


def test_runtime_config_sources_are_read_through_the_host_root() -> None:
    sources = "command,file=/etc/containerd/config.toml,file=/var/lib/rancher/k3s/config.toml"
    spec = {"toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": sources}]}}
    _, _, ctr = toolkit(spec)
    assert env_of(ctr)["RUNTIME_CONFIG_SOURCE"] == (
        "command,file=/host/etc/containerd/config.toml,file=/host/var/lib/rancher/k3s/config.toml"
    )
    assert mounts(ctr)["/host"] == "host-root"
