"""Pod specs as NVIDIA's operator renders them (issue 48), one fact each: what a real node
would notice (env, mounts, security contexts, hooks, images) where NVIDIA's images expect
it. The end-to-end fidelity test (tests/e2e/fidelity/) compares whole objects with the
reference's on a simulated cluster; these pin each fact without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from components.operands import OPERANDS, Rendered

from .cases import (
    container,
    daemonsets,
    env_of,
    gpu_node,
    init_container,
    policy,
    view,
)

pytestmark = pytest.mark.unit

MPS_CONFIG = (
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
)
NODES = (
    gpu_node("gpu-1", mig_capable=True, labels={"nvidia.com/device-plugin.config": "mps"}),
    gpu_node("gpu-2"),
)
OPERATOR_IMAGE = "nvcr.io/nvidia/gpu-operator:v26.7.0"


def _all(spec: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every DaemonSet the policy brings on a cluster where each operand has a node (one
    MIG-capable node using an MPS device-plugin config)."""
    full = {"devicePlugin": {"config": {"name": "plugin-configs"}}, **(spec or {})}
    cp = policy(full)
    cluster = view(NODES, config_map_data={"plugin-configs": {"mps": MPS_CONFIG}})
    objects = [o for operand in OPERANDS for o in operand.render(cp, cluster).objects]
    return daemonsets(Rendered(objects=objects))


WAITING = [
    ("gpu-feature-discovery", "toolkit-validation"),
    ("nvidia-dcgm", "toolkit-validation"),
    ("nvidia-dcgm-exporter", "toolkit-validation"),
    ("nvidia-device-plugin-daemonset", "toolkit-validation"),
    ("nvidia-device-plugin-mps-control-daemon", "toolkit-validation"),
    ("nvidia-mig-manager", "toolkit-validation"),
    ("nvidia-container-toolkit-daemonset", "driver-validation"),
]


@pytest.mark.parametrize(("daemonset", "name"), WAITING)
def test_init_containers_waiting_for_the_validators_files_run_as_root(
    daemonset: str, name: str
) -> None:
    """The validator's image is the operator's distroless one, which runs as non-root: the
    init containers from it read and write /run/nvidia as root, as the reference's do."""
    ds = _all({"dcgm": {"enabled": True}, "migManager": {"enabled": True}})[daemonset]
    assert init_container(ds, name)["securityContext"]["runAsUser"] == 0


@pytest.mark.parametrize(
    ("daemonset", "volume", "path"),
    [
        ("gpu-feature-discovery", "run-nvidia", "/run/nvidia"),
        ("nvidia-dcgm", "run-nvidia", "/run/nvidia"),
        ("nvidia-dcgm-exporter", "run-nvidia", "/run/nvidia"),
        ("nvidia-device-plugin-mps-control-daemon", "run-nvidia", "/run/nvidia"),
        ("nvidia-device-plugin-daemonset", "run-nvidia-validations", "/run/nvidia/validations"),
        ("nvidia-mig-manager", "run-nvidia-validations", "/run/nvidia/validations"),
    ],
)
def test_toolkit_validation_mounts_what_the_references_mounts(
    daemonset: str, volume: str, path: str
) -> None:
    ds = _all({"dcgm": {"enabled": True}})[daemonset]
    (mounted,) = init_container(ds, "toolkit-validation")["volumeMounts"]
    assert mounted == {"name": volume, "mountPath": path, "mountPropagation": "HostToContainer"}
    (source,) = [v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == volume]
    kind = {"run-nvidia": "Directory", "run-nvidia-validations": "DirectoryOrCreate"}[volume]
    if daemonset == "nvidia-dcgm-exporter":
        assert source["hostPath"] == {"path": path}  # no type, as the reference's
    else:
        assert source["hostPath"] == {"path": path, "type": kind}


def test_the_validators_steps_carry_the_references_env() -> None:
    ds = _all()["nvidia-operator-validator"]
    toolkit = env_of(init_container(ds, "toolkit-validation"))
    assert toolkit["NVIDIA_VISIBLE_DEVICES"] == "all"
    driver = env_of(init_container(ds, "driver-validation"))
    assert driver["OPERATOR_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    plugin = env_of(init_container(ds, "plugin-validation"))
    assert plugin["WITH_WORKLOAD"] == "false"


def test_the_driver_container_is_not_hidden_from_the_gpus() -> None:
    """`NVIDIA_VISIBLE_DEVICES=void` (run with runc) stays on the driver manager only."""
    ds = _all()["nvidia-driver-daemonset"]
    assert "NVIDIA_VISIBLE_DEVICES" not in env_of(container(ds, "nvidia-driver-ctr"))
    assert env_of(init_container(ds, "k8s-driver-manager"))["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_the_driver_leaves_no_status_file_behind_when_it_stops() -> None:
    ds = _all()["nvidia-driver-daemonset"]
    command = container(ds, "nvidia-driver-ctr")["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    removed = command[2].split()
    assert removed[:2] == ["rm", "-f"]
    assert set(removed[2:]) == {
        "/run/nvidia/validations/.driver-ctr-ready",
        "/run/nvidia/validations/.driver-daemons-status",
    }


def test_gfd_knows_its_pod_name() -> None:
    gfd = container(_all()["gpu-feature-discovery"], "gpu-feature-discovery")
    assert env_of(gfd)["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_validator_comes_from_the_operator_image_of_the_reference_release() -> None:
    """As the reference's 26.7 chart sets it (`validator.image: gpu-operator`, version the
    chart's appVersion); the node status exporter runs from the same image."""
    sets = _all({"nodeStatusExporter": {"enabled": True}})
    validator = sets["nvidia-operator-validator"]
    assert {c["image"] for c in validator["spec"]["template"]["spec"]["initContainers"]} == {
        OPERATOR_IMAGE
    }
    assert env_of(init_container(validator, "cuda-validation"))["VALIDATOR_IMAGE"] == (
        OPERATOR_IMAGE
    )
    assert init_container(sets["gpu-feature-discovery"], "toolkit-validation")["image"] == (
        OPERATOR_IMAGE
    )
    assert container(sets["nvidia-node-status-exporter"])["image"] == OPERATOR_IMAGE


def test_dcgm_and_its_exporter_carry_no_probes_the_reference_does_not() -> None:
    sets = _all({"dcgm": {"enabled": True}})
    for name, ctr in (("nvidia-dcgm", "nvidia-dcgm-ctr"), ("nvidia-dcgm-exporter", None)):
        main = container(sets[name], ctr)
        assert "livenessProbe" not in main and "readinessProbe" not in main


def test_the_device_plugin_entrypoint_runs_under_bash() -> None:
    plugin = container(_all()["nvidia-device-plugin-daemonset"], "nvidia-device-plugin")
    assert plugin["command"] == ["/bin/bash", "-c"]


def test_the_validators_test_pods_get_the_policys_pull_policy_or_none() -> None:
    """Empty unless the policy sets one (the validator then uses its own default)."""
    steps = ("cuda-validation", "plugin-validation")
    ds = _all()["nvidia-operator-validator"]
    assert all(env_of(init_container(ds, s))["VALIDATOR_IMAGE_PULL_POLICY"] == "" for s in steps)
    ds = _all({"validator": {"imagePullPolicy": "Always"}})["nvidia-operator-validator"]
    assert all(
        env_of(init_container(ds, s))["VALIDATOR_IMAGE_PULL_POLICY"] == "Always" for s in steps
    )


def test_a_moved_host_root_reaches_every_container_of_a_pod_that_mounts_it() -> None:
    sets = _all({"hostPaths": {"rootFS": "/host-root"}})
    for name in (
        "nvidia-device-plugin-daemonset",
        "nvidia-mig-manager",
        "nvidia-operator-validator",
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
    ):
        pod_spec = sets[name]["spec"]["template"]["spec"]
        for ctr in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]:
            assert env_of(ctr).get("HOST_ROOT") == "/host-root", (name, ctr["name"])
    # A pod that does not mount the host's root is not told of it.
    gfd = sets["gpu-feature-discovery"]["spec"]["template"]["spec"]
    assert all("HOST_ROOT" not in env_of(c) for c in gfd["containers"])


def test_the_driver_firmware_is_where_the_driver_container_installs() -> None:
    """The driver container installs under /run/nvidia (its run-nvidia mount), whatever
    hostPaths.driverInstallDir says."""
    ds = _all({"hostPaths": {"driverInstallDir": "/opt/nvidia/driver"}})["nvidia-driver-daemonset"]
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["nv-firmware"]["hostPath"]["path"] == "/run/nvidia/driver/lib/firmware"


def test_the_validators_step_env_reaches_every_validation_init_container() -> None:
    step = [{"name": "FIDELITY", "value": "1"}]
    sets = _all({"validator": {"toolkit": {"env": step}, "driver": {"env": step}}})
    for name in ("gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-device-plugin-daemonset"):
        assert env_of(init_container(sets[name], "toolkit-validation"))["FIDELITY"] == "1"
    toolkit = sets["nvidia-container-toolkit-daemonset"]
    assert env_of(init_container(toolkit, "driver-validation"))["FIDELITY"] == "1"


def test_the_mps_daemon_is_told_the_mig_strategy() -> None:
    daemon = container(
        _all({"mig": {"strategy": "mixed"}})["nvidia-device-plugin-mps-control-daemon"]
    )
    assert env_of(daemon)["MIG_STRATEGY"] == "mixed"
    assert env_of(daemon)["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


def test_the_sandbox_validators_steps_know_the_default_workload() -> None:
    """A node without nvidia.com/gpu.workload.config runs the default workload; each step
    checks for it, as the reference's do."""
    spec = {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"}}
    ds = _all(spec)["nvidia-sandbox-validator"]
    for step in ds["spec"]["template"]["spec"]["initContainers"]:
        assert env_of(step)["DEFAULT_GPU_WORKLOAD_CONFIG"] == "vm-passthrough", step["name"]
