"""Sick simulated GPUs: an XID or ECC errors injected on one GPU of one node, what the
device plugin makes of them, and the simulated reset that cures them (or fails to).

All of it lives in the node's `sim.gpu-operator.io/*` annotations, as the rest of the
simulated hardware does, so any client (the `gpu-operator sim gpu-error` command, a test,
a benchmark) can make a GPU sick with one patch, and the state survives every restart:

* `.../xids` `<gpu>:<xid>,...`: the GPU raised the XID (the simulated NVML delivers each
  once, the node agent keeps it until a reset).
* `.../ecc` `<gpu>:<count>,...`: uncorrected ECC errors since the driver loaded.
* `.../reset-fails` `<gpu>,...` or `all`: a reset of those GPUs fails.

A GPU with a critical XID or ECC errors is one the real device plugin's health check marks
unhealthy: it stops advertising it, so the node's allocatable drops by one GPU (or by the
GPU's MIG devices, or its time-slicing replicas). A successful reset clears the GPU's XIDs
and ECC count, and the plugin offers it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.nodeagent import ResetFailed, critical_xid
from gpusim._nodes import ANNOTATION_XIDS, SIM_PREFIX
from reconciler import Client, annotations_of
from reconciler.kinds import NODE

ANNOTATION_ECC = SIM_PREFIX + "ecc"
ANNOTATION_RESET_FAILS = SIM_PREFIX + "reset-fails"


def parse_pairs(text: str) -> tuple[tuple[int, int], ...]:
    """`0:79,3:48` as ((0, 79), (3, 48)); malformed items are skipped."""
    out: list[tuple[int, int]] = []
    for item in text.split(","):
        gpu, _, value = item.strip().partition(":")
        if gpu.isdigit() and value.isdigit():
            out.append((int(gpu), int(value)))
    return tuple(out)


def _join(pairs: tuple[tuple[int, int], ...]) -> str | None:
    return ",".join(f"{g}:{v}" for g, v in pairs) or None


def sick_gpus(annotations: Mapping[str, str]) -> frozenset[int]:
    """The GPU indices the device plugin would mark unhealthy."""
    xids = {g for g, x in parse_pairs(annotations.get(ANNOTATION_XIDS, "")) if critical_xid(x)}
    ecc = {g for g, n in parse_pairs(annotations.get(ANNOTATION_ECC, "")) if n > 0}
    return frozenset(xids | ecc)


def reset_fails(annotations: Mapping[str, str], gpu: int) -> bool:
    text = annotations.get(ANNOTATION_RESET_FAILS, "")
    items = {item.strip() for item in text.split(",")}
    return "all" in items or str(gpu) in items


def error_patch(
    annotations: Mapping[str, str],
    gpu: int,
    *,
    xid: int | None = None,
    ecc: int | None = None,
    reset_fails: bool | None = None,
) -> dict[str, str | None]:
    """The annotations that make GPU `gpu` raise `xid`, count `ecc` uncorrected errors,
    and (un)fail its next reset."""
    out: dict[str, str | None] = {}
    if xid is not None:
        pairs = parse_pairs(annotations.get(ANNOTATION_XIDS, ""))
        out[ANNOTATION_XIDS] = _join((*pairs, (gpu, xid)))
    if ecc is not None:
        pairs = tuple(p for p in parse_pairs(annotations.get(ANNOTATION_ECC, "")) if p[0] != gpu)
        out[ANNOTATION_ECC] = _join((*pairs, (gpu, ecc)))
    if reset_fails is not None:
        items = [i for i in annotations.get(ANNOTATION_RESET_FAILS, "").split(",") if i]
        items = [i for i in items if i != str(gpu)] + ([str(gpu)] if reset_fails else [])
        out[ANNOTATION_RESET_FAILS] = ",".join(items) or None
    return out


def reset_patch(annotations: Mapping[str, str], gpu: int) -> dict[str, str | None]:
    """What a successful reset of `gpu` clears: its XIDs and its ECC count."""
    xids = tuple(p for p in parse_pairs(annotations.get(ANNOTATION_XIDS, "")) if p[0] != gpu)
    ecc = tuple(p for p in parse_pairs(annotations.get(ANNOTATION_ECC, "")) if p[0] != gpu)
    return {ANNOTATION_XIDS: _join(xids), ANNOTATION_ECC: _join(ecc)}


async def _annotations(client: Client, node: str) -> dict[str, str]:
    obj: Any = await client.request("GET", f"/api/v1/nodes/{node}")
    return annotations_of(obj)


async def inject_gpu_error(
    client: Client,
    node: str,
    gpu: int,
    *,
    xid: int | None = None,
    ecc: int | None = None,
    reset_fails: bool | None = None,
) -> None:
    """Make GPU `gpu` of `node` sick (an XID, ECC errors) and/or its resets fail."""
    body = error_patch(
        await _annotations(client, node), gpu, xid=xid, ecc=ecc, reset_fails=reset_fails
    )
    await client.patch(NODE, node, {"metadata": {"annotations": body}}, quiet=True)


class SimulatedReset:
    """A node's GPU reset on the simulated hardware (`GpuResetter`): it clears the GPU's
    errors, unless the node says its resets fail."""

    def __init__(self, client: Client, node: str, on_reset: Any = None) -> None:
        self.client = client
        self.node = node
        self.on_reset = on_reset

    async def reset(self, index: int) -> None:
        annotations = await _annotations(self.client, self.node)
        if reset_fails(annotations, index):
            raise ResetFailed(f"GPU {index}: Unable to reset this GPU (simulated failure)")
        body = {"metadata": {"annotations": reset_patch(annotations, index)}}
        await self.client.patch(NODE, self.node, body, quiet=True)
        if self.on_reset is not None:
            self.on_reset(index)
