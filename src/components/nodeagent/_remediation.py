"""The node agent's half of GPU remediation: reset a GPU, or mark the host for a reboot,
when the operator asks on the Node, and answer there.

The operator never reaches into a node: it writes a request annotation
(`nvidia.com/gpu-remediation.reset-request=<gpu>/<id>`), the agent acts once per id and
answers (`...reset-result=<id>/succeeded`). A reset waits while a compute process still
holds the GPU (a reset under a live context fails, and the process would crash anyway):
the answer says `waiting` and names it. The reset itself is the one NVIDIA documents for
these XIDs, `nvidia-smi --gpu-reset -i N`, run from the driver's root; on a simulated node
the simulator's reset stands in (`GpuResetter`). A reboot request writes the host's
`/var/run/reboot-required`, the file kured reboots a node for.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from components.api import (
    REBOOT_REQUEST_ANNOTATION,
    REBOOT_RESULT_ANNOTATION,
    REBOOT_SENTINEL,
    RESET_REQUEST_ANNOTATION,
)
from components.nodeagent._nvml import GpuReading

SUCCEEDED = "succeeded"
FAILED = "failed"
WAITING = "waiting"
WRITTEN = "written"


class ResetFailed(Exception):
    """The GPU did not reset (one sentence: what the tool said)."""


class GpuResetter(Protocol):
    """Resets one GPU by index; raises `ResetFailed`."""

    async def reset(self, index: int) -> None: ...


class NvidiaSmiReset:
    """`nvidia-smi --gpu-reset -i N` from the driver's root: the driver container's root on
    the host when one serves the GPUs, else the host's own."""

    def __init__(self, host_root: Path, driver_root: Path, timeout_s: float = 60.0) -> None:
        self.host_root = host_root
        self.driver_root = driver_root
        self.timeout_s = timeout_s

    def _root(self) -> Path:
        if (self.driver_root / "usr/bin/nvidia-smi").exists():
            return self.driver_root
        return self.host_root

    async def reset(self, index: int) -> None:
        argv = ["chroot", str(self._root()), "nvidia-smi", "--gpu-reset", "-i", str(index)]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            out, _ = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ResetFailed(f"{' '.join(argv)}: {exc or 'timed out'}") from None
        if proc.returncode != 0:
            text = out.decode(errors="replace").strip().splitlines()
            raise ResetFailed(text[-1] if text else f"nvidia-smi exited {proc.returncode}")


@dataclass(frozen=True)
class ResetRequest:
    gpu: int
    id: str


def reset_request(annotations: Mapping[str, str]) -> ResetRequest | None:
    """The operator's open request (None: none, or malformed)."""
    gpu, _, request_id = (annotations.get(RESET_REQUEST_ANNOTATION) or "").partition("/")
    if not gpu.isdigit() or not request_id:
        return None
    return ResetRequest(int(gpu), request_id)


def answered(annotations: Mapping[str, str], key: str, request_id: str) -> str | None:
    """The final answer already given to `request_id` (`waiting` is not final)."""
    got, _, rest = (annotations.get(key) or "").partition("/")
    if got != request_id:
        return None
    outcome = rest.partition("/")[0]
    return None if outcome == WAITING else outcome


def holders(gpus: Sequence[GpuReading], index: int) -> str:
    """Who holds GPU `index` ("" when nobody)."""
    for gpu in gpus:
        if gpu.index == index and gpu.processes:
            pids = ", ".join(str(p.pid) for p in gpu.processes[:3])
            more = f" and {len(gpu.processes) - 3} more" if len(gpu.processes) > 3 else ""
            return f"process {pids}{more} still holds GPU {index}"
    return ""


def write_sentinel(host_root: Path) -> None:
    """The host's reboot-required file (kured's default sentinel)."""
    path = host_root / REBOOT_SENTINEL
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)


def reboot_request(annotations: Mapping[str, str]) -> str | None:
    """The id of an open reboot request, None when none is open."""
    request_id = annotations.get(REBOOT_REQUEST_ANNOTATION) or ""
    if not request_id or answered(annotations, REBOOT_RESULT_ANNOTATION, request_id):
        return None
    return request_id
