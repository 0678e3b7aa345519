"""What a node's GPUs mean for Kubernetes: pure functions from one `Observation` to the
Node conditions and the GPU process list the agent publishes.

Three conditions of our own on the Node (kubelet's are left alone):

* `GPUDriverReady`: NVML answers. The reason says who serves it: `DriverContainer` (our
  driver pod publishes its root on the host) or `HostDriver` (a driver installed on the
  host: the kernel module is loaded and no driver container serves it), from which the
  operator labels the node `nvidia.com/gpu.deploy.driver=pre-installed`. `DriverNotLoaded`
  when NVML does not answer, `DriverRestarting` while a driver upgrade restarts it (the
  agent lets go of the GPU so that the old module can unload).
* `GPUHealthy`: no GPU raised a critical XID since the agent started (the XIDs an
  application causes, such as 13 or 43, are not the GPU's fault) and none passed an ECC
  threshold (uncorrected errors since the driver loaded, pages waiting to be retired, or
  `RETIRED_PAGES_LIMIT` retired pages).
* `GPUValidated`: what the validator's init containers ask, answered at once: the driver
  is usable (NVML sees GPUs), the container toolkit is in place, and the device plugin
  advertises what NVML sees. The driver upgrade's validation step reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from components.api import (
    GPU_DRIVER_READY,
    GPU_HEALTHY,
    GPU_VALIDATED,
    HOST_DRIVER_REASON,
    NODE_AGENT_CONDITIONS,
)
from components.nodeagent._host import HostFacts
from components.nodeagent._nvml import GpuReading

DRIVER_READY: Final = GPU_DRIVER_READY
HEALTHY: Final = GPU_HEALTHY
VALIDATED: Final = GPU_VALIDATED
CONDITION_TYPES: Final = NODE_AGENT_CONDITIONS

DRIVER_CONTAINER: Final = "DriverContainer"
HOST_DRIVER: Final = HOST_DRIVER_REASON
DRIVER_NOT_LOADED: Final = "DriverNotLoaded"
DRIVER_RESTARTING: Final = "DriverRestarting"
XID: Final = "XID"
ECC_THRESHOLD: Final = "ECCThreshold"
GPUS_HEALTHY: Final = "Healthy"
DRIVER_UNUSABLE: Final = "DriverUnusable"
TOOLKIT_MISSING: Final = "ToolkitMissing"
DEVICE_PLUGIN_MISMATCH: Final = "DevicePluginMismatch"
PASSED: Final = "Validated"

APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs an application's own fault raises (the device plugin does not count them either)."""
RETIRED_PAGES_LIMIT: Final = 60
"""Retired pages (single- plus double-bit) from which a GPU counts as worn out: the figure
NVIDIA's page retirement documentation gives for a board to be replaced."""

_XID_MEANING: Final = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}

Status = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class Verdict:
    """One condition as the agent decides it (times are the publisher's business)."""

    type: str
    status: Status
    reason: str
    message: str


@dataclass(frozen=True)
class Observation:
    """One look at the node: NVML (or why it did not answer), the host root, the node."""

    node: str
    host: HostFacts
    nvml_error: str | None = None
    released: bool = False
    """The agent let go of NVML for a driver restart."""
    driver_version: str = ""
    cuda_version: str = ""
    gpus: Sequence[GpuReading] = ()
    xids: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Critical XIDs seen per GPU UUID since the agent started."""
    advertised: int = 0
    """GPU resources the node's allocatable offers (`nvidia.com/gpu` and `nvidia.com/mig-*`)."""
    replicas: int = 1
    """Time-slicing replicas per GPU (`nvidia.com/gpu.replicas`, from GPU feature discovery)."""


def critical(xid: int) -> bool:
    return xid not in APPLICATION_XIDS


def host_driver(obs: Observation) -> bool:
    """A driver installed on the host: NVML answers, the kernel module is loaded, and no
    driver container's root is published on the host."""
    return (
        obs.nvml_error is None
        and obs.host.module_version is not None
        and not obs.host.driver_container_root
    )


def verdicts(obs: Observation) -> list[Verdict]:
    """The three conditions, in `CONDITION_TYPES` order."""
    return [driver_verdict(obs), health_verdict(obs), validation_verdict(obs)]


def driver_verdict(obs: Observation) -> Verdict:
    if obs.released:
        return Verdict(
            DRIVER_READY, "False", DRIVER_RESTARTING, "the driver upgrade restarts the driver"
        )
    if obs.nvml_error is not None:
        return Verdict(DRIVER_READY, "False", DRIVER_NOT_LOADED, obs.nvml_error)
    gpus = _gpus(len(obs.gpus))
    if host_driver(obs):
        return Verdict(
            DRIVER_READY,
            "True",
            HOST_DRIVER,
            f"node {obs.node} uses NVIDIA driver {obs.driver_version} installed on the host "
            f"({gpus}); the operator deploys no driver pod on it",
        )
    return Verdict(
        DRIVER_READY,
        "True",
        DRIVER_CONTAINER,
        f"NVIDIA driver {obs.driver_version} (CUDA {obs.cuda_version}) from the driver "
        f"container serves {gpus}",
    )


def health_verdict(obs: Observation) -> Verdict:
    if obs.nvml_error is not None or obs.released:
        return Verdict(HEALTHY, "Unknown", DRIVER_NOT_LOADED, "NVML does not answer")
    for gpu in obs.gpus:
        bad = [x for x in obs.xids.get(gpu.uuid, ()) if critical(x)]
        if bad:
            xid = bad[-1]
            meaning = _XID_MEANING.get(xid)
            return Verdict(
                HEALTHY,
                "False",
                XID,
                f"GPU {gpu.index} ({gpu.uuid}) raised XID {xid}"
                + (f" ({meaning})" if meaning else ""),
            )
    for gpu in obs.gpus:
        problem = ecc_problem(gpu)
        if problem:
            return Verdict(
                HEALTHY, "False", ECC_THRESHOLD, f"GPU {gpu.index} ({gpu.uuid}) {problem}"
            )
    return Verdict(HEALTHY, "True", GPUS_HEALTHY, f"{_gpus(len(obs.gpus))} healthy")


def sick(obs: Observation, gpu: GpuReading) -> bool:
    """The GPU raised a critical XID or passed an ECC threshold."""
    return any(critical(x) for x in obs.xids.get(gpu.uuid, ())) or bool(ecc_problem(gpu))


def ecc_problem(gpu: GpuReading) -> str:
    """Why the GPU's memory counts as failing, or ""."""
    ecc = gpu.ecc
    if ecc.volatile_uncorrected:
        return f"has {ecc.volatile_uncorrected} uncorrected ECC errors since the driver loaded"
    if ecc.retirement_pending:
        return "has pages waiting to be retired (a GPU reset retires them)"
    retired = (ecc.retired_pages_single_bit or 0) + (ecc.retired_pages_double_bit or 0)
    if retired >= RETIRED_PAGES_LIMIT:
        return f"retired {retired} memory pages (limit {RETIRED_PAGES_LIMIT})"
    return ""


def expected_resources(gpus: Sequence[GpuReading], replicas: int = 1) -> int:
    """The GPU resources a device plugin advertises for these GPUs: one per GPU, or one
    per MIG device of a GPU in MIG mode (either MIG strategy), times the replicas."""
    units = sum(len(g.mig_instances) if g.mig_current else 1 for g in gpus)
    return units * max(replicas, 1)


def validation_verdict(obs: Observation) -> Verdict:
    if obs.released:
        return Verdict(
            VALIDATED, "False", DRIVER_RESTARTING, "the driver upgrade restarts the driver"
        )
    if obs.nvml_error is not None:
        return Verdict(
            VALIDATED, "False", DRIVER_UNUSABLE, f"NVML does not answer: {obs.nvml_error}"
        )
    if not obs.gpus:
        return Verdict(VALIDATED, "False", DRIVER_UNUSABLE, "the driver is loaded but sees no GPU")
    if not obs.host.toolkit_installed:
        return Verdict(
            VALIDATED, "False", TOOLKIT_MISSING, "the NVIDIA container toolkit is not installed"
        )
    expected = expected_resources(obs.gpus, obs.replicas)
    # The device plugin withholds a GPU its health check marks unhealthy (a critical XID):
    # offering only the healthy ones is the plugin doing its job, not a mismatch.
    healthy = expected_resources([g for g in obs.gpus if not sick(obs, g)], obs.replicas)
    if obs.advertised not in (expected, healthy):
        return Verdict(
            VALIDATED,
            "False",
            DEVICE_PLUGIN_MISMATCH,
            f"the device plugin advertises {obs.advertised} GPU resources where NVML sees "
            f"{expected}",
        )
    return Verdict(
        VALIDATED,
        "True",
        PASSED,
        f"driver {obs.driver_version} usable, toolkit installed, the device plugin "
        f"advertises the {expected} GPU resources NVML sees",
    )


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
