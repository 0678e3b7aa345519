"""The node agent: what each GPU node really has, read through NVML.

`gpu-operator node-agent` runs on every GPU node (the operator deploys it when the
ClusterPolicy asks, `nodeAgent.enabled`). It reads the GPUs through one interface with two
backends (`_nvml`: NVIDIA's pynvml, or simulated data), decides the node's conditions
(`_report`), and publishes them on the Node, with the GPU compute processes and their pods
as an annotation and its own `/metrics` (`_metrics`). The operator reads what it
publishes: a driver installed on the host, the health summary in the ClusterPolicy status,
the answer the driver upgrade's validation waits for.
"""

from components.nodeagent._agent import (
    PROCESSES_ANNOTATION,
    ClusterNodeApi,
    GpuProcess,
    NodeAgent,
    NodeApi,
    WatchedNodeApi,
    condition_patch,
    process_list,
)
from components.nodeagent._host import HostFacts, HostRoot
from components.nodeagent._metrics import AgentMetrics
from components.nodeagent._nvml import (
    ComputeProcess,
    EccCounts,
    GpuReading,
    MigInstance,
    Nvml,
    NvmlUnavailable,
    SimulatedGpu,
    SimulatedNvml,
    XidEvent,
    open_nvml,
)
from components.nodeagent._remediation import GpuResetter, NvidiaSmiReset, ResetFailed
from components.nodeagent._report import (
    CONDITION_TYPES,
    DRIVER_READY,
    HEALTHY,
    HOST_DRIVER,
    VALIDATED,
    Observation,
    Verdict,
    expected_resources,
    verdicts,
)
from components.nodeagent._report import critical as critical_xid

__all__ = [
    "CONDITION_TYPES",
    "DRIVER_READY",
    "HEALTHY",
    "HOST_DRIVER",
    "PROCESSES_ANNOTATION",
    "VALIDATED",
    "AgentMetrics",
    "ClusterNodeApi",
    "ComputeProcess",
    "EccCounts",
    "GpuProcess",
    "GpuReading",
    "GpuResetter",
    "HostFacts",
    "HostRoot",
    "MigInstance",
    "NodeAgent",
    "NodeApi",
    "NvidiaSmiReset",
    "Nvml",
    "NvmlUnavailable",
    "Observation",
    "ResetFailed",
    "SimulatedGpu",
    "SimulatedNvml",
    "Verdict",
    "WatchedNodeApi",
    "XidEvent",
    "condition_patch",
    "critical_xid",
    "expected_resources",
    "open_nvml",
    "process_list",
    "verdicts",
]
