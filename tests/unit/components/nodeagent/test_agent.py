"""The node agent's decisions on the simulated NVML backend and a host root on disk: what
a user reads on the Node (conditions, the GPU process list) for each situation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.api import GPU_PROCESSES_ANNOTATION, gpu_processes
from components.nodeagent import (
    ComputeProcess,
    EccCounts,
    HostRoot,
    MigInstance,
    NodeAgent,
    NvmlUnavailable,
    SimulatedGpu,
    SimulatedNvml,
    condition_patch,
    process_list,
    verdicts,
)
from components.nodeagent._agent import GpuProcess, advertised_resources

pytestmark = pytest.mark.unit

POD_UID = "0b6d4a4e-8a3b-4f7e-9a55-2f9c1d3e4b5a"


def host(
    tmp_path: Path,
    *,
    module: str | None = "550.54.15",
    container: bool = False,
    toolkit: bool = True,
) -> HostRoot:
    if module is not None:
        version = tmp_path / "proc/driver/nvidia/version"
        version.parent.mkdir(parents=True)
        version.write_text(
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {module}  Tue Mar  5 2024\n"
        )
    if container:
        (tmp_path / "run/nvidia/driver/usr/bin").mkdir(parents=True)
    if toolkit:
        marker = tmp_path / "usr/local/nvidia/toolkit/nvidia-container-runtime"
        marker.parent.mkdir(parents=True)
        marker.write_text("")
    return HostRoot(tmp_path)


def gpus(count: int = 2, **kwargs: Any) -> list[SimulatedGpu]:
    return [
        SimulatedGpu(uuid=f"GPU-{i:04d}", name="NVIDIA H100 80GB HBM3", memory_mib=81559, **kwargs)
        for i in range(count)
    ]


def node(advertised: int = 2, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "gpu-0", "labels": labels or {}},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(advertised)}},
    }


def agent(nvml: SimulatedNvml | None, root: HostRoot) -> NodeAgent:
    def opener() -> SimulatedNvml:
        if nvml is None:
            raise NvmlUnavailable("NVML did not initialise: Driver Not Loaded")
        return nvml

    return NodeAgent("gpu-0", nvml_opener=opener, host=root, api=None)  # type: ignore[arg-type]


def by_type(obs: Any) -> dict[str, Any]:
    return {v.type: v for v in verdicts(obs)}


def test_a_driver_container_serves_healthy_validated_gpus(tmp_path: Path) -> None:
    a = agent(SimulatedNvml(gpus(), driver="580.95.05"), host(tmp_path, container=True))
    found = by_type(a.observe(node(2)))
    assert (found["GPUDriverReady"].status, found["GPUDriverReady"].reason) == (
        "True",
        "DriverContainer",
    )
    assert "580.95.05" in found["GPUDriverReady"].message
    assert found["GPUHealthy"].status == "True"
    assert (found["GPUValidated"].status, found["GPUValidated"].reason) == ("True", "Validated")


def test_a_host_installed_driver_is_named_with_its_version(tmp_path: Path) -> None:
    a = agent(SimulatedNvml(gpus(), driver="550.54.15"), host(tmp_path, container=False))
    ready = by_type(a.observe(node(2)))["GPUDriverReady"]
    assert (ready.status, ready.reason) == ("True", "HostDriver")
    assert "gpu-0" in ready.message and "550.54.15" in ready.message


def test_no_driver_is_not_ready_and_health_unknown(tmp_path: Path) -> None:
    a = agent(None, host(tmp_path, module=None))
    found = by_type(a.observe(node(0)))
    assert (found["GPUDriverReady"].status, found["GPUDriverReady"].reason) == (
        "False",
        "DriverNotLoaded",
    )
    assert "Driver Not Loaded" in found["GPUDriverReady"].message
    assert found["GPUHealthy"].status == "Unknown"
    assert (found["GPUValidated"].status, found["GPUValidated"].reason) == (
        "False",
        "DriverUnusable",
    )


def test_a_critical_xid_makes_the_node_unhealthy_and_stays(tmp_path: Path) -> None:
    nvml = SimulatedNvml(gpus(), driver="580.95.05")
    a = agent(nvml, host(tmp_path, container=True))
    nvml.raise_xid(1, 79)
    healthy = by_type(a.observe(node(2)))["GPUHealthy"]
    assert (healthy.status, healthy.reason) == ("False", "XID")
    assert healthy.message == "GPU 1 (GPU-0001) raised XID 79 (GPU has fallen off the bus)"
    # The event is consumed once; the GPU stays unhealthy until the agent restarts with it.
    assert by_type(a.observe(node(2)))["GPUHealthy"].status == "False"


def test_an_application_xid_is_not_the_gpus_fault(tmp_path: Path) -> None:
    nvml = SimulatedNvml(gpus(), driver="580.95.05")
    a = agent(nvml, host(tmp_path, container=True))
    nvml.raise_xid(0, 43)
    assert by_type(a.observe(node(2)))["GPUHealthy"].status == "True"


@pytest.mark.parametrize(
    ("ecc", "words"),
    [
        (EccCounts(volatile_uncorrected=2), "2 uncorrected ECC errors"),
        (EccCounts(retirement_pending=True), "waiting to be retired"),
        (EccCounts(retired_pages_single_bit=50, retired_pages_double_bit=10), "retired 60"),
    ],
)
def test_ecc_thresholds(tmp_path: Path, ecc: EccCounts, words: str) -> None:
    gpu = gpus(1)[0]
    gpu.ecc = ecc
    a = agent(SimulatedNvml([gpu], driver="580.95.05"), host(tmp_path, container=True))
    healthy = by_type(a.observe(node(1)))["GPUHealthy"]
    assert (healthy.status, healthy.reason) == ("False", "ECCThreshold")
    assert words in healthy.message


def test_retired_pages_below_the_limit_are_healthy(tmp_path: Path) -> None:
    gpu = gpus(1)[0]
    gpu.ecc = EccCounts(volatile_uncorrected=0, retired_pages_single_bit=59)
    a = agent(SimulatedNvml([gpu], driver="580.95.05"), host(tmp_path, container=True))
    assert by_type(a.observe(node(1)))["GPUHealthy"].status == "True"


def test_validation_fails_without_the_toolkit(tmp_path: Path) -> None:
    a = agent(SimulatedNvml(gpus(), driver="580.95.05"), host(tmp_path, toolkit=False))
    validated = by_type(a.observe(node(2)))["GPUValidated"]
    assert (validated.status, validated.reason) == ("False", "ToolkitMissing")


def test_validation_compares_the_device_plugin_with_nvml(tmp_path: Path) -> None:
    a = agent(SimulatedNvml(gpus(2), driver="580.95.05"), host(tmp_path, container=True))
    validated = by_type(a.observe(node(1)))["GPUValidated"]
    assert (validated.status, validated.reason) == ("False", "DevicePluginMismatch")
    assert "advertises 1 GPU resources where NVML sees 2" in validated.message
    # Time-slicing: two replicas per GPU are what GFD labels and the plugin advertises.
    replicated = node(4, {"nvidia.com/gpu.replicas": "2"})
    assert by_type(a.observe(replicated))["GPUValidated"].status == "True"


def test_mig_devices_are_what_the_device_plugin_must_advertise(tmp_path: Path) -> None:
    seven = tuple(MigInstance("1g.10gb", f"MIG-{i}", i, 9856) for i in range(7))
    mig = gpus(1, mig_capable=True, mig_enabled=True, mig_instances=seven)
    a = agent(SimulatedNvml(mig, driver="580.95.05"), host(tmp_path, container=True))
    mixed = {
        "metadata": {"name": "gpu-0"},
        "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}},
    }
    assert by_type(a.observe(mixed))["GPUValidated"].status == "True"
    assert by_type(a.observe(node(1)))["GPUValidated"].status == "False"


def test_the_agent_lets_go_of_the_gpu_while_the_upgrade_restarts_the_driver(
    tmp_path: Path,
) -> None:
    nvml = SimulatedNvml(gpus(), driver="580.95.05")
    a = agent(nvml, host(tmp_path, container=True))
    a.observe(node(2))
    assert a.nvml is nvml
    restarting = node(2, {"nvidia.com/gpu-driver-upgrade-state": "pod-restart-required"})
    found = by_type(a.observe(restarting))
    assert a.nvml is None
    assert found["GPUValidated"].reason == "DriverRestarting"
    validating = node(2, {"nvidia.com/gpu-driver-upgrade-state": "validation-required"})
    assert by_type(a.observe(validating))["GPUValidated"].status == "True"


def test_a_gpu_process_is_traced_to_its_pod_by_cgroup(tmp_path: Path) -> None:
    root = host(tmp_path, container=True)
    for pid, cgroup in [
        (
            4242,
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            + POD_UID.replace("-", "_")
            + ".slice/cri-containerd-abc.scope\n",
        ),
        (5151, f"12:memory:/kubepods/besteffort/pod{POD_UID}/0123abcd\n"),
        (6000, "0::/system.slice/sshd.service\n"),
    ]:
        path = tmp_path / "proc" / str(pid) / "cgroup"
        path.parent.mkdir(parents=True)
        path.write_text(cgroup)
    assert root.pod_uid_of(4242) == POD_UID
    assert root.pod_uid_of(5151) == POD_UID
    assert root.pod_uid_of(6000) is None
    assert root.pod_uid_of(7777) is None  # exited


def test_the_process_list_annotation() -> None:
    assert process_list([]) is None
    text = process_list(
        [
            GpuProcess("GPU-1", 1, 20, None, POD_UID, "ml/train-0"),
            GpuProcess("GPU-0", 0, 30, "MIG-3", "", ""),
        ]
    )
    assert text == (
        '[{"gpu":"GPU-0","index":0,"pid":30,"mig":"MIG-3","podUID":"","pod":""},'
        f'{{"gpu":"GPU-1","index":1,"pid":20,"mig":null,"podUID":"{POD_UID}","pod":"ml/train-0"}}]'
    )


def test_conditions_are_written_only_when_they_change(tmp_path: Path) -> None:
    a = agent(SimulatedNvml(gpus(), driver="580.95.05"), host(tmp_path, container=True))
    wanted = verdicts(a.observe(node(2)))
    first = condition_patch([], wanted, "2026-01-01T00:00:00Z")
    assert [c["type"] for c in first] == ["GPUDriverReady", "GPUHealthy", "GPUValidated"]
    assert condition_patch(first, wanted, "2026-01-01T00:01:00Z") == []
    # A new message with the same status keeps the transition time.
    moved = condition_patch(first, verdicts(a.observe(node(1))), "2026-01-01T00:02:00Z")
    assert [(c["type"], c["lastTransitionTime"]) for c in moved] == [
        ("GPUValidated", "2026-01-01T00:02:00Z")
    ]


def test_only_gpu_resources_count_as_advertised() -> None:
    assert (
        advertised_resources(
            {
                "status": {
                    "allocatable": {
                        "cpu": "8",
                        "nvidia.com/gpu": "2",
                        "nvidia.com/mig-1g.10gb": "3",
                    }
                }
            }
        )
        == 5
    )
    assert advertised_resources({}) == 0


def test_the_simulated_backend_reports_processes_and_memory() -> None:
    gpu = gpus(1, processes=(ComputeProcess(pid=11, used_memory_mib=1024),))[0]
    reading = SimulatedNvml([gpu], driver="580.95.05").read_gpu(0)
    assert reading.processes[0].pid == 11
    assert reading.memory_used_mib == 1024
    assert reading.mig_current is None  # not MIG-capable


def test_the_operator_reads_back_what_the_agent_publishes() -> None:
    text = process_list(
        [
            GpuProcess("GPU-0", 0, 30, "MIG-3", POD_UID, "ml/train-0"),
            GpuProcess("GPU-1", 1, 40, None, "", ""),
        ]
    )
    assert text is not None
    entries = gpu_processes({GPU_PROCESSES_ANNOTATION: text})
    assert [(e.gpu, e.pid, e.mig, e.pod_key) for e in entries] == [
        ("GPU-0", 30, "MIG-3", ("ml", "train-0")),
        ("GPU-1", 40, None, None),
    ]
    assert gpu_processes({}) == []
    assert gpu_processes({GPU_PROCESSES_ANNOTATION: "not json"}) == []


def test_a_driver_container_elsewhere_is_found_where_the_policy_installs_it(
    tmp_path: Path,
) -> None:
    host(tmp_path, container=False)
    (tmp_path / "opt/nvidia/driver/usr/bin").mkdir(parents=True)
    moved = HostRoot(tmp_path, "/opt/nvidia/driver")
    a = agent(SimulatedNvml(gpus(), driver="580.95.05"), moved)
    assert by_type(a.observe(node(2)))["GPUDriverReady"].reason == "DriverContainer"
    # The default place, empty here, would have taken it for a host driver.
    b = agent(SimulatedNvml(gpus(), driver="580.95.05"), HostRoot(tmp_path))
    assert by_type(b.observe(node(2)))["GPUDriverReady"].reason == "HostDriver"
