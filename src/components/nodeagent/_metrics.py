"""The agent's own metrics (`gpu_operator_node_*`), on its `/metrics`.

A registry of its own, so a test or the simulated cluster can hold one per node. Gauges
are set from each step's observation; GPUs are labelled by index and UUID, as DCGM
exporter does, so the two join in a dashboard.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from components.nodeagent._report import Observation, Verdict

_PREFIX = "gpu_operator_node_"
_GPU = ("gpu", "uuid")


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._last: Observation | None = None
        per_gpu: list[Gauge] = []

        def gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
            return Gauge(_PREFIX + name, documentation, labels, registry=self.registry)

        def gpu_gauge(name: str, documentation: str, *labels: str) -> Gauge:
            """A gauge per GPU (index, UUID and `labels`), cleared before each step."""
            per_gpu.append(gauge(name, documentation, [*_GPU, *labels]))
            return per_gpu[-1]

        self.condition = gauge(
            "condition",
            "1 for the status each of the agent's node conditions has now.",
            ["condition", "status", "reason"],
        )
        self.gpus = gauge("gpus", "GPUs NVML sees on the node.")
        self.driver_info = gauge(
            "driver_info",
            "1, labelled with the driver and CUDA versions NVML reports.",
            ["driver_version", "cuda_version", "host_driver"],
        )
        self.xids = Counter(
            _PREFIX + "xid_errors",
            "XID events the GPU raised since the agent started.",
            [*_GPU, "xid"],
            registry=self.registry,
        )
        self.ecc_uncorrected = gpu_gauge(
            "ecc_uncorrected_errors", "Uncorrected ECC errors since the driver loaded."
        )
        self.retired_pages = gpu_gauge(
            "retired_pages", "Memory pages the GPU retired, by cause.", "cause"
        )
        self.processes = gpu_gauge("compute_processes", "Compute processes running on the GPU.")
        self.mig_enabled = gpu_gauge(
            "mig_mode_enabled",
            "1 when the GPU is in MIG mode now (pending: after the next reset).",
            "when",
        )
        self.temperature = gpu_gauge("gpu_temperature_celsius", "GPU temperature.")
        self.power = gpu_gauge("gpu_power_watts", "GPU power draw.")
        self.pcie_generation = gpu_gauge("pcie_link_generation", "Current PCIe link generation.")
        self.pcie_width = gpu_gauge("pcie_link_width", "Current PCIe link width (lanes).")
        self._per_gpu = tuple(per_gpu)

    def xid(self, uuid: str, xid: int) -> None:
        """Count an XID, labelled with the GPU's index as last seen."""
        index = next(
            (str(g.index) for g in (self._last.gpus if self._last else ()) if g.uuid == uuid), ""
        )
        self.xids.labels(index, uuid, str(xid)).inc()

    def observe(self, obs: Observation, verdicts: Sequence[Verdict]) -> None:
        self._last = obs
        self.condition.clear()
        for v in verdicts:
            self.condition.labels(v.type, v.status, v.reason).set(1)
        self.gpus.set(len(obs.gpus))
        self.driver_info.clear()
        if obs.driver_version:
            host = (
                "true"
                if obs.host.module_version and not obs.host.driver_container_root
                else "false"
            )
            self.driver_info.labels(obs.driver_version, obs.cuda_version, host).set(1)
        for gauge in self._per_gpu:
            gauge.clear()
        for gpu in obs.gpus:
            key = (str(gpu.index), gpu.uuid)
            ecc = gpu.ecc
            _set(self.ecc_uncorrected, key, ecc.volatile_uncorrected)
            _set(self.retired_pages, (*key, "single_bit"), ecc.retired_pages_single_bit)
            _set(self.retired_pages, (*key, "double_bit"), ecc.retired_pages_double_bit)
            self.processes.labels(*key).set(len(gpu.processes))
            _set(self.mig_enabled, (*key, "current"), gpu.mig_current)
            _set(self.mig_enabled, (*key, "pending"), gpu.mig_pending)
            _set(self.temperature, key, gpu.temperature_c)
            _set(self.power, key, gpu.power_w)
            _set(self.pcie_generation, key, gpu.pcie_generation)
            _set(self.pcie_width, key, gpu.pcie_width)


def _set(gauge: Gauge, labels: tuple[str, ...], value: float | bool | None) -> None:
    """Only values the GPU reports: an unsupported one is no series, not a zero."""
    if value is not None:
        gauge.labels(*labels).set(float(value))
