"""Which labels a node gets: nvidia.com/gpu.present, nvidia.com/gpu.deploy.* and the
driver auto-upgrade annotation, as the reference writes them."""

from __future__ import annotations

import pytest

from components.api import ClusterPolicy
from components.controllers import (
    LabelPolicy,
    annotation_patch,
    has_gpu,
    host_driver,
    node_label_patch,
)

NFD_GPU = {"feature.node.kubernetes.io/pci-10de.present": "true"}
DEPLOY = "nvidia.com/gpu.deploy."
CONTAINER_SET = {
    DEPLOY + name
    for name in (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "node-status-exporter",
        "operator-validator",
        "node-agent",
        "client",
    )
}
POLICY = LabelPolicy()
SANDBOX = LabelPolicy(sandbox_enabled=True)
UPGRADE = "nvidia.com/gpu-driver-upgrade-enabled"


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


def test_a_gpu_node_gets_present_and_the_whole_container_set() -> None:
    patch = node_label_patch(NFD_GPU, POLICY)
    assert patch["nvidia.com/gpu.present"] == "true"
    assert {k for k in patch if k.startswith(DEPLOY)} == CONTAINER_SET
    assert all(v == "true" for v in patch.values())


def test_node_status_exporter_and_client_labels_whether_or_not_enabled() -> None:
    # The labels say where an operand may run; a disabled one simply has no DaemonSet.
    policy = ClusterPolicy.from_dict({"spec": {"dcgmExporter": {"enabled": False}}})
    patch = node_label_patch(NFD_GPU, LabelPolicy.of(policy))
    assert patch[DEPLOY + "node-status-exporter"] == "true"
    assert patch[DEPLOY + "dcgm-exporter"] == "true"
    assert patch[DEPLOY + "client"] == "true"


def test_mig_manager_on_mig_capable_nodes_only() -> None:
    patch = node_label_patch({**NFD_GPU, "nvidia.com/mig.capable": "true"}, POLICY)
    assert patch[DEPLOY + "mig-manager"] == "true"
    assert DEPLOY + "mig-manager" not in node_label_patch(
        {**NFD_GPU, "nvidia.com/mig.capable": "false"}, POLICY
    )


@pytest.mark.parametrize(
    ("product", "capable"),
    [
        ("NVIDIA-A100-SXM4-80GB", True),
        ("NVIDIA-A30", True),
        ("NVIDIA-H100-80GB-HBM3", True),
        ("NVIDIA-H200", True),
        ("NVIDIA-B200", True),
        ("Tesla-T4", False),
    ],
)
def test_mig_manager_from_the_product_before_gfd_says(product: str, capable: bool) -> None:
    patch = node_label_patch({**NFD_GPU, "nvidia.com/gpu.product": product}, POLICY)
    assert (DEPLOY + "mig-manager" in patch) is capable
    # mig.capable, once there, decides.
    said_no = {**NFD_GPU, "nvidia.com/gpu.product": product, "nvidia.com/mig.capable": "false"}
    assert DEPLOY + "mig-manager" not in node_label_patch(said_no, POLICY)


def test_no_mig_manager_on_a_vgpu_host() -> None:
    labels = {
        **NFD_GPU,
        "nvidia.com/mig.capable": "true",
        "nvidia.com/vgpu.host-driver-version": "580.95",
    }
    assert DEPLOY + "mig-manager" not in node_label_patch(labels, POLICY)


def test_a_node_that_is_right_needs_no_write() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    assert node_label_patch(labels, POLICY) == {}


def test_an_existing_value_is_respected() -> None:
    labels = {**NFD_GPU, DEPLOY + "device-plugin": "paused-for-mig-change"}
    patch = node_label_patch(labels, POLICY)
    assert DEPLOY + "device-plugin" not in patch
    assert DEPLOY + "driver" in patch


def test_opt_out_removes_every_deploy_label_but_keeps_present() -> None:
    labels = apply(NFD_GPU, node_label_patch({**NFD_GPU, "nvidia.com/mig.capable": "true"}, POLICY))
    labels[DEPLOY + "operands"] = "false"
    labels[DEPLOY + "device-plugin"] = "paused-for-mig-change"
    patch = node_label_patch(labels, POLICY)
    assert set(patch) == {k for k in labels if k.startswith(DEPLOY) and k != DEPLOY + "operands"}
    assert all(v is None for v in patch.values())
    assert node_label_patch(apply(labels, patch), POLICY) == {}


def test_unknown_deploy_labels_are_left_alone() -> None:
    labels = {**NFD_GPU, "nvidia.com/gpu.present": "true", DEPLOY + "my-own-daemon": "true"}
    assert DEPLOY + "my-own-daemon" not in node_label_patch(labels, POLICY)


def test_sandbox_labels_go_from_a_container_node() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    labels[DEPLOY + "sandbox-device-plugin"] = "true"
    assert node_label_patch(labels, POLICY) == {DEPLOY + "sandbox-device-plugin": None}


def test_workload_config_picks_the_set_with_sandbox_workloads_on() -> None:
    labels = {**NFD_GPU, "nvidia.com/gpu.workload.config": "vm-passthrough"}
    patch = node_label_patch(labels, SANDBOX)
    deploy = {k for k in patch if k.startswith(DEPLOY)}
    assert deploy == {
        DEPLOY + name
        for name in (
            "sandbox-device-plugin",
            "sandbox-validator",
            "vfio-manager",
            "kata-manager",
            "cc-manager",
            "client",
        )
    }
    kata = node_label_patch(labels, LabelPolicy(sandbox_enabled=True, sandbox_mode="kata"))
    assert DEPLOY + "kata-sandbox-device-plugin" in kata
    assert DEPLOY + "sandbox-device-plugin" not in kata
    # Without sandbox workloads the label is not read: containers.
    assert {k for k in node_label_patch(labels, POLICY) if k.startswith(DEPLOY)} == CONTAINER_SET


def test_moving_a_node_to_vgpu_swaps_its_labels() -> None:
    mig = {**NFD_GPU, "nvidia.com/mig.capable": "true"}
    labels = apply(mig, node_label_patch(mig, SANDBOX))  # default workload: container
    assert labels[DEPLOY + "mig-manager"] == "true"
    labels["nvidia.com/gpu.workload.config"] = "vm-vgpu"
    labels = apply(labels, node_label_patch(labels, SANDBOX))
    assert {k for k in labels if k.startswith(DEPLOY)} == {
        DEPLOY + name
        for name in (
            "sandbox-device-plugin",
            "vgpu-manager",
            "vgpu-device-manager",
            "sandbox-validator",
            "cc-manager",
            "client",
        )
    }


def test_an_invalid_workload_config_falls_back_to_the_default() -> None:
    labels = {**NFD_GPU, "nvidia.com/gpu.workload.config": "vm-bogus"}
    policy = LabelPolicy(sandbox_enabled=True, default_workload="vm-vgpu")
    assert DEPLOY + "vgpu-manager" in node_label_patch(labels, policy)


def test_a_node_that_lost_its_gpu_is_cleaned_and_says_so() -> None:
    labels = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    labels.pop("feature.node.kubernetes.io/pci-10de.present")
    patch = node_label_patch(labels, POLICY)
    assert patch.pop("nvidia.com/gpu.present") == "false"
    assert set(patch) == {k for k in labels if k.startswith(DEPLOY)}
    assert (
        node_label_patch(apply(labels, {**patch, "nvidia.com/gpu.present": "false"}), POLICY) == {}
    )


def test_cpu_nodes_are_never_written() -> None:
    cpu = {"feature.node.kubernetes.io/system-os_release.ID": "ubuntu"}
    assert node_label_patch(cpu, POLICY) == {}
    assert node_label_patch(cpu, None) == {}


def test_without_a_policy_only_present_is_kept() -> None:
    assert node_label_patch(NFD_GPU, None) == {"nvidia.com/gpu.present": "true"}
    labels = {**NFD_GPU, "nvidia.com/gpu.present": "true", DEPLOY + "driver": "true"}
    assert node_label_patch(labels, None) == {}


def test_upgrade_annotation_follows_auto_upgrade() -> None:
    gpu = {"nvidia.com/gpu.present": "true"}
    on = ClusterPolicy.from_dict({"spec": {"driver": {"upgradePolicy": {"autoUpgrade": True}}}})
    assert annotation_patch(gpu, {}, LabelPolicy.of(on)) == {UPGRADE: "true"}
    assert annotation_patch(gpu, {UPGRADE: "true"}, LabelPolicy.of(on)) == {}
    off = ClusterPolicy.from_dict({"spec": {"driver": {"upgradePolicy": {"autoUpgrade": False}}}})
    assert annotation_patch(gpu, {UPGRADE: "true"}, LabelPolicy.of(off)) == {UPGRADE: None}
    assert annotation_patch(gpu, {}, LabelPolicy.of(off)) == {}
    # Not with the driver off, nor with sandbox workloads, nor on a node without a GPU.
    no_driver = ClusterPolicy.from_dict(
        {"spec": {"driver": {"enabled": False, "upgradePolicy": {"autoUpgrade": True}}}}
    )
    assert annotation_patch(gpu, {}, LabelPolicy.of(no_driver)) == {}
    sandbox = ClusterPolicy.from_dict(
        {
            "spec": {
                "driver": {"upgradePolicy": {"autoUpgrade": True}},
                "sandboxWorkloads": {"enabled": True},
            }
        }
    )
    assert annotation_patch(gpu, {}, LabelPolicy.of(sandbox)) == {}
    assert annotation_patch({}, {}, LabelPolicy.of(on)) == {}
    assert annotation_patch(gpu, {UPGRADE: "true"}, None) == {}


def test_with_nvidiadriver_resources_upgrades_are_still_announced() -> None:
    policy = ClusterPolicy.from_dict(
        {"spec": {"driver": {"useNvidiaDriverCRD": True, "upgradePolicy": {"autoUpgrade": True}}}}
    )
    assert LabelPolicy.of(policy).auto_upgrade


def _agent_says(reason: str, status: str = "True") -> dict[str, object]:
    return {"conditions": [{"type": "GPUDriverReady", "status": status, "reason": reason}]}


def test_a_host_installed_driver_labels_the_node_pre_installed() -> None:
    assert host_driver(_agent_says("HostDriver"))
    assert not host_driver(_agent_says("DriverContainer"))
    assert not host_driver(_agent_says("HostDriver", status="False"))
    labelled = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    patch = node_label_patch(labelled, POLICY, host_driver=True)
    assert patch == {DEPLOY + "driver": "pre-installed"}
    # Settled: nothing more to write, and the label stays if the agent stops saying so.
    after = apply(labelled, patch)
    assert node_label_patch(after, POLICY, host_driver=True) == {}
    assert node_label_patch(after, POLICY) == {}
    # A new GPU node gets it with its first labels.
    assert node_label_patch(NFD_GPU, POLICY, host_driver=True)[DEPLOY + "driver"] == (
        "pre-installed"
    )


def test_pre_installed_is_not_set_over_another_value_nor_mid_upgrade() -> None:
    labelled = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    paused = {**labelled, DEPLOY + "driver": "false"}
    assert node_label_patch(paused, POLICY, host_driver=True) == {}
    walking = {**labelled, "nvidia.com/gpu-driver-upgrade-state": "pod-restart-required"}
    assert node_label_patch(walking, POLICY, host_driver=True) == {}
    done = {**labelled, "nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}
    assert node_label_patch(done, POLICY, host_driver=True) == {DEPLOY + "driver": "pre-installed"}
    # Without an active policy nothing but gpu.present is kept.
    assert node_label_patch(labelled, None, host_driver=True) == {}


STATE = "nvidia.com/gpu-driver-upgrade-state"


def _policy(driver: dict[str, object]) -> LabelPolicy:
    return LabelPolicy.of(ClusterPolicy.from_dict({"spec": {"driver": driver}}))


AUTO = {"upgradePolicy": {"autoUpgrade": True}}


def test_a_new_gpu_node_gets_its_first_upgrade_state_in_the_same_write() -> None:
    # One PATCH per node: the deploy labels and `upgrade-done` together, the state the
    # walk would otherwise write on its own once the driver pod is there.
    patch = node_label_patch(NFD_GPU, _policy(AUTO))
    assert patch[STATE] == "upgrade-done"
    assert {k for k in patch if k.startswith(DEPLOY)} == CONTAINER_SET


@pytest.mark.parametrize(
    "driver",
    [
        {},  # auto upgrade off: the walk leaves the node alone
        {"enabled": False, **AUTO},  # no driver of ours
        {"useNvidiaDriverCRD": True, **AUTO},  # pools with upgrade policies of their own
    ],
)
def test_no_upgrade_state_unless_the_policy_s_driver_upgrades_automatically(
    driver: dict[str, object],
) -> None:
    assert STATE not in node_label_patch(NFD_GPU, _policy(driver))


def test_an_existing_upgrade_state_is_the_walk_s_and_never_written() -> None:
    labels = {**NFD_GPU, STATE: "upgrade-required"}
    assert STATE not in node_label_patch(labels, _policy(AUTO))
    # A node that already has the driver label (deploy labels written before) is not
    # written only for the state: the walk writes it when it needs one.
    right = apply(NFD_GPU, node_label_patch(NFD_GPU, POLICY))
    assert node_label_patch(right, _policy(AUTO)) == {}
