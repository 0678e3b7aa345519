"""One simulated cluster for the whole DRA package (`test_dra.py`, whose tests each put
back what they change, then `test_gpucluster.py`, whose last test deletes the GPUCluster;
one cluster start instead of two), with the operator running and the reference's
GPUCluster sample applied: the operator labels the GPU nodes and renders the DRA stack (the
kubelet-plugin DaemonSet, its RBAC, the DeviceClasses, the ResourceSlice admission policy,
the DRA validation), and the simulated kubelet plugin publishes each node's GPUs from it.

Mixed hardware: an H100 node with MIG off, an H100 node left in MIG mode (the balanced
layout), an L4 node, and a CPU-only node. A GPUCluster deploys neither driver nor container
toolkit: every GPU node has a driver on the host (the kubelet plugin publishes nothing
without one); there is no `nvidia` RuntimeClass (DCGM and its exporter claim their GPUs as
the validator does). Every GPU node has published its slice before a test runs."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from gpusim import (
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_APPLIED,
    ClusterConfig,
    SimulatedCluster,
    load_documents,
)
from tests.e2e.dra._api import gpu_slices
from tests.e2e.operator._harness import NAMESPACE, REPO, OperatorProcess, attach_logs
from tests.e2e.sim._kube import call
from tests.polling import eventually

HOST_DRIVER = "580.95.05"
DRA_CLUSTER = ClusterConfig(gpu_nodes=2, cpu_nodes=1, gpus_per_node=2, mig_capable=True)
L4_NODE = "dra-l4-0"
SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"
GPUCLUSTER = ("nvidia.com", "v1alpha1", "gpuclusters")

_counter = itertools.count()


def sample() -> dict[str, Any]:
    """The reference's GPUCluster sample, as an admin would apply it."""
    found: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return found


async def _prepare(sim: SimulatedCluster) -> None:
    await sim.add_node(
        sim.gpu_node_spec(
            L4_NODE, product="NVIDIA-L4", gpus=1, mig_capable=False, host_driver=HOST_DRIVER
        )
    )
    async with sim.api_client() as api:
        core = client.CoreV1Api(api)
        await call(core.create_namespace, {"metadata": {"name": NAMESPACE}})
        mig_node = sim.gpu_nodes[1]
        for name in sim.gpu_nodes:
            annotations = {ANNOTATION_HOST_DRIVER: HOST_DRIVER}
            if name == mig_node:
                annotations[ANNOTATION_MIG_APPLIED] = "all-balanced"
            await call(core.patch_node, name, {"metadata": {"annotations": annotations}})


async def _published(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await call(client.CustomObjectsApi(api).create_cluster_custom_object, *GPUCLUSTER, sample())

        async def published() -> bool:
            return set(await gpu_slices(api)) == set(sim.gpu_nodes)

        await eventually(published, "every GPU node to publish its ResourceSlice", 180)


@pytest.fixture(scope="package")
def dra_cluster() -> Iterator[SimulatedCluster]:
    # Our CRDs come with the cluster, as on a cluster the chart was installed on.
    crds = load_documents(sorted((REPO / "config" / "crd").glob("*.yaml")))
    with SimulatedCluster(DRA_CLUSTER, crds=crds) as sim:
        asyncio.run(_prepare(sim))
        yield sim


@pytest.fixture(scope="package")
def dra_operator(dra_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    """The operator, serving the GPUCluster sample created once it runs."""
    process = OperatorProcess(
        dra_cluster.kubeconfig, dra_cluster.workdir / "logs" / "gpu-operator.log"
    )
    process.start()
    try:
        asyncio.run(_published(dra_cluster))
        yield process
    finally:
        process.stop()


@pytest.fixture
async def dra_api(
    dra_cluster: SimulatedCluster, dra_operator: OperatorProcess
) -> AsyncIterator[Any]:
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        attach_logs(
            report, [item.funcargs.get("dra_operator")], item.funcargs.get("dra_cluster"), lines=60
        )
    return report  # type: ignore[return-value]
