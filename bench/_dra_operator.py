"""The GPUCluster run of `scale.py --dra`: the operator running on a fresh simulated cluster,
timed from the reference's GPUCluster sample created until every GPU node publishes its
`gpu.nvidia.com` ResourceSlice, the same end as the DRA floor (`_dra_floor`), which creates
the stack's objects directly on pre-labelled nodes. The operator labels the nodes and renders
the stack on the clock.

Untimed before the clock: each GPU node gets a driver on the host and the cluster the
`nvidia` RuntimeClass a host toolkit comes with (a GPUCluster deploys neither), and the
operator is started and serving.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml

from _dra_floor import HOST_DRIVER, Tally, published_nodes, start_clock
from _dra_timeline import Timeline
from gpusim import ANNOTATION_HOST_DRIVER, SimulatedCluster
from reconciler.lowlevel import Transport

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"
_GPU_CLUSTERS = "/apis/nvidia.com/v1alpha1/gpuclusters"
_WRITERS = 20


async def prepare(sim: SimulatedCluster) -> None:
    """The host software a GPUCluster does not deploy."""
    async with sim.api_client() as api:
        transport = Transport(api)
        gate = asyncio.Semaphore(_WRITERS)
        body = {"metadata": {"annotations": {ANNOTATION_HOST_DRIVER: HOST_DRIVER}}}

        async def patch(node: str) -> None:
            async with gate:
                await transport.request(
                    "PATCH",
                    f"/api/v1/nodes/{node}",
                    body=body,
                    content_type="application/merge-patch+json",
                )

        await asyncio.gather(*(patch(node) for node in sim.gpu_nodes))
        runtime_class = {"metadata": {"name": "nvidia"}, "handler": "nvidia"}
        await transport.request("POST", "/apis/node.k8s.io/v1/runtimeclasses", body=runtime_class)
        await transport.close()


async def gpu_cluster_run(
    sim: SimulatedCluster, deadline_s: float, tally: Tally, interval: float = 0.2
) -> dict[str, Any]:
    """Create the sample GPUCluster and time it until every GPU node publishes its slice
    (polled every `interval` seconds); `tally` counts the CPU spent on the clock."""
    gpu_nodes = set(sim.gpu_nodes)
    sample = yaml.safe_load(SAMPLE.read_text())
    async with sim.api_client() as api:
        transport = Transport(api)
        timeline = Timeline(gpu_nodes, gpu_cluster=True)
        settled, began = await start_clock(timeline, transport, tally)
        await transport.request("POST", _GPU_CLUSTERS, body=sample)
        timeline.events["GPUCluster created (POST answered)"] = round(time.monotonic() - began, 3)
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
        "quiet_after_seconds": settled,
        "timeline": timeline.summary(),
        **cpu,
    }
