"""The GPUCluster controller on a real API server: the reference's sample creates the DRA
stack and goes ready (the DaemonSet controller's stand-in counts the DaemonSets, and the
test stands in for the Deployment controller), a GPUCluster and a ClusterPolicy refuse each
other in the order they came, and deleting a GPUCluster waits for a ResourceClaim allocated
on its GPUs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from components.controllers import _label_wait as label_wait_module
from reconciler import GVK, Object, Request
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    DAEMONSET,
    NAMESPACE,
    NVIDIA_DRIVER,
    REPO,
    Cluster,
)
from tests.integration.components.controllers.test_label_wait import labels_refused
from tests.polling import eventually

pytestmark = pytest.mark.integration

GPU_CLUSTER = GVK("nvidia.com", "v1alpha1", "GPUCluster")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
DEVICE_CLASS = GVK("resource.k8s.io", "v1", "DeviceClass")
CLAIM = GVK("resource.k8s.io", "v1", "ResourceClaim")
CLAIM_TEMPLATE = GVK("resource.k8s.io", "v1", "ResourceClaimTemplate")
VAP = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
VAP_BINDING = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding")
SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"
NAME = "gpu-cluster"
FINALIZER = "gpucluster.nvidia.com/dra-resourceclaim"
DRA_LABELS = {
    "nvidia.com/gpu.deploy.driver": "true",
    "nvidia.com/gpu.deploy.dra-driver": "true",
    "nvidia.com/gpu.deploy.dra-validator": "true",
    "nvidia.com/gpu.deploy.dcgm-dra": "true",
    "nvidia.com/gpu.deploy.dcgm-exporter-dra": "true",
}


def sample() -> Object:
    document: Object = yaml.safe_load(SAMPLE.read_text())
    return document


async def _gone(c: Cluster, gvk: GVK, name: str) -> bool:
    return await c.get(gvk, name) is None


@pytest.fixture
async def gpu_cluster(cluster: Cluster) -> AsyncIterator[Cluster]:
    """The cluster fixture, leaving no GPUCluster (nor its cluster-scoped objects) behind."""
    try:
        yield cluster
    finally:
        c = cluster.client
        with contextlib.suppress(Exception):
            obj = await cluster.get(GPU_CLUSTER, NAME)
            if obj is not None:
                await c.patch(GPU_CLUSTER, NAME, {"metadata": {"finalizers": None}})
                await c.delete(GPU_CLUSTER, NAME, missing_ok=True)
            for claim in await c.list_live(CLAIM, namespace="default"):
                await c.patch(
                    CLAIM,
                    claim["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                    namespace="default",
                )
                await c.delete(
                    CLAIM, claim["metadata"]["name"], namespace="default", missing_ok=True
                )
            for gvk in (DEVICE_CLASS, VAP, VAP_BINDING):
                for obj in await c.list_live(
                    gvk, label_selector="app.kubernetes.io/managed-by=gpu-operator"
                ):
                    await c.delete(gvk, obj["metadata"]["name"], missing_ok=True)
            await eventually(lambda: _gone(cluster, GPU_CLUSTER, NAME), "the GPUCluster to go", 30)


async def _deployment_ready(c: Cluster, name: str) -> bool:
    """What the Deployment controller and a kubelet would write: one replica ready."""
    obj = await c.get(DEPLOYMENT, name, c.namespace)
    if obj is None:
        return False
    await c.client.patch(
        DEPLOYMENT,
        name,
        {
            "status": {
                "observedGeneration": obj["metadata"]["generation"],
                "replicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 1,
            }
        },
        namespace=c.namespace,
        subresource="status",
    )
    return True


async def _versions(c: Cluster) -> dict[tuple[str, str], str]:
    """resourceVersion of the GPUCluster and everything of its stack."""
    managed = "app.kubernetes.io/managed-by=gpu-operator"
    objects = [*await c.owned(), *await c.client.list_live(GPU_CLUSTER)]
    for gvk in (DEVICE_CLASS, VAP, VAP_BINDING):
        objects += await c.client.list_live(gvk, label_selector=managed)
    for gvk in (DEPLOYMENT, CLAIM_TEMPLATE):
        objects += await c.client.list_live(gvk, namespace=c.namespace, label_selector=managed)
    return {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in objects}


async def _state(c: Cluster, gvk: GVK, name: str) -> Any:
    return (await c.status(name, gvk)).get("state")


async def test_the_references_sample_creates_the_dra_stack_and_goes_ready(
    gpu_cluster: Cluster,
) -> None:
    c = gpu_cluster
    node = await c.add_node("gpu")
    await c.add_node("cpu", gpu=False)
    await c.client.create(sample())

    async def stack_made() -> bool:
        daemonsets = await c.daemonsets()
        return {
            "nvidia-dra-driver-kubelet-plugin",
            "nvidia-dra-validator",
            "nvidia-dcgm-exporter",
        } <= set(daemonsets)

    await eventually(stack_made, "the DRA DaemonSets to be created")
    await eventually(lambda: _deployment_ready(c, "nvidia-dra-driver-controller"), "the Deployment")
    classes = {o["metadata"]["name"] for o in await c.client.list_live(DEVICE_CLASS)}
    assert {
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
    } <= classes
    policy = await c.get(VAP, "resourceslices-policy-nvidia-dra-driver")
    assert policy is not None
    assert (
        f"system:serviceaccount:{c.namespace}:nvidia-dra-driver-kubeletplugin"
        in (policy["spec"]["matchConditions"][0]["expression"])
    )
    assert await c.get(VAP_BINDING, "resourceslices-policy-nvidia-dra-driver") is not None
    assert await c.get(CLAIM_TEMPLATE, "nvidia-dra-validator-gpu", c.namespace) is not None
    plugin = (await c.daemonsets())["nvidia-dra-driver-kubelet-plugin"]
    owner = plugin["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("GPUCluster", NAME)
    # The GPU node carries the DRA stack's deploy labels, the CPU node none.
    labels = await c.node_labels(node, "nvidia.com/gpu.deploy.")
    assert labels == DRA_LABELS
    assert await c.node_labels(c.name("cpu"), "nvidia.com/gpu.deploy.") == {}
    namespace = await c.get(NAMESPACE, c.namespace)
    assert namespace is not None
    assert namespace["metadata"]["labels"]["resource.kubernetes.io/admin-access"] == "true"

    async def ready() -> bool:
        return await _state(c, GPU_CLUSTER, NAME) == "ready"

    await eventually(ready, "the GPUCluster to be ready", 60)
    status = await c.status(NAME, GPU_CLUSTER)
    assert status["namespace"] == c.namespace
    assert "components" not in status and "upgrade" not in status
    obj = await c.get(GPU_CLUSTER, NAME)
    assert obj is not None and FINALIZER in obj["metadata"]["finalizers"]
    assert c.metric("gpu_operator_reconciliation_status") == 1
    # A second reconcile finds nothing to do and writes nothing.
    await c.settle()
    before, events = await _versions(c), len(await c.events(NAME))
    assert c.operator.gpu_cluster is not None
    await c.operator.gpu_cluster.reconcile(Request("", NAME))
    await c.settle()
    assert await _versions(c) == before
    assert len(await c.events(NAME)) == events
    # A DaemonSet of ours deleted behind our back comes back.
    await c.client.delete(DAEMONSET, "nvidia-dra-validator", namespace=c.namespace)

    async def back() -> bool:
        return "nvidia-dra-validator" in await c.daemonsets()

    await eventually(back, "the validator DaemonSet to come back")
    # Compute domains switched off: their controller and DeviceClasses are pruned.
    await c.client.patch(
        GPU_CLUSTER, NAME, {"spec": {"draDriver": {"computeDomains": {"enabled": False}}}}
    )

    async def pruned() -> bool:
        return await c.get(DEPLOYMENT, "nvidia-dra-driver-controller", c.namespace) is None and (
            await c.get(DEVICE_CLASS, "compute-domain-daemon.nvidia.com") is None
        )

    await eventually(pruned, "the compute-domain objects to be pruned")


async def test_a_clusterpolicy_after_a_gpucluster_is_refused_and_nothing_torn_down(
    gpu_cluster: Cluster,
) -> None:
    c = gpu_cluster
    await c.add_node("gpu")
    await c.client.create(sample())

    async def acted_on() -> bool:
        return bool(await _state(c, GPU_CLUSTER, NAME))

    await eventually(acted_on, "the GPUCluster's status")
    before = set(await c.daemonsets())
    policy = await c.create_policy("policy")
    name = policy["metadata"]["name"]

    async def refused() -> bool:
        cond = await c.condition(name)
        return cond is not None and cond["reason"] == "GPUClusterExists"

    await eventually(refused, "the ClusterPolicy to be refused")
    cond = await c.condition(name)
    assert NAME in cond["message"]
    assert await _state(c, CLUSTER_POLICY, name) == "notReady"
    await c.settle()
    # Neither stack torn down, and the ClusterPolicy's own stack never made.
    assert set(await c.daemonsets()) == before
    assert "nvidia-device-plugin-daemonset" not in before
    assert (await c.condition(NAME, gvk=GPU_CLUSTER) or {}).get("reason") != "ClusterPolicyExists"


async def test_a_gpucluster_after_a_clusterpolicy_is_refused_and_nothing_torn_down(
    gpu_cluster: Cluster,
) -> None:
    c = gpu_cluster
    node = await c.add_node("gpu")
    policy = await c.create_policy("policy")
    name = policy["metadata"]["name"]

    async def acted_on() -> bool:
        return bool(await _state(c, CLUSTER_POLICY, name))

    await eventually(acted_on, "the ClusterPolicy's status")
    await c.settle()
    before = set(await c.daemonsets())
    labels = await c.node_labels(node, "nvidia.com/gpu.deploy.")
    await c.client.create(sample())

    async def refused() -> bool:
        cond = await c.condition(NAME, gvk=GPU_CLUSTER)
        return cond is not None and cond["reason"] == "ClusterPolicyExists"

    await eventually(refused, "the GPUCluster to be refused")
    cond = await c.condition(NAME, gvk=GPU_CLUSTER)
    assert name in cond["message"]
    assert await _state(c, GPU_CLUSTER, NAME) == "notReady"
    await c.settle()
    assert set(await c.daemonsets()) == before
    assert "nvidia-dra-driver-kubelet-plugin" not in before
    assert await c.node_labels(node, "nvidia.com/gpu.deploy.") == labels
    assert (await c.condition(name) or {}).get("reason") != "GPUClusterExists"
    # The refused GPUCluster holds no finalizer: it goes at once.
    await c.client.delete(GPU_CLUSTER, NAME)
    await eventually(lambda: _gone(c, GPU_CLUSTER, NAME), "the refused GPUCluster to go")


async def test_deleting_a_gpucluster_waits_for_a_claim_allocated_on_its_gpus(
    gpu_cluster: Cluster,
) -> None:
    c = gpu_cluster
    node = await c.add_node("gpu")
    await c.client.create(sample())

    async def held() -> bool:
        obj = await c.get(GPU_CLUSTER, NAME)
        return obj is not None and FINALIZER in (obj["metadata"].get("finalizers") or ())

    await eventually(held, "the GPUCluster's finalizer")
    claim = await c.client.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": c.name("claim"), "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            },
        }
    )
    claim_name = claim["metadata"]["name"]
    await c.client.patch(
        CLAIM,
        claim_name,
        {
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.nvidia.com",
                                "pool": node,
                                "device": "gpu-0",
                            }
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                }
            }
        },
        namespace="default",
        subresource="status",
    )
    await c.client.delete(GPU_CLUSTER, NAME)

    async def waiting() -> bool:
        cond = await c.condition(NAME, gvk=GPU_CLUSTER)
        return cond is not None and cond["reason"] == "ClaimsAllocated"

    await eventually(waiting, "the GPUCluster to say which claim holds it")
    cond = await c.condition(NAME, gvk=GPU_CLUSTER)
    assert f"default/{claim_name}" in cond["message"]
    events = await c.events(NAME)
    assert any(f"default/{claim_name}" in e.get("message", "") for e in events)
    await c.settle()
    assert await c.get(GPU_CLUSTER, NAME) is not None, "deleted while a claim was allocated"
    assert "nvidia-dra-driver-kubelet-plugin" in await c.daemonsets()
    await c.client.delete(CLAIM, claim_name, namespace="default")
    await eventually(lambda: _gone(c, GPU_CLUSTER, NAME), "the GPUCluster to be released", 30)


async def test_an_nvidiadriver_brings_the_driver_to_a_gpuclusters_nodes(
    gpu_cluster: Cluster,
) -> None:
    """A GPUCluster has no driver section: as in the reference, NVIDIADrivers serve its
    nodes (and a driver on the host does where there is none)."""
    c = gpu_cluster
    node = await c.add_node("gpu")
    await c.client.create(sample())
    driver = await c.create_driver("default", {"default": True})

    async def driver_daemonset() -> list[Object]:
        return [
            d
            for name, d in (await c.daemonsets()).items()
            if name.startswith("nvidia-gpu-driver-ubuntu22.04-")
        ]

    (ds,) = await eventually(driver_daemonset, "the NVIDIADriver's DaemonSet")
    assert ds["metadata"]["ownerReferences"][0]["name"] == driver["metadata"]["name"]
    selector = ds["spec"]["template"]["spec"]["nodeSelector"]
    assert selector["nvidia.com/gpu.deploy.driver"] == "true"
    assert (await c.node_labels(node, "nvidia.com/gpu.deploy."))[
        "nvidia.com/gpu.deploy.driver"
    ] == "true"

    async def in_use() -> bool:
        status = await c.status(driver["metadata"]["name"], NVIDIA_DRIVER)
        return status.get("state") not in (None, "ignored")

    await eventually(in_use, "the NVIDIADriver to be in use")


async def test_a_gpuclusters_daemonsets_wait_for_the_last_node_labels(
    gpu_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a ClusterPolicy's: created on a half-labelled cluster, the kubelet plugin's pods
    came 2-4x slower than on labelled nodes at 1,000 nodes (bench/scale.py --dra)."""
    c = gpu_cluster
    monkeypatch.setattr(label_wait_module, "LABEL_WAIT_SECONDS", 3600.0)
    labelled = await c.add_node("gpu-a")
    refused = await c.add_node("gpu-b")
    async with labels_refused(c, refused):
        await c.client.create(sample())

        async def prerequisites() -> bool:
            ours = await c.node_labels(labelled)
            account = await c.get(
                GVK("", "v1", "ServiceAccount"), "nvidia-dra-driver-kubeletplugin", c.namespace
            )
            return ours.get("nvidia.com/gpu.deploy.dra-driver") == "true" and account is not None

        await eventually(prerequisites, "one node labelled and the prerequisites written")
        assert await c.daemonsets() == {}, "no DaemonSet while a GPU node lacks its labels"

    # The refused node's labels land (a change of its own sends the label controller there
    # at once): the DaemonSets follow without waiting out the bound.
    await c.label_node(refused, {"example.com/touched": "yes"})

    async def plugin() -> bool:
        return "nvidia-dra-driver-kubelet-plugin" in await c.daemonsets()

    await eventually(plugin, "the kubelet plugin's DaemonSet once every GPU node is labelled")
    assert (await c.node_labels(refused)).get("nvidia.com/gpu.deploy.dra-driver") == "true"
