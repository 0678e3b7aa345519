"""The ResourceSlice NVIDIA's DRA kubelet plugin (`gpu.nvidia.com`) publishes for a node,
as a pure function of the node's simulated hardware and the driver loaded on it.

The facts follow the real plugin: one pool per node, named after the node, in one slice;
a device per GPU (`gpu-<minor>`), or, on a GPU with MIG on, a device per MIG instance
(`gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`) and none for the GPU
itself. Each device carries `type` (`gpu` / `mig`), `uuid`, `productName`, `brand`,
`architecture`, `cudaComputeCapability`, `driverVersion` and `cudaDriverVersion` (versions
as semver, `595.91.07` -> `595.91.7`), `pcieBusID`, and `memory` capacity; a MIG device adds
`parentUUID`, `profile` and the memory slices it covers. The UUIDs, names and MIG
instances are the simulated NVML's (`gpusim._node_agents.simulated_gpus`), so the node
agent and the DRA plugin see the same GPUs. Not simulated: the PCIe root attribute, the
MIG engine counts (copy engines, decoders, ...), dynamic MIG and VFIO devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpusim._hardware import MIG_PROFILES, GpuProduct
from gpusim._node_agents import NodeFacts, simulated_gpus
from gpusim._node_model import cuda_version
from gpusim._node_software import Hardware

DRIVER = "gpu.nvidia.com"
"""The DRA driver name the GPU plugin publishes under (and its attribute domain)."""
RESOURCE_API = "resource.k8s.io/v1"

# NVML's GPU-instance profile ids, by (compute slices, memory slices), on GPUs cut into
# seven compute slices over eight memory slices, and on those cut into four (A30).
_GI_PROFILE_IDS_8 = {(1, 1): 19, (1, 2): 15, (2, 2): 14, (3, 4): 9, (4, 4): 5, (7, 8): 0}
_GI_PROFILE_IDS_4 = {(1, 1): 14, (2, 2): 5, (4, 4): 0}
_BDF_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass(frozen=True)
class MigPlacement:
    """Where a MIG instance sits on its GPU: NVML's GI profile id and memory slices."""

    profile: str
    profile_id: int
    start: int
    size: int


def architecture(gpu: GpuProduct) -> str:
    """NVML's architecture name (`Hopper`, `Ada Lovelace`) from the product's family."""
    return " ".join(part.capitalize() for part in gpu.family.split("-"))


def brand(product_name: str) -> str:
    """NVML's brand: datacenter GPUs report `Nvidia`, the older Tesla-named ones `Tesla`."""
    return "Tesla" if product_name.startswith("Tesla") else "Nvidia"


def semver(version: str) -> str:
    """A version as the plugin publishes it: three numeric parts, no leading zeros
    (`595.91.07` -> `595.91.7`, `9.0` -> `9.0.0`), which a `VersionValue` requires."""
    parts = [str(int(p)) for p in version.split(".") if p.isdigit()][:3]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def binary_quantity(value: int) -> str:
    """`value` bytes as the API server writes a binary quantity (`81559Mi`, `80Gi`), so
    what is published reads back unchanged."""
    suffixes = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
    power = 0
    while power + 1 < len(suffixes) and value and value % 1024 == 0:
        value //= 1024
        power += 1
    return f"{value}{suffixes[power]}"


def pcie_bus_id(index: int) -> str:
    return f"0000:{_BDF_BUSES[index % len(_BDF_BUSES)] + index // len(_BDF_BUSES):02x}:00.0"


def _memory_slices(gpu: GpuProduct) -> tuple[dict[str, int], int, dict[str, int]]:
    """Per profile: memory slices it covers; the GPU's memory slices; instances per GPU."""
    assert gpu.mig_family is not None
    profiles = MIG_PROFILES[gpu.mig_family]
    unit = min(p.memory_mib for p in profiles)
    sizes = {p.name: max(1, round(p.memory_mib / unit)) for p in profiles}
    total = max(sizes.values())
    return sizes, total, {p.name: p.per_gpu for p in profiles}


def mig_placements(gpu: GpuProduct, layout: Mapping[str, int]) -> list[MigPlacement]:
    """Where a MIG layout's instances sit, in the order `simulated_gpus` lists them
    (profiles sorted by name): each placement starts at a multiple of its size, as NVML's
    possible placements do, and no two overlap. Raises ValueError for a layout that does
    not fit (the MIG manager never applies one)."""
    sizes, total, per_gpu = _memory_slices(gpu)
    ids = _GI_PROFILE_IDS_8 if total == 8 else _GI_PROFILE_IDS_4
    wanted = [name for name, count in sorted(layout.items()) for _ in range(count)]
    # Largest first fits best; the answer is put back in `wanted`'s order.
    order = sorted(range(len(wanted)), key=lambda i: -sizes[wanted[i]])
    starts: dict[int, int] = {}
    used = [False] * total

    def place(k: int) -> bool:
        if k == len(order):
            return True
        name = wanted[order[k]]
        size = sizes[name]
        for slot in range(per_gpu[name]):
            start = slot * size
            if start + size > total or any(used[start : start + size]):
                continue
            used[start : start + size] = [True] * size
            starts[order[k]] = start
            if place(k + 1):
                return True
            used[start : start + size] = [False] * size
        return False

    if not place(0):
        raise ValueError(f"MIG layout {dict(layout)} does not fit on {gpu.name}")
    out = []
    for i, name in enumerate(wanted):
        slices = int(name.split("g.", 1)[0])
        out.append(MigPlacement(name, ids[(slices, sizes[name])], starts[i], sizes[name]))
    return out


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def _version(value: str) -> dict[str, str]:
    return {"version": semver(value)}


def slice_devices(node: str, facts: NodeFacts) -> list[dict[str, Any]]:
    """The devices the plugin publishes for the node, sorted by name as it sorts them."""
    if facts.driver is None:
        return []
    hardware: Hardware = facts.hardware
    gpu = hardware.gpu
    common = {
        "brand": _string(brand(hardware.product.name)),
        "architecture": _string(architecture(hardware.product)),
        "cudaComputeCapability": _version("{}.{}".format(*hardware.product.compute)),
        "driverVersion": _version(facts.driver),
        "cudaDriverVersion": _version(cuda_version(facts.driver)),
    }
    devices: list[dict[str, Any]] = []
    for minor, simulated in enumerate(simulated_gpus(node, facts)):
        bus = pcie_bus_id(minor)
        product = {"productName": _string(simulated.name)}
        if not simulated.mig_enabled:
            devices.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": {
                        "type": _string("gpu"),
                        "uuid": _string(simulated.uuid),
                        **product,
                        **common,
                        "pcieBusID": _string(bus),
                    },
                    "capacity": {
                        "memory": {"value": binary_quantity(simulated.memory_mib * 1024 * 1024)}
                    },
                }
            )
            continue
        layout: dict[str, int] = {}
        for instance in simulated.mig_instances:
            layout[instance.profile] = layout.get(instance.profile, 0) + 1
        placements = mig_placements(gpu, layout)
        for instance, placement in zip(simulated.mig_instances, placements, strict=True):
            capacity: dict[str, Any] = {
                "memory": {"value": binary_quantity(instance.memory_mib * 1024 * 1024)}
            }
            for memory_slice in range(placement.start, placement.start + placement.size):
                capacity[f"memorySlice{memory_slice}"] = {"value": "1"}
            devices.append(
                {
                    "name": (
                        f"gpu-{minor}-mig-{placement.profile_id}-{placement.start}-{placement.size}"
                    ),
                    "attributes": {
                        "type": _string("mig"),
                        "uuid": _string(instance.uuid),
                        "parentUUID": _string(simulated.uuid),
                        "profile": _string(instance.profile),
                        **product,
                        **common,
                        "pcieBusID": _string(bus),
                    },
                    "capacity": capacity,
                }
            )
    return sorted(devices, key=lambda d: str(d["name"]))


def slice_spec(
    node: str, devices: Sequence[Mapping[str, Any]], generation: int = 1
) -> dict[str, Any]:
    """The slice's spec: the node's pool (named after it), one slice, these devices."""
    return {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "devices": [dict(d) for d in devices],
    }


def resource_slice(
    node: str, node_uid: str, devices: Sequence[Mapping[str, Any]], generation: int = 1
) -> dict[str, Any]:
    """A new ResourceSlice for the node: named `<node>-gpu.nvidia.com-<random>` by the API
    server and owned by the Node, as the plugin's kubelet helper writes it (the garbage
    collector removes it with the node)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{node}-{DRIVER}-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}
            ],
        },
        "spec": slice_spec(node, devices, generation),
    }
