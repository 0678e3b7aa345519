"""NVIDIA's DRA stack on the simulated cluster: the kubelet plugin publishes each GPU node's
devices as a ResourceSlice under its own identity, and the real kube-scheduler allocates
ResourceClaims against them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from gpusim import (
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_APPLIED,
    DRA_DEPLOY_LABEL,
    DRA_DRIVER,
    DRA_NAMESPACE,
    DRA_PLUGIN_ACCOUNT,
    DRA_PLUGIN_APP,
    DRA_POLICY,
    DRA_VALIDATOR_APP,
    SimulatedCluster,
)
from tests.e2e.dra._api import SLEEPER, claim_template, create, gpu_slices
from tests.e2e.dra.conftest import HOST_DRIVER, L4_NODE
from tests.e2e.sim._kube import call
from tests.polling import eventually

pytestmark = pytest.mark.e2e


def _attributes(device: dict[str, Any]) -> dict[str, Any]:
    return {k: next(iter(v.values())) for k, v in device["attributes"].items()}


def _claim_pod(name: str, template: str, containers: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {"name": f"c{n}", "image": SLEEPER, "resources": {"claims": [{"name": "gpu"}]}}
                for n in range(containers)
            ],
        },
    }


async def _run_with_claim(
    api: Any, namespace: str, name: str, template: dict[str, Any], containers: int = 1
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Create the template and a pod claiming from it; the Running pod and its claim."""
    template["metadata"]["namespace"] = namespace
    await create(api, template)
    pod = _claim_pod(name, template["metadata"]["name"], containers)
    pod["metadata"]["namespace"] = namespace
    await create(api, pod)
    core = client.CoreV1Api(api)

    async def running() -> dict[str, Any] | None:
        found: dict[str, Any] = await call(core.read_namespaced_pod, name, namespace)
        return found if (found.get("status") or {}).get("phase") == "Running" else None

    found = await eventually(running, f"pod {name} Running")
    claim_name = found["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = await call(
        client.ResourceV1Api(api).read_namespaced_resource_claim, claim_name, namespace
    )
    return found, claim


def _allocated(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return list(claim["status"]["allocation"]["devices"]["results"])


async def _device(api: Any, node: str, device: str) -> dict[str, Any]:
    (found,) = (await gpu_slices(api))[node]
    return next(d for d in found["spec"]["devices"] if d["name"] == device)


async def test_every_gpu_node_publishes_its_gpus_as_a_slice(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    slices = await gpu_slices(dra_api)
    assert set(slices) == set(dra_cluster.gpu_nodes)
    assert L4_NODE in slices
    whole, mig = dra_cluster.gpu_nodes[:2]
    by_node = {node: found[0]["spec"] for node, found in slices.items() if len(found) == 1}
    assert set(by_node) == set(slices), "one slice per node"
    for node, spec in by_node.items():
        assert spec["pool"]["name"] == node
        assert spec["driver"] == DRA_DRIVER
    # Two whole H100s, with what the real plugin publishes for each.
    h100 = by_node[whole]["devices"]
    assert [d["name"] for d in h100] == ["gpu-0", "gpu-1"]
    first = _attributes(h100[0])
    assert first["type"] == "gpu"
    assert first["productName"] == "NVIDIA H100 80GB HBM3"
    assert first["architecture"] == "Hopper"
    assert first["cudaComputeCapability"] == "9.0.0"
    assert first["driverVersion"] == "580.95.5"
    assert first["uuid"].startswith("GPU-")
    assert h100[0]["capacity"]["memory"]["value"] == "81559Mi"
    assert first["uuid"] != _attributes(h100[1])["uuid"]
    # The node left in MIG mode: its MIG instances, never the GPUs themselves.
    mig_devices = by_node[mig]["devices"]
    assert {_attributes(d)["type"] for d in mig_devices} == {"mig"}
    profiles = sorted(_attributes(d)["profile"] for d in mig_devices)
    assert profiles == sorted(["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"] * 2)
    # The L4: another product, another architecture.
    (l4,) = by_node[L4_NODE]["devices"]
    assert _attributes(l4)["productName"] == "NVIDIA L4"
    assert _attributes(l4)["architecture"] == "Ada Lovelace"


async def test_a_claim_from_a_template_gets_a_device_of_the_pods_node(
    dra_api: Any, namespace: str
) -> None:
    pod, claim = await _run_with_claim(dra_api, namespace, "claims-one", claim_template("one-gpu"))
    (result,) = _allocated(claim)
    node = pod["spec"]["nodeName"]
    assert result["driver"] == DRA_DRIVER
    assert result["pool"] == node
    device = await _device(dra_api, node, result["device"])
    assert _attributes(device)["type"] == "gpu"
    assert claim["status"]["reservedFor"][0]["name"] == "claims-one"


async def test_a_cel_selector_picks_the_matching_product(
    dra_cluster: SimulatedCluster, dra_api: Any, namespace: str
) -> None:
    by_memory = claim_template(
        "big-gpu", cel=f"device.capacity['{DRA_DRIVER}'].memory.compareTo(quantity('70Gi')) >= 0"
    )
    pod, claim = await _run_with_claim(dra_api, namespace, "claims-big", by_memory)
    assert pod["spec"]["nodeName"] == dra_cluster.gpu_nodes[0]  # the whole H100s
    by_name = claim_template(
        "l4", cel=f"device.attributes['{DRA_DRIVER}'].productName == 'NVIDIA L4'"
    )
    pod, claim = await _run_with_claim(dra_api, namespace, "claims-l4", by_name)
    assert pod["spec"]["nodeName"] == L4_NODE
    by_profile = claim_template(
        "small-mig", "mig.nvidia.com", f"device.attributes['{DRA_DRIVER}'].profile == '2g.20gb'"
    )
    pod, claim = await _run_with_claim(dra_api, namespace, "claims-mig", by_profile)
    assert pod["spec"]["nodeName"] == dra_cluster.gpu_nodes[1]
    (result,) = _allocated(claim)
    device = await _device(dra_api, pod["spec"]["nodeName"], result["device"])
    assert _attributes(device)["profile"] == "2g.20gb"


async def test_a_claim_no_device_matches_stays_pending_with_the_schedulers_reason(
    dra_api: Any, namespace: str
) -> None:
    huge = claim_template(
        "huge-gpu", cel=f"device.capacity['{DRA_DRIVER}'].memory.compareTo(quantity('100Gi')) >= 0"
    )
    huge["metadata"]["namespace"] = namespace
    await create(dra_api, huge)
    pod = _claim_pod("claims-huge", "huge-gpu")
    pod["metadata"]["namespace"] = namespace
    await create(dra_api, pod)
    core = client.CoreV1Api(dra_api)

    async def unschedulable() -> dict[str, Any] | None:
        found = await call(core.read_namespaced_pod, "claims-huge", namespace)
        for condition in (found.get("status") or {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return dict(condition)
        return None

    condition = await eventually(unschedulable, "the scheduler to give up on claims-huge")
    assert "cannot allocate all claims" in condition["message"]
    found = await call(core.read_namespaced_pod, "claims-huge", namespace)
    assert found["status"]["phase"] == "Pending"
    assert not found["spec"].get("nodeName")


async def test_two_containers_share_one_claim(dra_api: Any, namespace: str) -> None:
    pod, claim = await _run_with_claim(
        dra_api, namespace, "claims-shared", claim_template("shared-gpu"), containers=2
    )
    assert [c["resources"]["claims"] for c in pod["spec"]["containers"]] == [
        [{"name": "gpu"}],
        [{"name": "gpu"}],
    ]
    assert len(pod["status"]["resourceClaimStatuses"]) == 1
    assert len(_allocated(claim)) == 1
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["claims-shared"]


async def _plugin_pod(api: Any, node: str) -> dict[str, Any]:
    listed = await call(
        client.CoreV1Api(api).list_namespaced_pod,
        DRA_NAMESPACE,
        label_selector=f"app={DRA_PLUGIN_APP}",
        field_selector=f"spec.nodeName={node}",
    )
    (pod,) = listed["items"]
    return dict(pod)


async def test_a_plugin_may_not_write_another_nodes_slice(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    own, other = dra_cluster.gpu_nodes[:2]
    pod = await _plugin_pod(dra_api, own)
    request = {
        "spec": {
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        }
    }
    answer = await call(
        client.CoreV1Api(dra_api).create_namespaced_service_account_token,
        DRA_PLUGIN_ACCOUNT,
        DRA_NAMESPACE,
        request,
    )
    token = answer["status"]["token"]
    (genuine,) = (await gpu_slices(dra_api))[other]
    forged = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{other}-forged"},
        "spec": genuine["spec"],
    }
    config = client.Configuration()
    config.host = dra_api.configuration.host
    config.ssl_ca_cert = dra_api.configuration.ssl_ca_cert
    config.api_key = {"BearerToken": token}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(config) as as_plugin:
        resource = client.ResourceV1Api(as_plugin)
        response = await resource.create_resource_slice(forged, _preload_content=False)
        body = await response.json()
        response.release()
    # A policy's refusal without a `reason` is `Invalid` (422), as the reference's is.
    assert response.status == 422, body["message"]
    assert f"ValidatingAdmissionPolicy '{DRA_POLICY}'" in body["message"]
    assert f"the DRA kubelet plugin on node '{own}' may write only" in body["message"]
    assert [s["metadata"]["name"] for s in (await gpu_slices(dra_api))[other]] == [
        genuine["metadata"]["name"]
    ]


async def test_the_slice_goes_with_the_plugin_pod(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    node = L4_NODE
    core = client.CoreV1Api(dra_api)
    # An admin turns the plugin off on a node as the reference has it: its deploy label
    # "false" (the operator leaves that alone).
    await call(core.patch_node, node, {"metadata": {"labels": {DRA_DEPLOY_LABEL: "false"}}})
    try:

        async def gone() -> bool:
            return node not in await gpu_slices(dra_api)

        await eventually(gone, f"the slice of {node} to go with its plugin pod")
    finally:
        await call(core.patch_node, node, {"metadata": {"labels": {DRA_DEPLOY_LABEL: "true"}}})

    async def back() -> bool:
        return node in await gpu_slices(dra_api)

    await eventually(back, f"the slice of {node} to come back with a new plugin pod")


async def test_the_slice_follows_the_mig_mode_and_the_driver(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    node = dra_cluster.gpu_nodes[1]
    core = client.CoreV1Api(dra_api)
    (before,) = (await gpu_slices(dra_api))[node]

    async def annotate(key: str, value: str | None) -> None:
        await call(core.patch_node, node, {"metadata": {"annotations": {key: value}}})

    async def profiles() -> list[str]:
        found = (await gpu_slices(dra_api)).get(node) or []
        return sorted(_attributes(d)["profile"] for s in found for d in s["spec"]["devices"])

    await annotate(ANNOTATION_MIG_APPLIED, "all-3g.40gb")
    try:

        async def repartitioned() -> bool:
            return await profiles() == ["3g.40gb"] * 4

        await eventually(repartitioned, f"the slice of {node} to list its new MIG instances")
        (after,) = (await gpu_slices(dra_api))[node]
        # Updated in place by the plugin (the policy lets it write its own node's slice).
        assert after["metadata"]["name"] == before["metadata"]["name"]
        assert after["spec"]["pool"]["generation"] > before["spec"]["pool"]["generation"]
    finally:
        await annotate(ANNOTATION_MIG_APPLIED, "all-balanced")
    await annotate(ANNOTATION_HOST_DRIVER, None)
    try:

        async def unpublished() -> bool:
            return node not in await gpu_slices(dra_api)

        await eventually(unpublished, f"the slice of {node} to go with its driver")
    finally:
        await annotate(ANNOTATION_HOST_DRIVER, HOST_DRIVER)

    async def balanced() -> bool:
        return len(await profiles()) == 8

    await eventually(balanced, f"the slice of {node} back with the balanced layout")


async def test_the_dra_validation_runs_on_every_node_with_whole_gpus(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    """Its claim asks the `gpu.nvidia.com` class (whole GPUs) for one device with admin
    access: where every GPU is in MIG mode no such device is published, and it waits."""
    whole, mig = dra_cluster.gpu_nodes[:2]
    core = client.CoreV1Api(dra_api)
    resource = client.ResourceV1Api(dra_api)

    async def validators() -> list[dict[str, Any]]:
        listed = await call(
            core.list_namespaced_pod, DRA_NAMESPACE, label_selector=f"app={DRA_VALIDATOR_APP}"
        )
        return list(listed["items"])

    async def running_where_whole_gpus() -> list[dict[str, Any]] | None:
        found = [p for p in await validators() if p["status"].get("phase") == "Running"]
        return found if {p["spec"]["nodeName"] for p in found} == {whole, L4_NODE} else None

    running = await eventually(running_where_whole_gpus, "a Running DRA validator per node")
    for pod in running:
        claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = await call(resource.read_namespaced_resource_claim, claim_name, DRA_NAMESPACE)
        (result,) = _allocated(claim)
        assert result["pool"] == pod["spec"]["nodeName"]
        assert result.get("adminAccess") is True
    (waiting,) = [p for p in await validators() if p["status"].get("phase") != "Running"]
    (scheduled,) = [c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["reason"] == "Unschedulable"
    assert "1 cannot allocate all claims" in scheduled["message"]
    # The DaemonSet controller pins each of its pods to its node by a field selector.
    terms = waiting["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [mig]
