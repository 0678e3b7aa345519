"""The DRA floor for `scale.py --dra-floor`: NVIDIA's DRA stack (`gpusim.dra_stack()`, the
objects a GPUCluster renders) created directly on a fresh simulated cluster, timed from the
first create until every GPU node has published its `gpu.nvidia.com` ResourceSlice. No
operator runs: what the control plane, the kubelet-plugin DaemonSet's rollout and the
plugins' own writes (a pod-bound token and a slice per node) need, which a GPUCluster run
is held to (issue 50: within 1.1x at 1,000 nodes).

Untimed before the clock, as the floor of `scale.py` pre-labels: each GPU node gets a
driver on the host (the plugin publishes nothing without one) and the DaemonSets' deploy
labels.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from _dra_timeline import Timeline
from gpusim import (
    ANNOTATION_HOST_DRIVER,
    DRA_DRIVER,
    DRA_NODE_LABELS,
    SimulatedCluster,
    dra_collection_path,
    dra_stack,
)
from reconciler.lowlevel import Transport

HOST_DRIVER = "580.95.05"
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_WRITERS = 20


async def published_nodes(transport: Transport) -> set[str]:
    """The nodes with a `gpu.nvidia.com` slice, listed from the API server's watch cache."""
    listed = await transport.request(
        "GET",
        _SLICES,
        params={"fieldSelector": f"spec.driver={DRA_DRIVER}", "resourceVersion": "0"},
    )
    return {str(item["spec"].get("nodeName", "")) for item in listed.get("items") or []}


class Tally(Protocol):
    """What the clock's CPU accounting offers (`scale.CpuTally`)."""

    def start(self) -> None: ...

    def stop(self) -> dict[str, Any]: ...


async def dra_floor(
    sim: SimulatedCluster, deadline_s: float, tally: Tally, interval: float = 0.2
) -> dict[str, Any]:
    """Create the DRA stack and time it until every GPU node publishes its slice (polled
    every `interval` seconds: the figure is at most that much late); `tally` counts the
    CPU spent on the clock."""
    gpu_nodes = set(sim.gpu_nodes)
    async with sim.api_client() as api:
        transport = Transport(api)
        gate = asyncio.Semaphore(_WRITERS)

        async def prepare(node: str) -> None:
            body = {
                "metadata": {
                    "annotations": {ANNOTATION_HOST_DRIVER: HOST_DRIVER},
                    "labels": dict(DRA_NODE_LABELS),
                }
            }
            async with gate:
                await transport.request(
                    "PATCH",
                    f"/api/v1/nodes/{node}",
                    body=body,
                    content_type="application/merge-patch+json",
                )

        await asyncio.gather(*(prepare(node) for node in gpu_nodes))
        objects = dra_stack()
        timeline = Timeline(gpu_nodes, gpu_cluster=False)
        await timeline.start(transport)
        tally.start()
        began = time.monotonic()
        timeline.begin()
        # The namespace, then every prerequisite at once, then the DaemonSet.
        await transport.request("POST", dra_collection_path(objects[0]), body=objects[0])
        rest = objects[1:]
        await asyncio.gather(
            *(
                transport.request("POST", dra_collection_path(o), body=o)
                for o in rest
                if o["kind"] != "DaemonSet"
            )
        )
        for obj in (o for o in rest if o["kind"] == "DaemonSet"):
            await transport.request("POST", dra_collection_path(obj), body=obj)
        published: set[str] = set()
        while True:
            published = await published_nodes(transport) & gpu_nodes
            seconds = time.monotonic() - began
            if published == gpu_nodes or seconds > deadline_s:
                break
            await asyncio.sleep(interval)
        cpu = tally.stop()
        await timeline.stop()
        await transport.close()
    return {
        "seconds": round(seconds, 1),
        "gpu_nodes": len(gpu_nodes),
        "published": len(published),
        "objects": len(objects),
        "timeline": timeline.summary(),
        **cpu,
    }
