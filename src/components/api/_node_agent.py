"""The node agent's contract with the operator: the Node conditions it writes and the
annotation that lists the GPU processes. The agent (`components.nodeagent`) writes them;
the controllers and the upgrade walk read them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
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
"pod": "namespace/name" or ""}`, and `"unrequested": true` on the process of a pod that
requests no GPU resource (it sees the GPUs through its environment). Absent when no
process uses a GPU (or no agent runs)."""


@dataclass(frozen=True)
class GpuProcessEntry:
    """One entry of `GPU_PROCESSES_ANNOTATION`: a compute process and the pod owning it."""

    gpu: str
    index: int
    pid: int
    mig: str | None
    pod_uid: str
    pod: str
    """`namespace/name`, "" for a process outside any pod the agent could name."""
    unrequested: bool = False
    """Its pod requests no GPU resource, yet holds one."""

    @property
    def pod_key(self) -> tuple[str, str] | None:
        """(namespace, name) of the owning pod, None when there is none."""
        namespace, _, name = self.pod.partition("/")
        return (namespace, name) if namespace and name else None


def gpu_processes(annotations: Mapping[str, str]) -> list[GpuProcessEntry]:
    """The node's GPU compute processes as its agent last published them (`[]` when none,
    or when the annotation cannot be read: the agent rewrites it on its next look)."""
    try:
        raw = json.loads(annotations.get(GPU_PROCESSES_ANNOTATION) or "[]")
    except ValueError:
        return []
    out: list[GpuProcessEntry] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            out.append(
                GpuProcessEntry(
                    gpu=str(item.get("gpu", "")),
                    index=int(item.get("index", 0)),
                    pid=int(item.get("pid", 0)),
                    mig=str(item["mig"]) if item.get("mig") else None,
                    pod_uid=str(item.get("podUID", "")),
                    pod=str(item.get("pod", "")),
                    unrequested=item.get("unrequested") is True,
                )
            )
        except (TypeError, ValueError):
            continue
    return out


def node_agent_enabled(policy: Mapping[str, object] | None) -> bool:
    """Whether a ClusterPolicy object (raw, as cached) deploys the node agent: only then
    are its conditions and process lists current enough to decide on."""
    spec = (policy or {}).get("spec")
    agent = spec.get("nodeAgent") if isinstance(spec, Mapping) else None
    return isinstance(agent, Mapping) and agent.get("enabled") is True
