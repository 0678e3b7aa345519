"""The simulated NVML and host root the simulated cluster gives the product's node agent:
the GPUs are the product table's, MIG devices the applied layout's, each GPU pod a
compute process traced back to it, and the agent's verdicts follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.api import GPU_PROCESSES_ANNOTATION, gpu_processes
from components.nodeagent import HostRoot, NodeAgent, SimulatedNvml, verdicts
from gpusim._hardware import PRODUCTS
from gpusim._node_agents import (
    NodeFacts,
    SimulatedNodeAgents,
    simulated_gpus,
)
from gpusim._node_software import (
    GpuWorkload,
    Hardware,
    gpu_workload,
    gpu_workload_node,
    trim_pod,
)
from gpusim._sickness import parse_pairs

pytestmark = pytest.mark.unit

H100 = Hardware(gpus=2, product=PRODUCTS["NVIDIA-H100-80GB-HBM3"], mig_capable=True)
TRAIN = GpuWorkload(key="ml/train", uid="0b6d4a4e-8a3b-4f7e-9a55-2f9c1d3e4b5a", node="n1", gpus=3)


def facts(**kw: Any) -> NodeFacts:
    base: dict[str, Any] = {
        "hardware": H100,
        "driver": "595.91.07",
        "driver_container": True,
        "toolkit": True,
    }
    base.update(kw)
    return NodeFacts(**base)


def test_the_gpus_are_the_product_tables() -> None:
    gpus = simulated_gpus("n1", facts())
    assert [g.name for g in gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert gpus[0].memory_mib == 81559 and gpus[0].mig_capable and not gpus[0].mig_enabled
    assert len({g.uuid for g in gpus}) == 2
    assert simulated_gpus("n1", facts())[0].uuid == gpus[0].uuid  # stable per node


def test_mig_devices_follow_the_applied_layout() -> None:
    gpus = simulated_gpus("n1", facts(applied_mig="all-1g.10gb"))
    assert all(g.mig_enabled for g in gpus)
    assert [len(g.mig_instances) for g in gpus] == [7, 7]
    assert {i.profile for i in gpus[0].mig_instances} == {"1g.10gb"}


def test_each_gpu_a_pod_holds_runs_one_of_its_processes() -> None:
    gpus = simulated_gpus("n1", facts(workloads=(TRAIN,)))
    assert [len(g.processes) for g in gpus] == [2, 1]


def test_xids_from_the_annotation() -> None:
    assert parse_pairs("1:79, 0:48,bad,2:") == ((1, 79), (0, 48))


def test_gpu_workload_pods_survive_the_cache_trim() -> None:
    pod = {
        "metadata": {"name": "train", "namespace": "ml", "uid": TRAIN.uid},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    assert gpu_workload(trim_pod(pod)) == TRAIN
    assert gpu_workload({**pod, "status": {"phase": "Pending"}}) is None


def test_a_pod_seeing_the_gpus_through_its_environment_runs_a_process() -> None:
    # NVIDIA_VISIBLE_DEVICES=all without a device-plugin request: the runtime still hands
    # it every GPU, so it holds them (the MIG manager waits) and NVML lists its process.
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    pod = {
        "metadata": {"name": "smi", "namespace": "ml", "uid": "uid-smi"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "env": env}]},
        "status": {"phase": "Running"},
    }
    assert gpu_workload_node(pod) == gpu_workload_node(trim_pod(pod)) == "n1"
    workload = gpu_workload(pod)
    assert workload is not None and workload.gpus == 1
    assert gpu_workload(trim_pod(pod)) == workload
    gpus = simulated_gpus("n1", facts(workloads=(workload,)))
    assert sum(len(g.processes) for g in gpus) == 1
    for value in ("void", "none", ""):
        quiet = {
            **pod,
            "spec": {
                **pod["spec"],
                "containers": [
                    {"name": "c", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]}
                ],
            },
        }
        assert gpu_workload_node(quiet) is None and gpu_workload(quiet) is None


@pytest.mark.parametrize(
    ("driver_container", "reason"), [(True, "DriverContainer"), (False, "HostDriver")]
)
def test_the_agent_tells_a_host_driver_from_ours(
    tmp_path: Path, driver_container: bool, reason: str
) -> None:
    f = facts(driver_container=driver_container, workloads=(TRAIN,))
    SimulatedNodeAgents._write_host(tmp_path, f)
    nvml = SimulatedNvml(simulated_gpus("n1", f), driver="595.91.07")
    agent = NodeAgent("n1", nvml_opener=lambda: nvml, host=HostRoot(tmp_path), api=None)  # type: ignore[arg-type]
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}}
    found = {v.type: v for v in verdicts(agent.observe(node))}
    assert found["GPUDriverReady"].reason == reason
    assert found["GPUValidated"].status == "True"
    pids = [p.pid for g in nvml.gpus for p in g.processes]
    assert {HostRoot(tmp_path).pod_uid_of(pid) for pid in pids} == {TRAIN.uid}


SMI_UID = "5f0c2a8e-1d2b-4c3d-8e9f-0a1b2c3d4e5f"


class _PodsApi:
    """The agent's API on one node: the node, its pods, and what it writes."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.annotations: dict[str, str] = {}
        self.labels: dict[str, str] = {}

    async def read_node(self) -> dict[str, Any]:
        return {
            "metadata": {
                "name": "n1",
                "annotations": dict(self.annotations),
                "labels": dict(self.labels),
            },
            "status": {"allocatable": {"nvidia.com/gpu": "2"}},
        }

    async def pods_on_node(self) -> list[dict[str, Any]]:
        return self.pods

    async def patch_status(self, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def patch_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        self.annotations.update(body["metadata"]["annotations"])
        return {}


async def test_the_agents_list_names_a_pod_using_a_gpu_without_requesting_one(
    tmp_path: Path,
) -> None:
    # The upgrade walk cites such a pod while the driver waits for the GPU to be let go.
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    smi = {
        "metadata": {"name": "smi", "namespace": "ml", "uid": SMI_UID},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "env": env}]},
        "status": {"phase": "Running"},
    }
    train = {
        "metadata": {"name": "train", "namespace": "ml", "uid": TRAIN.uid},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    sneaky = gpu_workload(smi)
    assert sneaky is not None
    f = facts(workloads=(TRAIN, sneaky))
    SimulatedNodeAgents._write_host(tmp_path, f)
    nvml = SimulatedNvml(simulated_gpus("n1", f), driver="595.91.07")
    api = _PodsApi([smi, train])
    agent = NodeAgent("n1", nvml_opener=lambda: nvml, host=HostRoot(tmp_path), api=api)
    await agent.step()
    entries = gpu_processes(api.annotations)
    assert {(e.pod, e.unrequested) for e in entries} == {("ml/smi", True), ("ml/train", False)}
    assert '"unrequested":true' in api.annotations[GPU_PROCESSES_ANNOTATION]

    # While the walk clears the node the agent lets NVML go and sees no process: the list
    # it published stays, so the walk can still name what holds the GPU.
    listed = api.annotations[GPU_PROCESSES_ANNOTATION]
    api.labels["nvidia.com/gpu-driver-upgrade-state"] = "pod-deletion-required"
    await agent.step()
    assert api.annotations[GPU_PROCESSES_ANNOTATION] == listed
