"""The node agent on simulated nodes: the product's agent (`components.nodeagent`), with a
simulated NVML made from the node's simulated hardware and a host root on disk.

Where the operator's node agent pod runs (Ready) on a simulated node, the GPU node
behaviour calls `SimulatedNodeAgents.step` for that node: it builds what NVML would
answer there (the product table's GPUs, the applied MIG layout, a compute process per GPU
pod), writes the files a real host would have under a per-node host root
(`/proc/driver/nvidia/version` once a driver is loaded, the driver container's root when
our driver pod serves it, the toolkit once its pod runs, `/proc/<pid>/cgroup` of each GPU
process), and lets the real `NodeAgent` look and publish through the API server. XIDs
are raised by the node annotation `sim.gpu-operator.io/xids` (`<gpu>:<xid>,...`), each
delivered once, as the driver would.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from components.nodeagent import (
    ClusterNodeApi,
    ComputeProcess,
    EccCounts,
    HostRoot,
    MigInstance,
    NodeAgent,
    NvmlUnavailable,
    SimulatedGpu,
    SimulatedNvml,
)
from gpusim._failing_drivers import failing_message
from gpusim._hardware import mig_profile
from gpusim._node_model import applied_layout, cuda_version
from gpusim._node_software import ANNOTATION_MIG_APPLIED, GpuWorkload, Hardware, NodeInfo
from gpusim._nodes import ANNOTATION_XIDS
from gpusim._sickness import ANNOTATION_ECC, SimulatedReset, parse_pairs
from reconciler import Client

_GIB = 1024


@dataclass(frozen=True)
class NodeFacts:
    """What the simulated node's software state is, for its agent."""

    hardware: Hardware
    driver: str | None
    """The loaded driver's version (the driver pod's or the host's), None when none."""
    driver_container: bool
    """Our driver pod serves the GPUs (and publishes its root on the host)."""
    toolkit: bool
    applied_mig: str = "all-disabled"
    xids: tuple[tuple[int, int], ...] = ()
    ecc: tuple[tuple[int, int], ...] = ()
    """(GPU index, uncorrected ECC errors since the driver loaded)."""
    workloads: Sequence[GpuWorkload] = field(default_factory=tuple)


def node_facts(
    node: NodeInfo,
    hardware: Hardware,
    *,
    driver: str | None,
    driver_container: bool,
    toolkit: bool,
    workloads: Sequence[GpuWorkload],
) -> NodeFacts:
    return NodeFacts(
        hardware=hardware,
        driver=driver,
        driver_container=driver_container,
        toolkit=toolkit,
        applied_mig=node.annotations.get(ANNOTATION_MIG_APPLIED, "all-disabled"),
        xids=parse_pairs(node.annotations.get(ANNOTATION_XIDS, "")),
        ecc=parse_pairs(node.annotations.get(ANNOTATION_ECC, "")),
        workloads=tuple(workloads),
    )


def _uuid(node: str, kind: str, index: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{kind}.{index}.{node}.gpusim"))


def _pid(workload: GpuWorkload, slot: int) -> int:
    return 10_000 + zlib.crc32(f"{workload.uid}/{slot}".encode()) % 1_000_000


def simulated_gpus(node: str, facts: NodeFacts) -> list[SimulatedGpu]:
    """The node's GPUs as NVML would list them, with a process per GPU a pod holds."""
    hw = facts.hardware
    layout = applied_layout(hw, facts.applied_mig)
    gpus: list[SimulatedGpu] = []
    ecc = dict(facts.ecc)
    for index in range(hw.gpus):
        instances: list[MigInstance] = []
        for profile, count in sorted((layout or {}).items()):
            memory = mig_profile(hw.gpu, profile).memory_mib
            for _ in range(count):
                slot = len(instances)
                instances.append(
                    MigInstance(profile, "MIG-" + _uuid(node, f"mig{index}", slot), slot, memory)
                )
        gpus.append(
            SimulatedGpu(
                uuid="GPU-" + _uuid(node, "gpu", index),
                name=hw.product.nvml_name,
                memory_mib=hw.product.memory_mib,
                mig_capable=hw.gpu.supports_mig,
                mig_enabled=layout is not None,
                mig_instances=tuple(instances),
                ecc=EccCounts(volatile_uncorrected=ecc.get(index, 0), aggregate_uncorrected=0),
            )
        )
    slots = [(w, n) for w in sorted(facts.workloads, key=lambda w: w.key) for n in range(w.gpus)]
    for position, (workload, slot) in enumerate(slots):
        if not gpus:
            break
        gpu = gpus[position % len(gpus)]
        gpu.processes = (
            *gpu.processes,
            ComputeProcess(pid=_pid(workload, slot), used_memory_mib=_GIB),
        )
    return gpus


class SimulatedNodeAgents:
    """One `NodeAgent` per simulated node whose agent pod runs, over a simulated NVML."""

    def __init__(self, client: Client, root: Path | None = None) -> None:
        self._client = client
        self._root = root
        self._owned_root = root is None
        self._agents: dict[str, NodeAgent] = {}
        self._nvml: dict[str, SimulatedNvml] = {}
        self._delivered: dict[str, set[tuple[int, int]]] = {}
        self._failing: dict[str, str] = {}

    def _host_root(self, node: str) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="gpusim-hosts-"))
        return self._root / node

    def forget(self, node: str) -> None:
        """The node or its agent pod is gone: a new pod starts with a fresh memory."""
        self._agents.pop(node, None)
        self._nvml.pop(node, None)
        self._delivered.pop(node, None)
        self._failing.pop(node, None)

    def close(self) -> None:
        if self._owned_root and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    async def step(self, node: str, facts: NodeFacts, *, failing: str | None = None) -> None:
        """`failing`: the loaded driver's version fails on this node
        (`gpusim._failing_drivers`): it is loaded, but NVML does not initialise."""
        root = self._host_root(node)
        self._write_host(root, facts)
        gpus = simulated_gpus(node, facts)
        nvml = self._nvml.get(node)
        if failing is not None:
            self._failing[node] = failing_message(failing)
        else:
            self._failing.pop(node, None)
        if facts.driver is None or failing is not None:
            self._nvml.pop(node, None)
            nvml = None
        elif nvml is None or nvml.driver_version() != facts.driver:
            nvml = SimulatedNvml(gpus, driver=facts.driver, cuda=cuda_version(facts.driver))
            self._nvml[node] = nvml
        else:
            nvml.gpus = gpus
        if nvml is not None:
            delivered = self._delivered.setdefault(node, set())
            for gpu, xid in facts.xids:
                if (gpu, xid) not in delivered and gpu < len(gpus):
                    delivered.add((gpu, xid))
                    nvml.raise_xid(gpu, xid)
        agent = self._agents.get(node)
        if agent is None:
            agent = NodeAgent(
                node,
                nvml_opener=lambda: self._open(node),
                host=HostRoot(root),
                api=ClusterNodeApi(self._client, node),
                resetter=SimulatedReset(
                    self._client, node, on_reset=lambda gpu: self._reset(node, gpu)
                ),
            )
            self._agents[node] = agent
        await agent.step()

    def _reset(self, node: str, gpu: int) -> None:
        """A reset GPU raises the same XID again when it is injected again."""
        delivered = self._delivered.get(node, set())
        delivered.difference_update({d for d in delivered if d[0] == gpu})

    def host_root(self, node: str) -> Path:
        """The node's simulated host root (its reboot sentinel, its driver root)."""
        return self._host_root(node)

    def _open(self, node: str) -> SimulatedNvml:
        nvml = self._nvml.get(node)
        if nvml is None:
            raise NvmlUnavailable(
                self._failing.get(node, "NVML did not initialise: Driver Not Loaded")
            )
        return nvml

    @staticmethod
    def _write_host(root: Path, facts: NodeFacts) -> None:
        version = root / "proc/driver/nvidia/version"
        _present(
            version,
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {facts.driver}  (simulated)\n"
            if facts.driver
            else None,
        )
        _present(
            root / "run/nvidia/driver/usr/bin/nvidia-smi", "" if facts.driver_container else None
        )
        _present(root / "run/nvidia/validations/toolkit-ready", "" if facts.toolkit else None)
        procs = root / "proc"
        wanted = {
            _pid(w, slot): f"0::/kubepods/besteffort/pod{w.uid}/simulated\n"
            for w in facts.workloads
            for slot in range(w.gpus)
        }
        for entry in procs.glob("[0-9]*"):
            if int(entry.name) not in wanted:
                shutil.rmtree(entry, ignore_errors=True)
        for pid, cgroup in wanted.items():
            _present(procs / str(pid) / "cgroup", cgroup)
        if not facts.driver_container:
            shutil.rmtree(root / "run/nvidia/driver", ignore_errors=True)


def _present(path: Path, text: str | None) -> None:
    """`path` holds `text`, or is absent when `text` is None (writes only on a change)."""
    if text is None:
        path.unlink(missing_ok=True)
        return
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
