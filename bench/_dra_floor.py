"""The DRA floor for `scale.py --dra-floor`: the objects the GPUCluster controller renders
for the reference's GPUCluster sample (the DRA operands, through the operator's own
renderers, as `scale.py`'s ClusterPolicy floor renders its DaemonSets) created directly on a
fresh simulated cluster, timed from the first create until every GPU node has published its
`gpu.nvidia.com` ResourceSlice. No operator runs: what the control plane, the stack's
rollout and the plugins' own writes (a pod-bound token and a slice per node) need, which a
GPUCluster run is held to (issue 50: within 1.1x at 1,000 nodes).

Untimed before the clock, as the floor of `scale.py` pre-labels: each GPU node gets a
driver on the host (the plugin publishes nothing without one) and the deploy labels the
operator's label controller gives it under a GPUCluster; the namespace exists with the
admin-access label the validator's claim needs; then the machine is let settle. An earlier
floor created a hand-written minimal stack (`gpusim.dra_stack()`: no DCGM exporter, pod
templates a twentieth the size), so it measured a smaller stack, not the operator.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Protocol

import yaml

from _dra_timeline import Timeline
from components.api import GPUCluster, dra_stack
from components.controllers import LabelPolicy, host_driver, node_label_patch
from components.controllers._view import gpu_nodes as node_views
from components.operands import DRA_OPERANDS, ClusterView
from gpusim import ANNOTATION_HOST_DRIVER, DRA_DRIVER, SimulatedCluster
from reconciler import Object, labels_of, name_of
from reconciler.lowlevel import Transport

HOST_DRIVER = "580.95.05"
SAMPLE = Path(__file__).resolve().parents[1] / "tests/fixtures/compat/nvidia-gpucluster-sample.yaml"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
_WORKLOADS = ("DaemonSet", "Deployment")
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


async def start_clock(
    timeline: Timeline, transport: Transport, tally: Tally
) -> tuple[float, float]:
    """The timeline watching, the machine let settle, then the clock: the seconds the
    machine took to settle, and the clock's start."""
    import scale  # scale imports this module: its helpers are read at call time

    await timeline.start(transport)
    settled = await scale.quiet()
    tally.start()
    began = time.monotonic()
    timeline.begin()
    return settled, began


def rendered_dra_objects(nodes: list[Object], namespace: str) -> list[Object]:
    """What the GPUCluster controller would create for the sample on these nodes, without
    an owner."""
    stack = dra_stack(GPUCluster.from_dict(yaml.safe_load(SAMPLE.read_text())))
    view = ClusterView(
        namespace=namespace, gpu_nodes=node_views(nodes), has_service_monitor_crd=False, owner=None
    )
    objects: list[Object] = []
    for operand in DRA_OPERANDS:
        if operand.enabled(stack):
            objects += operand.render(stack, view).objects
    return objects


async def dra_floor(
    sim: SimulatedCluster, deadline_s: float, tally: Tally, interval: float = 0.2
) -> dict[str, Any]:
    """Create the rendered DRA stack and time it until every GPU node publishes its slice
    (polled every `interval` seconds: the figure is at most that much late); `tally` counts
    the CPU spent on the clock."""
    import scale  # scale imports this module: its helpers are read at call time

    gpu_names = set(sim.gpu_nodes)
    async with sim.api_client() as api:
        c, cache = await scale._open(sim, api, policy=False)
        transport = c.transport
        namespace = {"name": scale.NAMESPACE, "labels": {ADMIN_ACCESS_LABEL: "true"}}
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": namespace})
        driver = {"metadata": {"annotations": {ANNOTATION_HOST_DRIVER: HOST_DRIVER}}}
        await scale._gather((c.patch(scale.NODE, n, driver) for n in gpu_names), limit=_WRITERS)
        wanted = LabelPolicy(dra=True)
        nodes = await c.list_live(scale.NODE)
        patches = {
            name_of(n): node_label_patch(
                labels_of(n), wanted, host_driver=host_driver(n.get("status") or {})
            )
            for n in nodes
        }
        await scale._gather(
            (
                c.patch(scale.NODE, name, {"metadata": {"labels": patch}})
                for name, patch in patches.items()
                if patch
            ),
            limit=_WRITERS,
        )
        labelled = scale._labelled(nodes, patches)
        objects = rendered_dra_objects(
            [n for n in labelled if name_of(n) in gpu_names], scale.NAMESPACE
        )
        timeline = Timeline(gpu_names, gpu_cluster=False)
        settled, began = await start_clock(timeline, transport, tally)
        # Everything the workloads use at once, then the workloads at once (as the
        # operator's waves: it sends its bindings in a wave of their own as well).
        await scale._gather(c.create(o) for o in objects if o.get("kind") not in _WORKLOADS)
        await scale._gather(c.create(o) for o in objects if o.get("kind") in _WORKLOADS)
        published: set[str] = set()
        while True:
            published = await published_nodes(transport) & gpu_names
            seconds = time.monotonic() - began
            if published == gpu_names or seconds > deadline_s:
                break
            await asyncio.sleep(interval)
        cpu = tally.stop()
        await timeline.stop()
        await cache.stop()
    return {
        "seconds": round(seconds, 1),
        "gpu_nodes": len(gpu_names),
        "published": len(published),
        "objects": len(objects),
        "quiet_after_seconds": settled,
        "timeline": timeline.summary(),
        **cpu,
    }
