"""The container toolkit: which runtime it configures, and where that runtime's files are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.operands import GPUNode, Rendered, Toolkit
from components.operands._runtime import detect_runtime

from .cases import (
    CLUSTER,
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


def render(spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER) -> Rendered:
    return Toolkit().render(policy(spec), view(nodes))


def toolkit_ds(rendered: Rendered) -> dict[str, Any]:
    return daemonsets(rendered)["nvidia-container-toolkit-daemonset"]


def on(*runtimes: str) -> list[GPUNode]:
    return [gpu_node(f"n{i}", runtime=r) for i, r in enumerate(runtimes)]


@pytest.mark.parametrize(
    ("runtimes", "expected"),
    [
        (["containerd://2.1.4"], "containerd"),
        (["cri-o://1.31.0"], "crio"),
        (["docker://27.3.1"], "docker"),
        (["cri-o://1.31.0", "cri-o://1.31.0", "containerd://1.7.0"], "crio"),
        (["docker://27.3.1", "containerd://1.7.0"], "containerd"),  # tie: containerd first
        (["remote://x", ""], "containerd"),  # nothing known: the default
        ([], "containerd"),
    ],
)
def test_detect_runtime(runtimes: list[str], expected: str) -> None:
    assert detect_runtime(on(*runtimes)) == expected


def test_detect_runtime_falls_back_to_the_given_default() -> None:
    assert detect_runtime([], default="crio") == "crio"
    assert detect_runtime(on("containerd://2.0.0"), default="docker") == "containerd"


def test_an_unknown_node_runtime_is_containerd_never_the_default_runtime() -> None:
    nodes = on("remote://1.0")
    assert env_of(container(toolkit_ds(render({}, nodes))))["RUNTIME"] == "containerd"
    explicit = {"operator": {"defaultRuntime": "docker"}}
    assert env_of(container(toolkit_ds(render(explicit, nodes))))["RUNTIME"] == "containerd"
    # defaultRuntime is for nodes that report no runtime at all.
    assert env_of(container(toolkit_ds(render(explicit, on("")))))["RUNTIME"] == "docker"


def test_containerd_defaults() -> None:
    ds = toolkit_ds(render())
    ctr = container(ds)
    env = env_of(ctr)
    assert env["RUNTIME"] == "containerd"
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    assert env["CONTAINERD_CONFIG"] == "/runtime/config-dir/config.toml"
    assert env["CONTAINERD_SOCKET"] == "/runtime/sock-dir/containerd.sock"
    assert env["RUNTIME_DROP_IN_CONFIG"] == "/runtime/config-dir.d/99-nvidia.toml"
    assert env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/containerd/conf.d/99-nvidia.toml"
    assert env["ROOT"] == "/usr/local/nvidia"
    assert env["CDI_ENABLED"] == "true"
    vols = volumes(ds)
    assert vols["containerd-config"]["hostPath"]["path"] == "/etc/containerd"
    assert vols["containerd-drop-in-config"]["hostPath"]["path"] == "/etc/containerd/conf.d"
    assert vols["containerd-socket"]["hostPath"]["path"] == "/run/containerd"
    assert mounts(ctr)["/runtime/config-dir"] == "containerd-config"
    assert pod(ds)["nodeSelector"] == {"nvidia.com/gpu.deploy.container-toolkit": "true"}
    # the toolkit waits until the validator has found a driver
    waits = env_of(init_container(ds, "driver-validation"))
    assert waits["COMPONENT"] == "driver" and waits["WITH_WAIT"] == "true"


def test_crio_nodes_get_crio_config_and_no_socket() -> None:
    ds = toolkit_ds(render(nodes=on("cri-o://1.31.0")))
    env = env_of(container(ds))
    assert env["RUNTIME"] == "crio"
    assert env["CRIO_CONFIG_MODE"] == "config"
    assert env["CRIO_CONFIG"] == "/runtime/config-dir/config.toml"
    assert env["RUNTIME_DROP_IN_CONFIG_HOST_PATH"] == "/etc/crio/crio.conf.d/99-nvidia.conf"
    assert "CONTAINERD_CONFIG" not in env and "RUNTIME_SOCKET" not in env
    assert volumes(ds)["crio-config"]["hostPath"]["path"] == "/etc/crio"


def test_docker_nodes_get_docker_config_and_socket() -> None:
    ds = toolkit_ds(render(nodes=on("docker://27.3.1")))
    env = env_of(container(ds))
    assert env["RUNTIME"] == "docker"
    assert env["DOCKER_CONFIG"] == "/runtime/config-dir/daemon.json"
    assert env["DOCKER_SOCKET"] == "/runtime/sock-dir/docker.sock"
    assert "RUNTIME_DROP_IN_CONFIG" not in env
    assert volumes(ds)["docker-socket"]["hostPath"]["path"] == "/var/run"


def test_toolkit_env_overrides_defaults_and_host_paths() -> None:
    k3s = "/var/lib/rancher/k3s/agent/etc/containerd"
    spec = {
        "toolkit": {
            "env": [
                {"name": "CONTAINERD_CONFIG", "value": f"{k3s}/config.toml.tmpl"},
                {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
                {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia-experimental"},
                {"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "true"},
                {"name": "EXTRA", "value": "yes"},
            ]
        }
    }
    ds = toolkit_ds(render(spec))
    env = env_of(container(ds))
    assert env["CONTAINERD_CONFIG"] == "/runtime/config-dir/config.toml.tmpl"
    assert env["CONTAINERD_SOCKET"] == "/runtime/sock-dir/containerd.sock"
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia-experimental"
    assert env["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == "true"
    assert env["EXTRA"] == "yes"
    vols = volumes(ds)
    assert vols["containerd-config"]["hostPath"]["path"] == k3s
    assert vols["containerd-socket"]["hostPath"]["path"] == "/run/k3s/containerd"
    names = [e["name"] for e in container(ds)["env"]]
    assert len(names) == len(set(names))


def test_runtime_class_and_install_dir_follow_the_policy() -> None:
    spec = {"operator": {"runtimeClass": "nvidia-cdi"}, "toolkit": {"installDir": "/opt/nvidia"}}
    ds = toolkit_ds(render(spec))
    env = env_of(container(ds))
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia-cdi"
    assert env["ROOT"] == "/opt/nvidia"
    assert volumes(ds)["toolkit-install-dir"]["hostPath"]["path"] == "/opt/nvidia"


def test_mixed_runtimes_name_the_nodes_left_out() -> None:
    nodes = [
        *on("containerd://2.1.4", "containerd://2.1.4"),
        gpu_node("crio-node", runtime="cri-o://1.31"),
    ]
    rendered = render(nodes=nodes)
    assert env_of(container(toolkit_ds(rendered)))["RUNTIME"] == "containerd"
    ((reason, message),) = rendered.conditions
    assert reason == "MixedContainerRuntimes"
    assert "crio-node" in message


def test_disabled_toolkit_renders_nothing() -> None:
    spec = {"toolkit": {"enabled": False}}
    assert Toolkit().enabled(policy(spec)) is False
    assert render(spec).objects == []
