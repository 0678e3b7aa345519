"""The ResourceSlice the simulated DRA kubelet plugin publishes: a device per GPU with the
attributes the real plugin publishes, per MIG instance on a GPU in MIG mode (named by NVML's
profile id and placement), nothing without a driver, and the same GPUs the node agent's
simulated NVML lists."""

from __future__ import annotations

from typing import Any

import pytest

from gpusim._dra import loaded_driver
from gpusim._dra_slice import (
    binary_quantity,
    mig_placements,
    resource_slice,
    semver,
    slice_devices,
)
from gpusim._hardware import PRODUCTS
from gpusim._node_agents import NodeFacts, simulated_gpus
from gpusim._node_software import Hardware, NodeSoftware, PodInfo

pytestmark = pytest.mark.unit


def _facts(
    product: str, gpus: int = 2, *, mig: str = "all-disabled", driver: str | None = "595.91.07"
) -> NodeFacts:
    hardware = Hardware(gpus=gpus, product=PRODUCTS[product], mig_capable=mig != "all-disabled")
    return NodeFacts(
        hardware=hardware, driver=driver, driver_container=False, toolkit=False, applied_mig=mig
    )


def _attributes(device: dict[str, Any]) -> dict[str, str]:
    return {k: str(next(iter(v.values()))) for k, v in device["attributes"].items()}


@pytest.mark.parametrize(
    ("product", "name", "architecture", "compute", "memory"),
    [
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi"),
        ("NVIDIA-H200", "NVIDIA H200", "Hopper", "9.0.0", "143771Mi"),
        ("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40Gi"),
        ("NVIDIA-L40S", "NVIDIA L40S", "Ada Lovelace", "8.9.0", "46068Mi"),
        ("Tesla-T4", "Tesla T4", "Turing", "7.5.0", "15Gi"),
    ],
)
def test_a_device_per_gpu_with_the_products_attributes(
    product: str, name: str, architecture: str, compute: str, memory: str
) -> None:
    devices = slice_devices("node-a", _facts(product))
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    attributes = _attributes(devices[0])
    assert attributes["type"] == "gpu"
    assert attributes["productName"] == name
    assert attributes["architecture"] == architecture
    assert attributes["cudaComputeCapability"] == compute
    assert attributes["driverVersion"] == "595.91.7"
    assert attributes["cudaDriverVersion"] == "13.1.0"
    assert attributes["brand"] == ("Tesla" if name.startswith("Tesla") else "Nvidia")
    assert devices[0]["capacity"] == {"memory": {"value": memory}}
    assert attributes["pcieBusID"] != _attributes(devices[1])["pcieBusID"]


def test_the_uuids_are_the_simulated_nvmls() -> None:
    facts = _facts("NVIDIA-H100-80GB-HBM3")
    published = [_attributes(d)["uuid"] for d in slice_devices("node-a", facts)]
    assert published == [gpu.uuid for gpu in simulated_gpus("node-a", facts)]
    assert published != [_attributes(d)["uuid"] for d in slice_devices("node-b", facts)]


def test_no_devices_without_a_driver() -> None:
    assert slice_devices("node-a", _facts("NVIDIA-L4", driver=None)) == []


def test_a_gpu_in_mig_mode_publishes_its_instances_and_not_itself() -> None:
    facts = _facts("NVIDIA-H100-80GB-HBM3", gpus=1, mig="all-balanced")
    devices = slice_devices("node-a", facts)
    by_profile = sorted((_attributes(d)["profile"], d["name"]) for d in devices)
    # NVML's profile ids: 1g.10gb 19, 2g.20gb 14, 3g.40gb 9; placements never overlap.
    assert [profile for profile, _ in by_profile] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert all(
        name.startswith(("gpu-0-mig-19-", "gpu-0-mig-14-", "gpu-0-mig-9-"))
        for _, name in by_profile
    )
    (gpu,) = simulated_gpus("node-a", facts)
    for device in devices:
        attributes = _attributes(device)
        assert attributes["type"] == "mig"
        assert attributes["parentUUID"] == gpu.uuid
        assert attributes["uuid"].startswith("MIG-")
        assert attributes["productName"] == "NVIDIA H100 80GB HBM3"
    slices = [{k for k in d["capacity"] if k.startswith("memorySlice")} for d in devices]
    covered = [s for found in slices for s in found]
    assert len(covered) == len(set(covered)), "two MIG instances on one memory slice"
    three_g = next(d for d in devices if _attributes(d)["profile"] == "3g.40gb")
    assert three_g["capacity"]["memory"] == {"value": "40Gi"}
    assert len([k for k in three_g["capacity"] if k.startswith("memorySlice")]) == 4


def test_a_whole_gpu_of_one_profile_fills_every_placement() -> None:
    placements = mig_placements(PRODUCTS["NVIDIA-A100-SXM4-40GB"], {"1g.5gb": 7})
    assert [(p.profile_id, p.start, p.size) for p in placements] == [
        (19, start, 1) for start in range(7)
    ]
    (whole,) = mig_placements(PRODUCTS["NVIDIA-A100-SXM4-40GB"], {"7g.40gb": 1})
    assert (whole.profile_id, whole.start, whole.size) == (0, 0, 8)
    a30 = mig_placements(PRODUCTS["NVIDIA-A30"], {"2g.12gb": 2})
    assert [(p.profile_id, p.start, p.size) for p in a30] == [(5, 0, 2), (5, 2, 2)]


def test_a_layout_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        mig_placements(PRODUCTS["NVIDIA-H100-80GB-HBM3"], {"3g.40gb": 2, "1g.10gb": 1})


def test_versions_and_quantities_read_back_as_the_api_server_writes_them() -> None:
    assert semver("580.95.05") == "580.95.5"
    assert semver("12.8") == "12.8.0"
    assert binary_quantity(80 * 1024**3) == "80Gi"
    assert binary_quantity(81559 * 1024**2) == "81559Mi"
    assert binary_quantity(1000) == "1000"


def test_the_slice_is_the_nodes_pool_owned_by_the_node() -> None:
    devices = slice_devices("node-a", _facts("NVIDIA-L4", gpus=1))
    obj = resource_slice("node-a", "uid-1", devices)
    assert obj["metadata"]["generateName"] == "node-a-gpu.nvidia.com-"
    assert obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-1"}
    ]
    assert obj["spec"]["driver"] == "gpu.nvidia.com"
    assert obj["spec"]["nodeName"] == "node-a"
    assert obj["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}


def test_the_driver_is_the_hosts_else_a_ready_driver_pods() -> None:
    def driver_pod(ready: bool) -> PodInfo:
        return PodInfo(
            key="ns/driver",
            node="node-a",
            software=NodeSoftware.DRIVER,
            ready=ready,
            image="nvcr.io/nvidia/driver:580.95.05-ubuntu22.04",
        )

    assert loaded_driver("570.1.2", [driver_pod(True)]) == "570.1.2"
    assert loaded_driver("", [driver_pod(True)]) == "580.95.05"
    assert loaded_driver("", [driver_pod(False)]) is None
    assert loaded_driver("", []) is None
