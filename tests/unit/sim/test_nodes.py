"""Simulated nodes look like what kubelet and NFD would register, and bad specs are refused
with one sentence."""

from __future__ import annotations

import pytest

from gpusim import (
    ANNOTATION_GPUS,
    ANNOTATION_MIG_CAPABLE,
    ANNOTATION_PRODUCT,
    KWOK_ANNOTATION,
    LABEL_KERNEL,
    LABEL_OS_ID,
    LABEL_OS_VERSION,
    LABEL_PCI_NVIDIA,
    ClusterConfig,
    OsRelease,
    SimError,
    cpu_node,
    gpu_node,
    kernel_labels,
    node_labels,
    node_manifest,
    parse_kernels,
    parse_os,
    parse_os_list,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ubuntu22.04", OsRelease("ubuntu", "22.04")),
        ("ubuntu24.04", OsRelease("ubuntu", "24.04")),
        ("rhel9.4", OsRelease("rhel", "9.4")),
        ("rhel8", OsRelease("rhel", "8")),
        ("rocky9.5", OsRelease("rocky", "9.5")),
        (" ol9.4 ", OsRelease("ol", "9.4")),
        ("sles15.6", OsRelease("sles", "15.6")),
        ("debian12", OsRelease("debian", "12")),
    ],
)
def test_parse_os(text: str, expected: OsRelease) -> None:
    assert parse_os(text) == expected
    assert str(expected) == text.strip()


@pytest.mark.parametrize("text", ["windows11", "ubuntu", "22.04", "ubuntu22", "Ubuntu22.04", ""])
def test_unknown_os_is_one_sentence_naming_it(text: str) -> None:
    with pytest.raises(SimError) as caught:
        parse_os(text)
    message = str(caught.value)
    assert f"unknown OS {text!r}" in message
    assert "\n" not in message


def test_os_mix_and_its_errors() -> None:
    assert parse_os_list("ubuntu22.04,rhel9.4") == (
        OsRelease("ubuntu", "22.04"),
        OsRelease("rhel", "9.4"),
    )
    with pytest.raises(SimError, match="unknown OS 'centos7'"):
        parse_os_list("ubuntu22.04,centos7")
    with pytest.raises(SimError, match="empty"):
        parse_os_list(" , ")


def test_each_os_has_a_plausible_default_kernel() -> None:
    assert parse_os("ubuntu22.04").default_kernel.endswith("-generic")
    assert "el9" in parse_os("rhel9.4").default_kernel
    assert "el8" in parse_os("rocky8.10").default_kernel
    assert parse_os("ubuntu22.04").pretty_name == "Ubuntu 22.04 LTS"


@pytest.mark.parametrize("kernel", ["6.8", "6", "6.8.0+custom", "x" * 70, "6.8.0-" + "a" * 60])
def test_kernels_must_be_valid_label_values(kernel: str) -> None:
    with pytest.raises(SimError, match="invalid kernel version"):
        parse_kernels(kernel)


def test_kernel_list() -> None:
    assert parse_kernels("5.15.0-131-generic, 6.8.0-51-generic") == (
        "5.15.0-131-generic",
        "6.8.0-51-generic",
    )
    assert parse_kernels("") == ()


def test_gpu_node_carries_nfd_labels_and_hardware_annotations() -> None:
    spec = gpu_node("gpu-a", os="rhel9.4", gpus=4, mig_capable=True)
    labels = node_labels(spec)
    assert labels[LABEL_PCI_NVIDIA] == "true"
    assert labels[LABEL_OS_ID] == "rhel"
    assert labels[LABEL_OS_VERSION] == "9.4"
    assert labels[LABEL_OS_VERSION + ".major"] == "9"
    assert labels[LABEL_KERNEL] == spec.kernel == "5.14.0-427.13.1.el9_4.x86_64"
    assert labels["feature.node.kubernetes.io/kernel-version.major"] == "5"
    assert labels["feature.node.kubernetes.io/kernel-version.minor"] == "14"
    assert labels["kubernetes.io/hostname"] == "gpu-a"
    assert not any(key.startswith("nvidia.com/") for key in labels)  # GFD's, not NFD's

    manifest = node_manifest(spec, index=3)
    annotations = manifest["metadata"]["annotations"]
    assert annotations[KWOK_ANNOTATION] == "fake"
    assert annotations[ANNOTATION_GPUS] == "4"
    assert annotations[ANNOTATION_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert annotations[ANNOTATION_MIG_CAPABLE] == "true"
    status = manifest["status"]
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.1.4"
    assert status["nodeInfo"]["kernelVersion"] == spec.kernel
    assert status["nodeInfo"]["osImage"] == "Red Hat Enterprise Linux 9.4"
    assert "nvidia.com/gpu" not in status["capacity"]  # only a device plugin adds it
    assert manifest["spec"]["podCIDR"] != node_manifest(spec, index=4)["spec"]["podCIDR"]


def test_cpu_node_has_no_nvidia_pci_device() -> None:
    spec = cpu_node("cpu-a")
    assert LABEL_PCI_NVIDIA not in node_labels(spec)
    assert ANNOTATION_GPUS not in node_manifest(spec, 0)["metadata"]["annotations"]


def test_kernel_change_labels_replace_all_kernel_parts() -> None:
    assert kernel_labels("6.8.0-51-generic") == {
        LABEL_KERNEL: "6.8.0-51-generic",
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "feature.node.kubernetes.io/kernel-version.minor": "8",
        "feature.node.kubernetes.io/kernel-version.revision": "0",
    }


def test_cluster_config_spreads_os_and_kernels() -> None:
    config = ClusterConfig(
        gpu_nodes=4,
        cpu_nodes=2,
        os=parse_os_list("ubuntu22.04,rhel9.4"),
        kernels=parse_kernels("5.15.0-131-generic,6.8.0-51-generic"),
    )
    specs = config.node_specs()
    assert [s.name for s in specs] == [
        "gpu-node-0000",
        "gpu-node-0001",
        "gpu-node-0002",
        "gpu-node-0003",
        "cpu-node-0000",
        "cpu-node-0001",
    ]
    gpu = specs[:4]
    assert [str(s.os) for s in gpu] == ["ubuntu22.04", "rhel9.4", "ubuntu22.04", "rhel9.4"]
    # Every OS gets every kernel of the mix.
    assert {(str(s.os), s.kernel) for s in gpu} == {
        ("ubuntu22.04", "5.15.0-131-generic"),
        ("ubuntu22.04", "6.8.0-51-generic"),
        ("rhel9.4", "5.15.0-131-generic"),
        ("rhel9.4", "6.8.0-51-generic"),
    }
    assert [s.gpus for s in specs] == [8, 8, 8, 8, 0, 0]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (ClusterConfig(gpu_nodes=0), "at least 1"),
        (ClusterConfig(gpu_nodes=-3), "at least 1"),
        (ClusterConfig(cpu_nodes=-1), "must not be negative"),
        (ClusterConfig(gpus_per_node=0), "between 1 and 16"),
        (ClusterConfig(product="NVIDIA-B9000"), "unknown GPU product 'NVIDIA-B9000'"),
        (ClusterConfig(product="NVIDIA-L4", mig_capable=True), "does not support MIG"),
        (ClusterConfig(container_runtime="runc"), "invalid container runtime"),
        (ClusterConfig(os=()), "OS list is empty"),
    ],
)
def test_bad_cluster_configs_are_one_sentence(config: ClusterConfig, message: str) -> None:
    with pytest.raises(SimError, match=message) as caught:
        config.node_specs()
    assert "\n" not in str(caught.value)
