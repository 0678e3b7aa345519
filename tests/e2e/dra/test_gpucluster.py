"""The GPUCluster as an admin meets it: the reference's sample on a simulated cluster with
the operator running reaches ready; a ClusterPolicy created after it is refused and tears
nothing down; deleting it waits for the claims allocated on its GPUs. (Runs after
`test_dra.py`, whose claims and slices come from the stack this GPUCluster renders; the
deletion test goes last, as it removes the stack.)"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from gpusim import ANNOTATION_MIG_APPLIED, DRA_DRIVER, DRA_PLUGIN_APP, DRA_POLICY, SimulatedCluster
from tests.e2e.dra._api import SLEEPER, claim_template, create, gpu_slices
from tests.e2e.dra.conftest import GPUCLUSTER, sample
from tests.e2e.operator._harness import NAMESPACE, REPO
from tests.e2e.sim._kube import call
from tests.polling import eventually

pytestmark = pytest.mark.e2e

NAME = sample()["metadata"]["name"]
POLICY = ("nvidia.com", "v1", "clusterpolicies")


async def _gpu_cluster(api: Any) -> dict[str, Any]:
    found: dict[str, Any] = await call(
        client.CustomObjectsApi(api).get_cluster_custom_object, *GPUCLUSTER, NAME
    )
    return found


def _ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


async def _plugin_daemonset(api: Any) -> dict[str, Any]:
    found: dict[str, Any] = await call(
        client.AppsV1Api(api).read_namespaced_daemon_set, DRA_PLUGIN_APP, NAMESPACE
    )
    return found


async def test_the_references_sample_reaches_ready_with_the_operators_stack(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    """Ready once the DRA validation has passed on every GPU node: the node all in MIG
    mode publishes no whole GPU for its validator to claim, and holds the state until it
    leaves MIG mode."""
    mig_node = dra_cluster.gpu_nodes[1]
    obj = await _gpu_cluster(dra_api)
    assert obj["status"]["state"] == "notReady"
    assert "state-dra-validation" in _ready_condition(obj)["message"]
    annotations = {ANNOTATION_MIG_APPLIED: "all-disabled"}
    await call(
        client.CoreV1Api(dra_api).patch_node, mig_node, {"metadata": {"annotations": annotations}}
    )
    last: dict[str, Any] = {}

    async def ready() -> bool:
        obj = await _gpu_cluster(dra_api)
        last.update(obj.get("status") or {})
        return last.get("state") == "ready"

    try:
        await eventually(ready, "the GPUCluster ready", 180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its status said last: {last}") from None
    assert last["namespace"] == NAMESPACE
    # Every GPU node publishes through the operator's kubelet-plugin DaemonSet, its writes
    # let through by the operator's admission policy.
    plugin = await _plugin_daemonset(dra_api)
    assert [o["kind"] for o in plugin["metadata"]["ownerReferences"]] == ["GPUCluster"]
    assert plugin["status"]["numberReady"] == len(dra_cluster.gpu_nodes)
    assert set(await gpu_slices(dra_api)) == set(dra_cluster.gpu_nodes)
    # The exporter runs on every GPU node with no RuntimeClass, its GPUs claimed.
    exporter = await call(
        client.AppsV1Api(dra_api).read_namespaced_daemon_set, "nvidia-dcgm-exporter", NAMESPACE
    )
    assert exporter["status"]["numberReady"] == len(dra_cluster.gpu_nodes)
    assert "runtimeClassName" not in exporter["spec"]["template"]["spec"]
    admission = client.AdmissionregistrationV1Api(dra_api)
    policy = await call(admission.read_validating_admission_policy, DRA_POLICY)
    assert [o["kind"] for o in policy["metadata"]["ownerReferences"]] == ["GPUCluster"]
    device_classes = await call(client.ResourceV1Api(dra_api).list_device_class)
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= {
        d["metadata"]["name"] for d in device_classes["items"]
    }


async def test_a_clusterpolicy_created_after_it_is_refused_and_nothing_torn_down(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    custom = client.CustomObjectsApi(dra_api)
    plugin_before = await _plugin_daemonset(dra_api)
    minimal = REPO / "config" / "samples" / "nvidia_v1_clusterpolicy_minimal.yaml"
    policy = yaml.safe_load(minimal.read_text())
    await call(custom.create_cluster_custom_object, *POLICY, policy)
    name = policy["metadata"]["name"]
    try:

        async def refused() -> dict[str, Any] | None:
            found = await call(custom.get_cluster_custom_object, *POLICY, name)
            condition = _ready_condition(found)
            return condition if condition.get("reason") == "GPUClusterExists" else None

        condition = await eventually(refused, "the ClusterPolicy to be refused")
        assert f"GPUCluster {NAME}" in condition["message"], condition
        obj = await _gpu_cluster(dra_api)
        assert obj["status"]["state"] == "ready"
        plugin = await _plugin_daemonset(dra_api)
        assert plugin["metadata"]["uid"] == plugin_before["metadata"]["uid"]
        assert set(await gpu_slices(dra_api)) == set(dra_cluster.gpu_nodes)
        listed = await call(client.AppsV1Api(dra_api).list_namespaced_daemon_set, NAMESPACE)
        names = {d["metadata"]["name"] for d in listed["items"]}
        assert "nvidia-device-plugin-daemonset" not in names, names
    finally:
        await call(custom.delete_cluster_custom_object, *POLICY, name)


async def test_deleting_it_waits_for_an_allocated_claim_and_names_it(
    dra_api: Any, namespace: str
) -> None:
    template = claim_template("held-gpu")
    template["metadata"]["namespace"] = namespace
    await create(dra_api, template)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "holder", "namespace": namespace},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "held-gpu"}],
            "containers": [
                {"name": "c", "image": SLEEPER, "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }
    await create(dra_api, pod)
    core = client.CoreV1Api(dra_api)

    async def claim_of_running_pod() -> str | None:
        found = await call(core.read_namespaced_pod, "holder", namespace)
        if (found.get("status") or {}).get("phase") != "Running":
            return None
        return str(found["status"]["resourceClaimStatuses"][0]["resourceClaimName"])

    claim = await eventually(claim_of_running_pod, "the claim holder Running")
    custom = client.CustomObjectsApi(dra_api)
    await call(custom.delete_cluster_custom_object, *GPUCLUSTER, NAME)

    async def waiting() -> dict[str, Any] | None:
        condition = _ready_condition(await _gpu_cluster(dra_api))
        return condition if condition.get("reason") == "ClaimsAllocated" else None

    condition = await eventually(waiting, "the GPUCluster to name the claim holding it")
    assert f"{namespace}/{claim}" in condition["message"], condition
    # Still there, and so is the driver the claim's device needs.
    assert (await _gpu_cluster(dra_api))["metadata"].get("deletionTimestamp")
    assert (await _plugin_daemonset(dra_api))["status"]["numberReady"] > 0
    assert any(
        s["spec"]["driver"] == DRA_DRIVER
        for found in (await gpu_slices(dra_api)).values()
        for s in found
    )
    await call(core.delete_namespaced_pod, "holder", namespace, grace_period_seconds=0)

    async def gone() -> bool:
        listed = await call(custom.list_cluster_custom_object, *GPUCLUSTER)
        return not listed["items"]

    await eventually(gone, "the GPUCluster to go once its claim is released", 120)
