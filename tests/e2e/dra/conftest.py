"""One simulated cluster for the DRA tests, with mixed hardware: an H100 node with MIG off,
an H100 node left in MIG mode (the balanced layout), an L4 node, and a CPU-only node. Every
GPU node has a driver on the host (the kubelet plugin publishes nothing without one) and the
deploy labels the DRA DaemonSets select; the DRA objects of `gpusim.dra_stack()`
are applied and every GPU node has published its slice before a test runs."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from gpusim import (
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_APPLIED,
    DRA_NODE_LABELS,
    ClusterConfig,
    SimulatedCluster,
    dra_stack,
)
from tests.e2e.dra._api import create, gpu_slices
from tests.e2e.sim._kube import call
from tests.polling import eventually

HOST_DRIVER = "580.95.05"
DRA_CLUSTER = ClusterConfig(gpu_nodes=2, cpu_nodes=1, gpus_per_node=2, mig_capable=True)
L4_NODE = "dra-l4-0"

_counter = itertools.count()


async def _prepare(sim: SimulatedCluster) -> None:
    await sim.add_node(
        sim.gpu_node_spec(
            L4_NODE, product="NVIDIA-L4", gpus=1, mig_capable=False, host_driver=HOST_DRIVER
        )
    )
    async with sim.api_client() as api:
        core = client.CoreV1Api(api)
        mig_node = sim.gpu_nodes[1]
        for name in sim.gpu_nodes:
            annotations = {ANNOTATION_HOST_DRIVER: HOST_DRIVER}
            if name == mig_node:
                annotations[ANNOTATION_MIG_APPLIED] = "all-balanced"
            body = {"metadata": {"annotations": annotations, "labels": DRA_NODE_LABELS}}
            await call(core.patch_node, name, body)
        for obj in dra_stack():
            await create(api, obj)

        async def published() -> bool:
            return set(await gpu_slices(api)) == set(sim.gpu_nodes)

        await eventually(published, "every GPU node to publish its ResourceSlice", 120)


@pytest.fixture(scope="module")
def dra_cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(DRA_CLUSTER) as sim:
        asyncio.run(_prepare(sim))
        yield sim


@pytest.fixture
async def dra_api(dra_cluster: SimulatedCluster) -> AsyncIterator[Any]:
    async with dra_cluster.api_client() as api:
        yield api


@pytest.fixture
async def namespace(dra_api: Any, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A namespace of the test's own, its pods gone (claims released) afterwards."""
    core = client.CoreV1Api(dra_api)
    short = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())
    name = f"{short[:40].strip('-')}-{next(_counter)}"
    await call(core.create_namespace, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        await call(core.delete_collection_namespaced_pod, name, grace_period_seconds=0)
        await call(core.delete_namespace, name)
