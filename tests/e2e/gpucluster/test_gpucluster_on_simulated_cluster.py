"""The operator's GPUCluster controller on a simulated cluster that speaks DRA: the
reference's sample brings the kubelet plugin to every GPU node (which then publishes its
GPUs as a ResourceSlice), the DRA validator's pod claims a GPU of its own node and runs,
and the GPUCluster reaches `ready`.

The sample's DCGM exporter is switched off here: rendered as under a ClusterPolicy, its pods
name the `nvidia` RuntimeClass, which only the device-plugin stack makes, so the API server
refuses them on a cluster that runs the DRA stack alone (see the README's "Not yet")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from gpusim import (
    ANNOTATION_HOST_DRIVER,
    ClusterConfig,
    SimulatedCluster,
    apply_crds,
    load_documents,
)
from tests.e2e.dra._api import gpu_slices
from tests.e2e.operator._harness import NAMESPACE, REPO, OperatorProcess
from tests.e2e.sim._kube import call
from tests.polling import eventually

pytestmark = pytest.mark.e2e

CLUSTER = ClusterConfig(gpu_nodes=2, cpu_nodes=1, gpus_per_node=2)
HOST_DRIVER = "580.95.05"
SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"


async def _prepare(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        core = client.CoreV1Api(api)
        await call(core.create_namespace, {"metadata": {"name": NAMESPACE}})
        for name in sim.gpu_nodes:
            body = {"metadata": {"annotations": {ANNOTATION_HOST_DRIVER: HOST_DRIVER}}}
            await call(core.patch_node, name, body)


@pytest.fixture(scope="module")
def gpucluster_sim() -> Iterator[tuple[SimulatedCluster, OperatorProcess]]:
    crds = load_documents(sorted((REPO / "config" / "crd").glob("*.yaml")))
    with SimulatedCluster(CLUSTER, crds=crds) as sim:
        asyncio.run(_prepare(sim))
        process = OperatorProcess(sim.kubeconfig, sim.workdir / "logs" / "gpu-operator.log")
        process.start()
        try:
            yield sim, process
        finally:
            process.stop()


@pytest.fixture
async def kube(
    gpucluster_sim: tuple[SimulatedCluster, OperatorProcess],
) -> AsyncIterator[Any]:
    async with gpucluster_sim[0].api_client() as api:
        yield api


def _sample() -> dict[str, Any]:
    sample: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    sample["spec"]["dcgmExporter"]["enabled"] = False
    return sample


async def _gpu_cluster(kube: Any) -> Any:
    return await call(
        client.CustomObjectsApi(kube).get_cluster_custom_object,
        "nvidia.com",
        "v1alpha1",
        "gpuclusters",
        "gpu-cluster",
    )


async def test_the_references_sample_brings_the_dra_stack_and_goes_ready(
    gpucluster_sim: tuple[SimulatedCluster, OperatorProcess], kube: Any
) -> None:
    sim, _ = gpucluster_sim
    await call(
        client.CustomObjectsApi(kube).create_cluster_custom_object,
        "nvidia.com",
        "v1alpha1",
        "gpuclusters",
        _sample(),
    )

    async def published() -> bool:
        return set(await gpu_slices(kube)) == set(sim.gpu_nodes)

    await eventually(published, "every GPU node to publish its ResourceSlice", 180)

    async def ready() -> bool:
        status = (await _gpu_cluster(kube)).get("status") or {}
        return status.get("state") == "ready"

    try:
        await eventually(ready, "the GPUCluster to be ready", 240)
    except AssertionError as exc:
        status = (await _gpu_cluster(kube)).get("status")
        raise AssertionError(f"{exc}; its status: {status}") from None
    # The validator ran on every GPU node, each on a GPU of its own node.
    pods = await call(
        client.CoreV1Api(kube).list_namespaced_pod,
        NAMESPACE,
        label_selector="app.kubernetes.io/name=nvidia-dra-validator",
    )
    items = pods["items"] if isinstance(pods, dict) else [p.to_dict() for p in pods.items]
    running = {p["spec"]["nodeName"] for p in items if p["status"]["phase"] == "Running"}
    assert running == set(sim.gpu_nodes)
    claims = await call(client.ResourceV1Api(kube).list_namespaced_resource_claim, NAMESPACE)
    claim_items = (
        claims["items"] if isinstance(claims, dict) else [c.to_dict() for c in claims.items]
    )
    allocated = [c for c in claim_items if (c.get("status") or {}).get("allocation")]
    assert len(allocated) == len(sim.gpu_nodes)
    for claim in allocated:
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.nvidia.com"
        assert result["pool"] in sim.gpu_nodes
