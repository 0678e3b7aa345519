"""Which labels a node gets: nvidia.com/gpu.present and nvidia.com/gpu.deploy.*."""

from __future__ import annotations

import pytest

from components.api import ClusterPolicy
from components.controllers import deploy_labels, has_gpu, node_label_patch
from components.operands import OPERANDS

NFD_GPU = {"feature.node.kubernetes.io/pci-10de.present": "true"}
DEPLOY = "nvidia.com/gpu.deploy."
ALL_ON = {
    DEPLOY + name: True
    for name in (
        "driver",
        "container-toolkit",
        "operator-validator",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "gpu-feature-discovery",
        "mig-manager",
    )
}


def apply(labels: dict[str, str], patch: dict[str, str | None]) -> dict[str, str]:
    out = dict(labels)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    "key",
    [
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0300_10de.present",
    ],
)
def test_any_nfd_nvidia_pci_label_means_a_gpu(key: str) -> None:
    assert has_gpu({key: "true"})
    assert not has_gpu({key: "false"})


def test_a_gpu_node_gets_present_and_every_enabled_operand_but_mig_manager() -> None:
    patch = node_label_patch(NFD_GPU, ALL_ON)
    assert patch["nvidia.com/gpu.present"] == "true"
    assert {k for k in patch if k.startswith(DEPLOY)} == set(ALL_ON) - {DEPLOY + "mig-manager"}
    assert all(v == "true" for v in patch.values())


def test_mig_manager_only_on_mig_capable_nodes() -> None:
    patch = node_label_patch({**NFD_GPU, "nvidia.com/mig.capable": "true"}, ALL_ON)
    assert patch[DEPLOY + "mig-manager"] == "true"
    labels = apply({**NFD_GPU, "nvidia.com/mig.capable": "true"}, patch)
    labels["nvidia.com/mig.capable"] = "false"
    assert node_label_patch(labels, ALL_ON) == {DEPLOY + "mig-manager": None}


def test_a_node_that_is_right_needs_no_write() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, ALL_ON))
    assert node_label_patch(labels, ALL_ON) == {}


def test_an_existing_value_is_respected() -> None:
    labels = {**NFD_GPU, DEPLOY + "device-plugin": "paused-for-mig-change"}
    patch = node_label_patch(labels, ALL_ON)
    assert DEPLOY + "device-plugin" not in patch
    # ... even when the operand is disabled: only our own "true" is taken back.
    off = {**ALL_ON, DEPLOY + "device-plugin": False}
    assert DEPLOY + "device-plugin" not in node_label_patch(labels, off)


def test_disabling_an_operand_removes_its_label() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, ALL_ON))
    off = {**ALL_ON, DEPLOY + "dcgm-exporter": False}
    assert node_label_patch(labels, off) == {DEPLOY + "dcgm-exporter": None}


def test_opt_out_removes_every_deploy_label_but_keeps_present() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, ALL_ON))
    labels[DEPLOY + "operands"] = "false"
    labels[DEPLOY + "device-plugin"] = "paused-for-mig-change"
    patch = node_label_patch(labels, ALL_ON)
    assert set(patch) == {k for k in labels if k.startswith(DEPLOY) and k != DEPLOY + "operands"}
    assert all(v is None for v in patch.values())
    assert node_label_patch(apply(labels, patch), ALL_ON) == {}


def test_unknown_deploy_labels_are_left_alone() -> None:
    labels = {**NFD_GPU, "nvidia.com/gpu.present": "true", DEPLOY + "sandbox-device-plugin": "true"}
    assert DEPLOY + "sandbox-device-plugin" not in node_label_patch(labels, ALL_ON)


def test_a_node_that_lost_its_gpu_is_cleaned_and_says_so() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, ALL_ON))
    labels.pop("feature.node.kubernetes.io/pci-10de.present")
    patch = node_label_patch(labels, ALL_ON)
    assert patch.pop("nvidia.com/gpu.present") == "false"
    assert set(patch) == {k for k in labels if k.startswith(DEPLOY)}
    assert (
        node_label_patch(apply(labels, {**patch, "nvidia.com/gpu.present": "false"}), ALL_ON) == {}
    )


def test_cpu_nodes_are_never_written() -> None:
    cpu = {"feature.node.kubernetes.io/system-os_release.ID": "ubuntu"}
    assert node_label_patch(cpu, ALL_ON) == {}
    assert node_label_patch(cpu, None) == {}


def test_without_a_policy_only_present_is_kept() -> None:
    assert node_label_patch(NFD_GPU, None) == {"nvidia.com/gpu.present": "true"}
    labels = {**NFD_GPU, "nvidia.com/gpu.present": "true", DEPLOY + "driver": "true"}
    assert node_label_patch(labels, None) == {}


def test_deploy_labels_follow_the_policy() -> None:
    default = deploy_labels(ClusterPolicy.from_dict({"spec": {}}), OPERANDS)
    assert default[DEPLOY + "driver"] is True
    assert default[DEPLOY + "node-status-exporter"] is False  # off unless enabled
    policy = ClusterPolicy.from_dict({"spec": {"dcgmExporter": {"enabled": False}}})
    assert deploy_labels(policy, OPERANDS)[DEPLOY + "dcgm-exporter"] is False


def test_with_nvidiadriver_resources_the_driver_label_stays() -> None:
    policy = ClusterPolicy.from_dict({"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    assert deploy_labels(policy, OPERANDS)[DEPLOY + "driver"] is True
    off = ClusterPolicy.from_dict(
        {"spec": {"driver": {"useNvidiaDriverCRD": True, "enabled": False}}}
    )
    assert deploy_labels(off, OPERANDS)[DEPLOY + "driver"] is False
