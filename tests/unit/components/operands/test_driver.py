"""Driver DaemonSets: one per OS release, one per kernel and OS when precompiled; OnDelete;
conditions naming the GPU nodes that lack the labels a DaemonSet selects on."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.api import DRIVER_KERNEL_PIN_LABEL, pod_spec_targets
from components.operands import Driver, GPUNode, safe_name
from components.operands.driver import sanitize_kernel

from .cases import (
    CLUSTER,
    DIGEST,
    RHEL_KERNEL,
    UBUNTU_KERNEL,
    container,
    daemonsets,
    env_of,
    gpu_node,
    init_container,
    mounts,
    pod,
    policy,
    view,
)

pytestmark = pytest.mark.unit
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
PRECOMPILED = {"driver": {"usePrecompiled": True, "version": "595"}}
PIN = DRIVER_KERNEL_PIN_LABEL
KERNEL = "feature.node.kubernetes.io/kernel-version.full"


def node_labels(node: GPUNode, *, precompiled: bool = False) -> dict[str, str]:
    """The labels NFD, the node labeler and the upgrade controller would put on this node
    (with precompiled drivers, a node not between kernels is pinned to the one it runs)."""
    labels = {"nvidia.com/gpu.deploy.driver": "true", **node.labels}
    pin = node.pinned_kernel or (node.kernel if precompiled else None)
    for key, value in (
        ("feature.node.kubernetes.io/system-os_release.ID", node.os_id),
        ("feature.node.kubernetes.io/system-os_release.VERSION_ID", node.os_version),
        ("feature.node.kubernetes.io/kernel-version.full", node.kernel),
        (PIN, pin),
    ):
        if value is not None:
            labels[key] = value
    return labels


def selecting(dss: Mapping[str, Any], node: GPUNode) -> list[str]:
    """The DaemonSets whose node selector and node affinity admit this node."""
    precompiled = any(PIN in pod(ds)["nodeSelector"] for ds in dss.values())
    labels = node_labels(node, precompiled=precompiled)
    return [name for name, ds in dss.items() if pod_spec_targets(pod(ds), labels)]


def render(spec: Mapping[str, Any] | None = None, nodes: Sequence[GPUNode] = CLUSTER, **kw: Any):  # type: ignore[no-untyped-def]
    return Driver().render(policy(spec), view(nodes, **kw))


def test_one_daemonset_per_os_release_with_the_image_for_that_os() -> None:
    dss = daemonsets(render())
    assert sorted(dss) == ["nvidia-driver-daemonset-rhel9.4", "nvidia-driver-daemonset-ubuntu22.04"]
    ubuntu = dss["nvidia-driver-daemonset-ubuntu22.04"]
    assert pod(ubuntu)["nodeSelector"] == {
        "nvidia.com/gpu.deploy.driver": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
    }
    assert container(ubuntu)["image"] == "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"
    assert container(dss["nvidia-driver-daemonset-rhel9.4"])["image"] == (
        "nvcr.io/nvidia/driver:595.91.07-rhel9"
    )
    for ds in dss.values():
        assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert ds["metadata"]["labels"]["nvidia.com/precompiled"] == "false"
        assert ds["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-driver"
        assert init_container(ds, "k8s-driver-manager")["image"] == (
            "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"
        )
        anti = pod(ds)["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
        assert pod(ds)["hostPID"] is True


def test_every_gpu_node_is_selected_by_exactly_one_driver_daemonset() -> None:
    for spec in (None, PRECOMPILED):
        dss = daemonsets(render(spec))
        for node in CLUSTER:
            assert len(selecting(dss, node)) == 1, (spec, node.name)


def test_a_daemonset_exists_only_for_an_os_some_node_runs() -> None:
    dss = daemonsets(render(nodes=[gpu_node("only-ubuntu")]))
    assert list(dss) == ["nvidia-driver-daemonset"]  # one OS: the reference's name
    assert daemonsets(render(nodes=[])) == {}


def test_a_node_whose_os_changes_lands_on_the_other_daemonset() -> None:
    before = gpu_node("n1")
    after = gpu_node("n1", "ubuntu", "24.04", "6.8.0-60-generic")
    dss_before = daemonsets(render(nodes=[before]))
    dss_after = daemonsets(render(nodes=[after]))
    assert selecting(dss_before, before) == ["nvidia-driver-daemonset"]
    assert selecting(dss_after, after) == ["nvidia-driver-daemonset"]
    assert container(dss_before["nvidia-driver-daemonset"])["image"].endswith("-ubuntu22.04")
    assert container(dss_after["nvidia-driver-daemonset"])["image"].endswith("-ubuntu24.04")


def test_a_daemonset_spec_does_not_change_when_other_nodes_join() -> None:
    alone = daemonsets(render(nodes=[gpu_node("a"), *CLUSTER]))
    crowded = daemonsets(render(nodes=[gpu_node("a"), gpu_node("b"), *CLUSTER]))
    name = "nvidia-driver-daemonset-ubuntu22.04"
    assert alone[name] == crowded[name]


def test_every_driver_pod_has_the_reference_app_label_and_selectors_never_overlap() -> None:
    single = daemonsets(render(nodes=[gpu_node("a")]))["nvidia-driver-daemonset"]
    assert single["spec"]["selector"] == {"matchLabels": {"app": "nvidia-driver-daemonset"}}
    mixed = daemonsets(render(nodes=CLUSTER))
    assert len(mixed) > 1
    selectors = []
    for ds in mixed.values():
        labels = ds["spec"]["template"]["metadata"]["labels"]
        assert labels["app"] == "nvidia-driver-daemonset"
        match = ds["spec"]["selector"]["matchLabels"]
        assert match.items() <= labels.items()
        selectors.append(match)
    for i, a in enumerate(selectors):
        for b in selectors[i + 1 :]:
            assert any(b.get(k, v) != v for k, v in a.items()), (a, b)


def test_precompiled_one_daemonset_per_kernel_and_os() -> None:
    rendered = render(PRECOMPILED)
    dss = daemonsets(rendered)
    assert sorted(dss) == [
        "nvidia-driver-daemonset-5.14.0-427.13.1.el9.4-rhel9.4",
        "nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04",
        "nvidia-driver-daemonset-6.8.0-60-generic-ubuntu22.04",
    ]
    ds = dss["nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04"]
    assert ds["metadata"]["labels"]["nvidia.com/precompiled"] == "true"
    assert ds["spec"]["template"]["metadata"]["labels"]["nvidia.com/precompiled"] == "true"
    # The pin, not the kernel label: a node booting another kernel keeps its driver until
    # the upgrade has cleared it and moves the pin.
    assert pod(ds)["nodeSelector"][PIN] == UBUNTU_KERNEL
    assert KERNEL not in pod(ds)["nodeSelector"]
    assert container(ds)["image"] == f"nvcr.io/nvidia/driver:595-{UBUNTU_KERNEL}-ubuntu22.04"
    rhel = dss["nvidia-driver-daemonset-5.14.0-427.13.1.el9.4-rhel9.4"]
    assert pod(rhel)["nodeSelector"][PIN] == RHEL_KERNEL
    assert container(rhel)["image"] == f"nvcr.io/nvidia/driver:595-{RHEL_KERNEL}-rhel9"
    assert rendered.conditions == []


def test_a_node_between_kernels_keeps_its_driver_while_the_new_kernels_daemonset_waits() -> None:
    # Booted 6.8.0-60, still pinned to the 5.15 driver: both DaemonSets exist, the old one
    # keeps the node (and its GPU pods' driver), the new one is ready for the pin to move.
    moving = gpu_node("moving", kernel="6.8.0-60-generic", pinned_kernel=UBUNTU_KERNEL)
    dss = daemonsets(render(PRECOMPILED, [moving]))
    old = "nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04"
    new = "nvidia-driver-daemonset-6.8.0-60-generic-ubuntu22.04"
    assert sorted(dss) == [old, new]
    assert selecting(dss, moving) == [old]
    moved = gpu_node("moving", kernel="6.8.0-60-generic", pinned_kernel="6.8.0-60-generic")
    assert selecting(daemonsets(render(PRECOMPILED, [moved])), moved) == [new]


def test_a_precompiled_daemonset_does_not_select_a_node_not_yet_pinned() -> None:
    (ds,) = daemonsets(render(PRECOMPILED, [gpu_node("new")])).values()
    assert not pod_spec_targets(pod(ds), node_labels(gpu_node("new")))
    assert pod_spec_targets(pod(ds), node_labels(gpu_node("new"), precompiled=True))


def test_a_per_os_daemonset_lets_pinned_nodes_go_to_the_precompiled_ones() -> None:
    # Precompiled turned on: a node leaves the per-OS DaemonSet when it is pinned (by
    # the upgrade, once cleared), not when the policy changes.
    (ds,) = daemonsets(render(nodes=[gpu_node("n")])).values()
    assert pod_spec_targets(pod(ds), node_labels(gpu_node("n")))
    assert not pod_spec_targets(pod(ds), node_labels(gpu_node("n"), precompiled=True))


def test_precompiled_node_without_kernel_label_gets_a_condition_and_no_daemonset() -> None:
    nodes = [
        gpu_node("good"),
        gpu_node("no-kernel-1", kernel=None),
        gpu_node("no-kernel-2", kernel=None),
    ]
    rendered = render(PRECOMPILED, nodes)
    assert list(daemonsets(rendered)) == ["nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04"]
    assert [reason for reason, _ in rendered.conditions] == ["KernelLabelMissing"]
    message = rendered.conditions[0][1]
    assert "no-kernel-1, no-kernel-2" in message
    assert "feature.node.kubernetes.io/kernel-version.full" in message
    assert "good" not in message


def test_without_precompiled_a_missing_kernel_label_is_named_but_the_node_keeps_its_driver() -> (
    None
):
    rendered = render(nodes=[gpu_node("no-kernel", kernel=None)])
    assert list(daemonsets(rendered)) == ["nvidia-driver-daemonset"]
    assert [(r, "no-kernel" in m) for r, m in rendered.conditions] == [("KernelLabelMissing", True)]


def test_node_without_os_labels_gets_a_condition_and_no_daemonset() -> None:
    rendered = render(nodes=[gpu_node("bare", None, None, None), gpu_node("ok")])
    assert list(daemonsets(rendered)) == ["nvidia-driver-daemonset"]
    reasons = dict(rendered.conditions)
    assert "bare" in reasons["OSLabelsMissing"]
    assert "system-os_release.ID" in reasons["OSLabelsMissing"]


def test_opted_out_nodes_need_no_daemonset_and_raise_no_condition() -> None:
    nodes = [
        gpu_node("out", "sles", "15.5", None, labels={"nvidia.com/gpu.deploy.operands": "false"}),
        gpu_node("host-driver", "rocky", "9.3", labels={"nvidia.com/gpu.deploy.driver": "false"}),
    ]
    rendered = render(nodes=nodes)
    assert daemonsets(rendered) == {}
    assert rendered.conditions == []


def test_digest_version_is_used_as_is_without_os_suffix() -> None:
    dss = daemonsets(render({"driver": {"version": DIGEST}}))
    for ds in dss.values():
        assert container(ds)["image"] == f"nvcr.io/nvidia/driver@{DIGEST}"


def test_precompiled_with_a_digest_image_gives_a_condition_not_a_daemonset() -> None:
    spec = {"driver": {"usePrecompiled": True, "image": f"nvcr.io/nvidia/driver@{DIGEST}"}}
    rendered = render(spec, [gpu_node("a")])
    assert daemonsets(rendered) == {}
    assert [reason for reason, _ in rendered.conditions] == ["DriverImageInvalid"]
    assert "a" in rendered.conditions[0][1]


def test_driver_and_manager_env_overrides_win() -> None:
    spec = {
        "driver": {
            "kernelModuleType": "open",
            "env": [
                {"name": "KERNEL_MODULE_TYPE", "value": "proprietary"},
                {"name": "X", "value": "1"},
            ],
            "manager": {"env": [{"name": "ENABLE_AUTO_DRAIN", "value": "true"}]},
            "imagePullSecrets": ["ngc"],
            "resources": {"limits": {"memory": "2Gi"}},
        }
    }
    ds = daemonsets(render(spec, [gpu_node("a")]))["nvidia-driver-daemonset"]
    env = env_of(container(ds))
    assert env["KERNEL_MODULE_TYPE"] == "proprietary"
    assert env["OPEN_KERNEL_MODULES_ENABLED"] == "true"
    assert env["X"] == "1"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    manager = env_of(init_container(ds, "k8s-driver-manager"))
    assert manager["ENABLE_AUTO_DRAIN"] == "true"
    assert manager["ENABLE_GPU_POD_EVICTION"] == "true"
    assert pod(ds)["imagePullSecrets"] == [{"name": "ngc"}]
    assert container(ds)["resources"] == {"limits": {"memory": "2Gi"}}


def test_startup_probe_defaults_and_overrides() -> None:
    ds = daemonsets(
        render({"driver": {"startupProbe": {"failureThreshold": 240}}}, [gpu_node("a")])
    )
    probe = container(next(iter(ds.values())))["startupProbe"]
    assert probe["failureThreshold"] == 240
    assert probe["initialDelaySeconds"] == 60
    assert probe["exec"]["command"] == ["sh", "/usr/local/bin/startup-probe.sh"]


def test_repo_config_files_are_mounted_where_each_os_reads_them() -> None:
    spec = {"driver": {"repoConfig": {"configMapName": "repos"}}}
    rendered = render(spec, config_map_keys={"repos": ["mirror.list", "mirror.repo"]})
    dss = daemonsets(rendered)
    ubuntu = mounts(container(dss["nvidia-driver-daemonset-ubuntu22.04"]))
    rhel = mounts(container(dss["nvidia-driver-daemonset-rhel9.4"]))
    assert ubuntu["/etc/apt/sources.list.d/mirror.list"] == "repos"
    assert rhel["/etc/yum.repos.d/mirror.repo"] == "repos"
    assert rendered.conditions == []


def test_a_missing_config_map_is_one_condition() -> None:
    rendered = render({"driver": {"kernelModuleConfig": {"name": "kmod"}}})
    assert rendered.conditions == [
        (
            "ConfigMapMissing",
            "driver.kernelModuleConfig names ConfigMap 'kmod', which does not exist in "
            "namespace gpu-operator",
        )
    ]
    assert len(daemonsets(rendered)) == 2


def test_disabled_or_delegated_to_nvidiadriver_renders_nothing() -> None:
    for spec in ({"driver": {"enabled": False}}, {"driver": {"useNvidiaDriverCRD": True}}):
        assert Driver().enabled(policy(spec)) is False
        assert render(spec).objects == []


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [
        ("5.15.0-105-generic", "5.15.0-105-generic"),
        ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9.4"),
        ("6.1.0+rpt-rpi-v8", "6.1.0-rpt-rpi-v8"),
        ("5.14.0-284.el9.aarch64_64k", "5.14.0-284.el9"),
        ("6.8.0-1015-AWS", "6.8.0-1015-aws"),
    ],
)
def test_kernel_versions_become_valid_names(kernel: str, expected: str) -> None:
    assert sanitize_kernel(kernel) == expected


def test_long_kernels_give_short_unique_valid_names() -> None:
    long_a = "6.8.0-1015-" + "very-long-vendor-flavour-" * 3 + "a"
    long_b = "6.8.0-1015-" + "very-long-vendor-flavour-" * 3 + "b"
    nodes = [gpu_node("a", kernel=long_a), gpu_node("b", kernel=long_b)]
    dss = daemonsets(render(PRECOMPILED, nodes))
    assert len(dss) == 2
    for name, ds in dss.items():
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        assert ds["spec"]["template"]["metadata"]["labels"]["app"] == "nvidia-driver-daemonset"
        for value in ds["metadata"]["labels"].values():
            assert len(value) <= 63
    for node in nodes:
        assert len(selecting(dss, node)) == 1


def test_kernels_that_differ_only_by_architecture_get_distinct_daemonsets() -> None:
    nodes = [
        gpu_node("x86", "rhel", "9.4", "5.14.0-427.el9_4.x86_64"),
        gpu_node("arm", "rhel", "9.4", "5.14.0-427.el9_4.aarch64"),
    ]
    dss = daemonsets(render(PRECOMPILED, nodes))
    assert len(dss) == 2
    for node in nodes:
        (name,) = selecting(dss, node)
        assert name.startswith("nvidia-driver-daemonset-5.14.0-427.el9.4-")


@pytest.mark.parametrize(
    "raw",
    ["Nvidia_Driver+Thing", "-leading.and.trailing-", "a" * 100, "x" * 63, "UPPER", "+++"],
)
def test_safe_name_is_always_a_dns_label(raw: str) -> None:
    name = safe_name(raw)
    assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert safe_name(raw) == name


def test_safe_name_keeps_short_valid_names_and_hashes_long_ones_apart() -> None:
    assert safe_name("nvidia-driver-daemonset-ubuntu22.04") == "nvidia-driver-daemonset-ubuntu22.04"
    assert safe_name("a" * 70 + "1") != safe_name("a" * 70 + "2")


def _digests(spec: Mapping[str, Any]) -> tuple[str, str, str]:
    """The driver container's and manager's `DRIVER_CONFIG_DIGEST`, and its annotation twin."""
    ds = daemonsets(render(spec, [gpu_node("a")]))["nvidia-driver-daemonset"]
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    return (
        env_of(container(ds))["DRIVER_CONFIG_DIGEST"],
        env_of(init_container(ds, "k8s-driver-manager"))["DRIVER_CONFIG_DIGEST"],
        annotations["nvidia.com/gpu-driver-config-digest"],
    )


def test_the_config_digest_ignores_cosmetic_changes_and_follows_the_install() -> None:
    base = {"driver": {"version": "595.91.07"}}
    digest = _digests(base)
    assert len(set(digest)) == 1  # the same digest on both containers and the annotation
    # A label, an annotation, a toleration or a priority class on the pods: no reinstall.
    cosmetic = {
        **base,
        "daemonsets": {
            "labels": {"example.com/team": "ml"},
            "annotations": {"example.com/owner": "platform"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "priorityClassName": "gpu-critical",
        },
    }
    assert _digests(cosmetic) == digest
    # What the driver is installed with changes it: its version, its env.
    assert _digests({"driver": {"version": "595.100.01"}})[0] != digest[0]
    env = {"driver": {"version": "595.91.07", "env": [{"name": "X", "value": "1"}]}}
    assert _digests(env)[0] != digest[0]
