"""NVML, the one place the node agent reads a GPU: the interface and its two backends.

`Nvml` is what the agent needs of a GPU and nothing more, read-only: the inventory, MIG
mode and instances, the compute processes, ECC counters and retired pages, XID events,
PCIe link, temperature and power. Two backends answer it:

* `PynvmlBackend`, on NVIDIA's `pynvml` (the `nvidia-ml-py` package). `open_nvml` loads
  `libnvidia-ml.so` only when called, so importing this module costs nothing on a machine
  without a GPU, and a missing library or driver is one `NvmlUnavailable` with the reason.
* `SimulatedNvml`, the same interface over plain data (`SimulatedGpu`): the simulated
  cluster builds that data from its own product tables (`gpusim`) and injects it, so the
  agent's logic runs unchanged on simulated nodes; the product never invents hardware.

No other module calls NVML. Every reading is a frozen dataclass, so the agent's decisions
are pure functions of them. A value the GPU does not support (ECC on a consumer GPU, MIG
on an L4, retired pages on a GPU that remaps rows) reads as `None`, never as zero.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

_MIB = 1024 * 1024


class NvmlUnavailable(Exception):
    """NVML cannot answer: no library, no driver loaded, or no permission (one sentence)."""


@dataclass(frozen=True)
class MigInstance:
    """One MIG device of a GPU: its profile (`1g.10gb`) and UUID."""

    profile: str
    uuid: str
    gpu_instance_id: int
    memory_mib: int


@dataclass(frozen=True)
class ComputeProcess:
    """A process using a GPU for compute, by its PID in the host's PID namespace."""

    pid: int
    used_memory_mib: int | None = None
    mig_uuid: str | None = None
    """The MIG device it runs on, when the GPU is in MIG mode."""


@dataclass(frozen=True)
class EccCounts:
    """Uncorrected ECC errors since the driver loaded (volatile) and over the GPU's life
    (aggregate), and the pages the GPU retired; `None` where the GPU does not count it."""

    volatile_uncorrected: int | None = None
    aggregate_uncorrected: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retirement_pending: bool | None = None


@dataclass(frozen=True)
class GpuReading:
    """Everything the agent reads of one GPU at one moment."""

    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int | None = None
    mig_current: bool | None = None
    """MIG mode now; `None` on a GPU without MIG."""
    mig_pending: bool | None = None
    """MIG mode after the next GPU reset (differs from `mig_current` while a change waits)."""
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[ComputeProcess, ...] = ()
    ecc: EccCounts = field(default_factory=EccCounts)
    pcie_generation: int | None = None
    pcie_width: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None


@dataclass(frozen=True)
class XidEvent:
    """An XID (a driver-reported GPU error) raised by the GPU `gpu_uuid`."""

    gpu_uuid: str
    xid: int


class Nvml(Protocol):
    """What the node agent reads of the GPUs (read-only: nothing here changes a GPU)."""

    def driver_version(self) -> str: ...

    def cuda_driver_version(self) -> str:
        """The CUDA version the driver supports, `major.minor`."""
        ...

    def device_count(self) -> int: ...

    def read_gpu(self, index: int) -> GpuReading: ...

    def wait_xids(self, timeout_s: float) -> list[XidEvent]:
        """The XIDs raised since the last call; waits up to `timeout_s` for the first one
        (0: return at once). Blocks: call it off the event loop."""
        ...

    def close(self) -> None: ...


def cuda_version_text(version: int) -> str:
    """NVML's integer CUDA version (12080) as `12.8`."""
    return f"{version // 1000}.{version % 1000 // 10}"


# -- the real backend ------------------------------------------------------------------------


LIBRARY = "libnvidia-ml.so.1"
LIBRARY_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
)


def find_library(roots: Sequence[str]) -> str | None:
    """The first `libnvidia-ml.so.1` under one of `roots` (a driver's root: the driver
    container's on the host, or the host's own), None when none has it."""
    for root in roots:
        for directory in LIBRARY_DIRS:
            path = os.path.join(root, directory, LIBRARY)
            if os.path.exists(path):
                return path
    return None


def open_nvml(library_roots: Sequence[str] = ()) -> PynvmlBackend:
    """Initialise NVML on this machine (`NvmlUnavailable` with the reason if it cannot).

    `library_roots`: driver roots to load `libnvidia-ml.so.1` from, in order, before the
    loader's own search (the agent's image has no NVIDIA library: it takes the driver's,
    whoever installed it). pynvml then finds the loaded library by its soname."""
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise NvmlUnavailable(f"the pynvml module is not installed ({exc})") from None
    path = find_library(library_roots)
    if path is not None:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise NvmlUnavailable(f"{path} did not load: {exc}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML did not initialise: {exc}") from None
    return PynvmlBackend(pynvml)


class PynvmlBackend:
    """`Nvml` on NVIDIA's pynvml. Made by `open_nvml`; `close` shuts NVML down."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._events: Any = None

    def _optional(self, call: Callable[..., T], *args: Any) -> T | None:
        """`call(*args)`, or None when the GPU does not support or allow it."""
        try:
            return call(*args)
        except self._nvml.NVMLError:
            return None

    def driver_version(self) -> str:
        return _text(self._nvml.nvmlSystemGetDriverVersion())

    def cuda_driver_version(self) -> str:
        return cuda_version_text(int(self._nvml.nvmlSystemGetCudaDriverVersion()))

    def device_count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def read_gpu(self, index: int) -> GpuReading:
        n = self._nvml
        handle = n.nvmlDeviceGetHandleByIndex(index)
        memory = n.nvmlDeviceGetMemoryInfo(handle)
        mig = self._optional(n.nvmlDeviceGetMigMode, handle)
        current = bool(mig[0]) if mig is not None else None
        instances = self._mig_instances(handle) if current else ()
        power = self._optional(n.nvmlDeviceGetPowerUsage, handle)
        return GpuReading(
            index=index,
            uuid=_text(n.nvmlDeviceGetUUID(handle)),
            name=_text(n.nvmlDeviceGetName(handle)),
            memory_total_mib=int(memory.total) // _MIB,
            memory_used_mib=int(memory.used) // _MIB,
            mig_current=current,
            mig_pending=bool(mig[1]) if mig is not None else None,
            mig_instances=tuple(instance for instance, _ in instances),
            processes=self._processes(handle, instances),
            ecc=self._ecc(handle),
            pcie_generation=self._optional(n.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            pcie_width=self._optional(n.nvmlDeviceGetCurrPcieLinkWidth, handle),
            temperature_c=self._optional(
                n.nvmlDeviceGetTemperature, handle, n.NVML_TEMPERATURE_GPU
            ),
            power_w=power / 1000 if power is not None else None,
        )

    def _mig_instances(self, handle: Any) -> list[tuple[MigInstance, Any]]:
        n = self._nvml
        out: list[tuple[MigInstance, Any]] = []
        for slot in range(self._optional(n.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
            mig = self._optional(n.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
            if mig is None:
                continue  # an empty slot
            name = _text(n.nvmlDeviceGetName(mig))
            memory = self._optional(n.nvmlDeviceGetMemoryInfo, mig)
            instance = MigInstance(
                profile=name.rsplit(" ", 1)[-1],  # "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
                uuid=_text(n.nvmlDeviceGetUUID(mig)),
                gpu_instance_id=self._optional(n.nvmlDeviceGetGpuInstanceId, mig) or 0,
                memory_mib=int(memory.total) // _MIB if memory is not None else 0,
            )
            out.append((instance, mig))
        return out

    def _processes(
        self, handle: Any, instances: Sequence[tuple[MigInstance, Any]]
    ) -> tuple[ComputeProcess, ...]:
        """Compute processes on the GPU and on each of its MIG devices, once per PID."""
        read = self._nvml.nvmlDeviceGetComputeRunningProcesses
        found: dict[int, ComputeProcess] = {}
        for device, mig_uuid in [(handle, None), *((h, i.uuid) for i, h in instances)]:
            for process in self._optional(read, device) or ():
                used = getattr(process, "usedGpuMemory", None)
                pid = int(process.pid)
                if pid not in found or mig_uuid is not None:
                    found[pid] = ComputeProcess(
                        pid=pid,
                        used_memory_mib=int(used) // _MIB if used is not None else None,
                        mig_uuid=mig_uuid,
                    )
        return tuple(found[pid] for pid in sorted(found))

    def _ecc(self, handle: Any) -> EccCounts:
        n = self._nvml
        errors = n.nvmlDeviceGetTotalEccErrors
        uncorrected = n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        sbe = self._optional(
            n.nvmlDeviceGetRetiredPages,
            handle,
            n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        )
        dbe = self._optional(
            n.nvmlDeviceGetRetiredPages, handle, n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        )
        pending = self._optional(n.nvmlDeviceGetRetiredPagesPendingStatus, handle)
        return EccCounts(
            volatile_uncorrected=self._optional(errors, handle, uncorrected, n.NVML_VOLATILE_ECC),
            aggregate_uncorrected=self._optional(errors, handle, uncorrected, n.NVML_AGGREGATE_ECC),
            retired_pages_single_bit=len(sbe) if sbe is not None else None,
            retired_pages_double_bit=len(dbe) if dbe is not None else None,
            retirement_pending=bool(pending) if pending is not None else None,
        )

    def wait_xids(self, timeout_s: float) -> list[XidEvent]:
        n = self._nvml
        if self._events is None:
            self._events = n.nvmlEventSetCreate()
            for index in range(self.device_count()):
                handle = n.nvmlDeviceGetHandleByIndex(index)
                # Not every GPU reports XIDs (NotSupported): it simply raises none.
                self._optional(
                    n.nvmlDeviceRegisterEvents,
                    handle,
                    n.nvmlEventTypeXidCriticalError,
                    self._events,
                )
        out: list[XidEvent] = []
        wait_ms = max(int(timeout_s * 1000), 0)
        while True:
            try:
                event = n.nvmlEventSetWait(self._events, wait_ms)
            except n.NVMLError_Timeout:
                return out
            out.append(XidEvent(_text(n.nvmlDeviceGetUUID(event.device)), int(event.eventData)))
            wait_ms = 0  # drain what else is queued, then return

    def close(self) -> None:
        if self._events is not None:
            self._optional(self._nvml.nvmlEventSetFree, self._events)
            self._events = None
        self._optional(self._nvml.nvmlShutdown)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- the simulated backend -----------------------------------------------------------------


@dataclass
class SimulatedGpu:
    """One simulated GPU: what a real one would answer, given by the simulator."""

    uuid: str
    name: str
    memory_mib: int
    mig_capable: bool = False
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()
    processes: tuple[ComputeProcess, ...] = ()
    ecc: EccCounts = field(default_factory=EccCounts)


class SimulatedNvml:
    """`Nvml` over `SimulatedGpu` data; `raise_xid` queues an XID as the driver would."""

    def __init__(self, gpus: Sequence[SimulatedGpu], *, driver: str, cuda: str = "12.8") -> None:
        self.gpus = list(gpus)
        self._driver = driver
        self._cuda = cuda
        self._xids: list[XidEvent] = []

    def raise_xid(self, index: int, xid: int) -> None:
        self._xids.append(XidEvent(self.gpus[index].uuid, xid))

    def driver_version(self) -> str:
        return self._driver

    def cuda_driver_version(self) -> str:
        return self._cuda

    def device_count(self) -> int:
        return len(self.gpus)

    def read_gpu(self, index: int) -> GpuReading:
        gpu = self.gpus[index]
        used = sum(p.used_memory_mib or 0 for p in gpu.processes)
        return GpuReading(
            index=index,
            uuid=gpu.uuid,
            name=gpu.name,
            memory_total_mib=gpu.memory_mib,
            memory_used_mib=used,
            mig_current=gpu.mig_enabled if gpu.mig_capable else None,
            mig_pending=gpu.mig_enabled if gpu.mig_capable else None,
            mig_instances=gpu.mig_instances if gpu.mig_enabled else (),
            processes=gpu.processes,
            ecc=gpu.ecc,
            pcie_generation=5,
            pcie_width=16,
            temperature_c=40,
            power_w=100.0,
        )

    def wait_xids(self, timeout_s: float) -> list[XidEvent]:
        """What was raised so far; never waits (the simulation drives the agent's steps)."""
        out, self._xids = self._xids, []
        return out

    def close(self) -> None:
        pass
