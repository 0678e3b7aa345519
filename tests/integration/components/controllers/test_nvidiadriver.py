"""NVIDIADriver resources on a real API server: driver DaemonSets per node pool, conflicts
as conditions, and the hand-over to and from the ClusterPolicy's own driver."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers._driver_crd import short_hash
from reconciler import GVK
from tests.integration.components.controllers.conftest import (
    NVIDIA_DRIVER,
    OS_ID,
    Cluster,
)
from tests.polling import eventually

pytestmark = pytest.mark.integration

CRD_MODE = {"driver": {"useNvidiaDriverCRD": True}}


async def nodes(cluster: Cluster) -> None:
    await cluster.add_node("gpu-u1")
    await cluster.add_node("gpu-u2", kernel="5.15.0-113-generic")
    await cluster.add_node("gpu-r1", os_id="rhel", os_version="9.4", kernel="5.14.0-427.el9_4")


async def state(cluster: Cluster, name: str, want: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        status = await cluster.status(name, NVIDIA_DRIVER)
        return status if status.get("state") == want else None

    result: dict[str, Any] = await eventually(check, f"NVIDIADriver {name} to be {want}")
    return result


def driver_daemonsets(daemonsets: dict[str, Any]) -> dict[str, Any]:
    return {
        n: d
        for n, d in daemonsets.items()
        if d["metadata"]["labels"].get("nvidia.com/gpu-operator.component") == "state-driver"
    }


async def test_pools_get_their_own_driver_daemonsets(cluster: Cluster) -> None:
    await nodes(cluster)
    policy = (await cluster.create_policy("policy", CRD_MODE))["metadata"]["name"]
    rhel = await cluster.create_driver(
        "rhel", {"nodeSelector": {OS_ID: "rhel"}, "version": "580.1"}
    )
    default = await cluster.create_driver("default", {"default": True})
    await state(cluster, rhel["metadata"]["name"], "ready")
    await state(cluster, default["metadata"]["name"], "ready")
    await cluster.settle()

    drivers = driver_daemonsets(await cluster.daemonsets())
    # Named as the reference names them: type, OS, a hash of the NVIDIADriver's UID.
    rhel_ds = drivers.pop(f"nvidia-gpu-driver-rhel9.4-{short_hash(rhel['metadata']['uid'])}")
    default_ds = drivers.pop(
        f"nvidia-gpu-driver-ubuntu22.04-{short_hash(default['metadata']['uid'])}"
    )
    assert drivers == {}  # and no ClusterPolicy driver DaemonSet
    assert rhel_ds["metadata"]["ownerReferences"][0]["uid"] == rhel["metadata"]["uid"]
    rhel_pod = rhel_ds["spec"]["template"]["spec"]
    assert rhel_pod["nodeSelector"][OS_ID] == "rhel"
    assert rhel_pod["containers"][0]["image"] == "nvcr.io/nvidia/driver:580.1-rhel9"
    rhel_account = f"nvidia-gpu-driver-{cluster.name('rhel')}-rhel9.4"
    assert rhel_pod["serviceAccountName"] == rhel_account
    # The default one keeps out of the rhel pool's nodes.
    terms = default_ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": OS_ID, "operator": "NotIn", "values": ["rhel"]}]}
    ]
    # Each NVIDIADriver's pods run under a ServiceAccount and RBAC of its own, per OS.
    account = await cluster.get(GVK("", "v1", "ServiceAccount"), rhel_account, cluster.namespace)
    assert account is not None
    assert account["metadata"]["ownerReferences"][0]["uid"] == rhel["metadata"]["uid"]
    binding = await cluster.get(
        GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"), rhel_account
    )
    assert binding is not None
    assert binding["roleRef"]["name"] == rhel_account
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": rhel_account, "namespace": cluster.namespace}
    ]
    # The startup-probe ConfigMap every driver pod reads stays the ClusterPolicy's.
    probe = await cluster.get(
        GVK("", "v1", "ConfigMap"), "nvidia-driver-startup-probe", cluster.namespace
    )
    assert probe is not None
    assert probe["metadata"]["ownerReferences"][0]["name"] == policy
    status = await cluster.status(policy)
    driver = {c["name"]: c for c in status["components"]}["state-driver"]
    assert driver["state"] == "ready"
    await cluster.assert_second_reconcile_writes_nothing()


async def test_overlaps_and_second_defaults_are_conditions(cluster: Cluster) -> None:
    await nodes(cluster)
    await cluster.create_policy("policy", CRD_MODE)
    first = await cluster.create_driver("first", {"nodeSelector": {OS_ID: "rhel"}})
    await cluster.create_driver("base", {"default": True})
    await state(cluster, first["metadata"]["name"], "ready")
    overlap = (await cluster.create_driver("overlap", {"nodeSelector": {OS_ID: "rhel"}}))[
        "metadata"
    ]["name"]
    second_default = (await cluster.create_driver("base2", {"default": True}))["metadata"]["name"]

    await state(cluster, overlap, "notReady")
    cond = await cluster.condition(overlap, "Error", NVIDIA_DRIVER)
    assert cond["status"] == "True" and cond["reason"] == "ConflictingNodeSelector"
    assert cluster.name("gpu-r1") in cond["message"]
    assert first["metadata"]["name"] in cond["message"]
    await state(cluster, second_default, "notReady")
    cond = await cluster.condition(second_default, "Error", NVIDIA_DRIVER)
    assert cond["reason"] == "MultipleDefaults"
    await cluster.settle()
    owners = {
        ref["name"]
        for ds in driver_daemonsets(await cluster.daemonsets()).values()
        for ref in ds["metadata"].get("ownerReferences", [])
    }
    assert owners and not owners & {overlap, second_default}
    assert (await cluster.status(first["metadata"]["name"], NVIDIA_DRIVER))["state"] == "ready"


async def test_handing_the_driver_back_to_the_clusterpolicy(cluster: Cluster) -> None:
    await nodes(cluster)
    policy = (await cluster.create_policy("policy", CRD_MODE))["metadata"]["name"]
    default = (await cluster.create_driver("default", {"default": True}))["metadata"]["name"]
    await state(cluster, default, "ready")
    await cluster.patch_policy(policy, {"driver": {"useNvidiaDriverCRD": False}})

    async def handed_back() -> bool:
        names = set(driver_daemonsets(await cluster.daemonsets()))
        return names == {"nvidia-driver-daemonset-ubuntu22.04", "nvidia-driver-daemonset-rhel9.4"}

    await eventually(handed_back, "only the ClusterPolicy's driver DaemonSets")
    status = await state(cluster, default, "ignored")
    assert "useNvidiaDriverCRD" in status["conditions"][0]["message"]
