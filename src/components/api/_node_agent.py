"""The node agent's contract with the operator: the Node conditions it writes and the
annotation that lists the GPU processes. The agent (`components.nodeagent`) writes them;
the controllers and the upgrade walk read them.
"""

from __future__ import annotations

from typing import Final

GPU_DRIVER_READY: Final = "GPUDriverReady"
"""NVML answers; reason `DriverContainer` or `HostDriver` (a driver installed on the
host), else `DriverNotLoaded` or `DriverRestarting`."""
GPU_HEALTHY: Final = "GPUHealthy"
"""No critical XID, no ECC threshold passed; reason `XID` or `ECCThreshold` when False."""
GPU_VALIDATED: Final = "GPUValidated"
"""The driver is usable, the toolkit in place, the device plugin advertises what NVML
sees (what the validator's init containers ask)."""
NODE_AGENT_CONDITIONS: Final = (GPU_DRIVER_READY, GPU_HEALTHY, GPU_VALIDATED)
HOST_DRIVER_REASON: Final = "HostDriver"

GPU_PROCESSES_ANNOTATION: Final = "nvidia.com/gpu-operator.compute-processes"
"""On a Node: a JSON list, one entry per GPU compute process, ordered by GPU index and PID:
`{"gpu": UUID, "index": N, "pid": host PID, "mig": MIG UUID or null, "podUID": UID or "",
"pod": "namespace/name" or ""}`. Absent when no process uses a GPU (or no agent runs)."""
