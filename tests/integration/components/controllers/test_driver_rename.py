"""A driver DaemonSet the operator renames (upgraded from a version that named it after
the OS, or the NVIDIADriver's after the NVIDIADriver, or a cluster going from several OS
releases to one) hands its pods to the one that replaces it: they keep running, now
selected by the new DaemonSet, and the old one goes without taking them along."""

from __future__ import annotations

from typing import Any

import pytest

from components.api import DRIVER_KERNEL_PIN_LABEL
from components.controllers._driver_crd import short_hash
from reconciler import Object, labels_of, owner_reference
from reconciler.kinds import POD
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    DAEMONSET,
    NVIDIA_DRIVER,
    Cluster,
)
from tests.polling import eventually

pytestmark = pytest.mark.integration

OLD = "nvidia-driver-daemonset-ubuntu22.04"
NEW = "nvidia-driver-daemonset"
COMPONENT = "nvidia.com/gpu-operator.component"


def _old_daemonset(namespace: str, owner: dict[str, object], name: str = OLD) -> dict[str, object]:
    """The driver DaemonSet as our previous version rendered it: named after the OS (and
    the NVIDIADriver), its pods labelled `app=<its name>`."""
    labels = {
        "app": name,
        "app.kubernetes.io/component": "nvidia-driver",
        "app.kubernetes.io/managed-by": "gpu-operator",
        COMPONENT: "state-driver",
        "nvidia.com/node.os-version": "ubuntu22.04",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {
                        "nvidia.com/gpu.deploy.driver": "true",
                        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
                    },
                    "containers": [{"name": "nvidia-driver-ctr", "image": "driver:old"}],
                },
            },
        },
    }


async def test_upgrading_from_os_named_daemonsets_keeps_the_driver_pods(cluster: Cluster) -> None:
    node, owner = await _node_and_policy(cluster)
    # Stop the operator from seeing the new one as the only one: as after an upgrade,
    # the old DaemonSet and its running pod are there too.
    await _hand_over(cluster, node, owner, OLD, NEW)


async def test_renamed_nvidia_driver_daemonset_keeps_the_driver_pods(cluster: Cluster) -> None:
    """Upgraded from a version that named an NVIDIADriver's DaemonSet
    `nvidia-gpu-driver-<name>-<os>`: the reference's `nvidia-gpu-driver-<os>-<hash>`
    takes its pods over."""
    node = await cluster.add_node("gpu-u1", kernel="5.15.0-105-generic")
    await cluster.create_policy("policy", {"driver": {"useNvidiaDriverCRD": True}})
    driver = await cluster.create_driver("default", {"default": True})
    new = f"nvidia-gpu-driver-ubuntu22.04-{short_hash(driver['metadata']['uid'])}"
    await eventually(lambda: _exists(cluster, new), "the NVIDIADriver's DaemonSet")
    live = await cluster.get(NVIDIA_DRIVER, driver["metadata"]["name"])
    assert live is not None
    old = f"nvidia-gpu-driver-{driver['metadata']['name']}-ubuntu22.04"
    await _hand_over(cluster, node, owner_reference(live), old, new)


async def test_a_driver_pod_not_yet_bound_to_a_node_stops_the_hand_over(cluster: Cluster) -> None:
    """The operator caches only pods bound to a node. A pod of the old DaemonSet still
    waiting for its node has no new DaemonSet to go to: orphaned with its old labels it
    would start beside the new one's pod once bound. The old DaemonSet is deleted the usual
    way, and its bound pod is not relabelled."""
    node, owner = await _node_and_policy(cluster)
    old = await cluster.client.create(
        _old_daemonset(cluster.namespace, {**owner, "controller": False})
    )
    await cluster.client.create(_pod(cluster.namespace, node, old))
    waiting = _pod(cluster.namespace, node, old, name="driver-waiting")
    del waiting["spec"]["nodeName"]
    await cluster.client.create(waiting)
    await cluster.client.patch(
        DAEMONSET, OLD, {"metadata": {"ownerReferences": [owner]}}, namespace=cluster.namespace
    )

    await eventually(lambda: _gone(cluster, OLD), "the old DaemonSet deleted the usual way")
    bound = await cluster.get(POD, "driver-on-u1", cluster.namespace)
    assert bound is not None
    assert labels_of(bound).get("app") == OLD


async def test_a_driver_pod_on_a_node_its_daemonset_left_is_not_handed_over(
    cluster: Cluster,
) -> None:
    """The node's kernel pin moved off the old DaemonSet (precompiled drivers switched on
    with auto upgrade off pin every node at once), and the DaemonSet controller is removing
    its pod there. Handed over, that pod was adopted as an older revision that nothing
    would ever replace: the policy said the driver not ready on the node for good. The old
    DaemonSet stays, its pod untouched, until the pod is gone; then it goes the usual way."""
    node, owner = await _node_and_policy(cluster)
    left = _old_daemonset(cluster.namespace, {**owner, "controller": False})
    left["spec"]["template"]["spec"]["nodeSelector"][DRIVER_KERNEL_PIN_LABEL] = "5.4.0-1-nvidia"
    old = await cluster.client.create(left)
    await cluster.client.create(_pod(cluster.namespace, node, old))
    await cluster.client.patch(
        DAEMONSET, OLD, {"metadata": {"ownerReferences": [owner]}}, namespace=cluster.namespace
    )
    await cluster.settle()

    pod = await cluster.get(POD, "driver-on-u1", cluster.namespace)
    assert pod is not None
    assert labels_of(pod).get("app") == OLD  # not relabelled for the new DaemonSet
    old_now = await cluster.get(DAEMONSET, OLD, cluster.namespace)
    assert old_now is not None
    assert not old_now["metadata"].get("deletionTimestamp")

    await cluster.client.delete(POD, "driver-on-u1", namespace=cluster.namespace)

    await eventually(lambda: _gone(cluster, OLD), "the old DaemonSet deleted once its pod is gone")


async def _hand_over(
    cluster: Cluster, node: str, owner: dict[str, object], old_name: str, new_name: str
) -> None:
    # Stop the operator from seeing the new one as the only one: as after an upgrade,
    # the old DaemonSet and its running pod are there too. The old one becomes ours only
    # once its pod exists, as it would have been all along (no cluster has the one
    # without the other for longer than a scheduling round).
    not_yet = {**owner, "controller": False}
    old = await cluster.client.create(_old_daemonset(cluster.namespace, not_yet, old_name))
    pod = await cluster.client.create(_pod(cluster.namespace, node, old))
    await cluster.client.patch(
        DAEMONSET,
        old_name,
        {"metadata": {"ownerReferences": [owner]}},
        namespace=cluster.namespace,
    )

    async def handed_over() -> bool:
        ds = await cluster.get(DAEMONSET, old_name, cluster.namespace)
        going = ds is None or bool(ds["metadata"].get("deletionTimestamp"))
        live_pod = await cluster.get(POD, "driver-on-u1", cluster.namespace)
        return going and live_pod is not None and labels_of(live_pod).get("app") == new_name

    await eventually(handed_over, "the old DaemonSet to go and its pod to be handed over")
    live_pod = await cluster.get(POD, "driver-on-u1", cluster.namespace)
    assert live_pod is not None
    assert live_pod["metadata"]["uid"] == pod["metadata"]["uid"]  # the same pod: not killed
    old_ds = await cluster.get(DAEMONSET, old_name, cluster.namespace)
    if old_ds is not None:  # no garbage collector here to finish the orphaning delete
        assert "orphan" in old_ds["metadata"].get("finalizers", [])
    new_ds = await cluster.get(DAEMONSET, new_name, cluster.namespace)
    assert new_ds is not None
    selector = new_ds["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels_of(live_pod).items()  # the new one adopts it


def _pod(namespace: str, node: str, owner: Object, name: str = "driver-on-u1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(owner["spec"]["template"]["metadata"]["labels"]),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "nvidia-driver-ctr", "image": "driver:old"}],
        },
    }


async def _exists(cluster: Cluster, name: str) -> bool:
    return await cluster.get(DAEMONSET, name, cluster.namespace) is not None


async def _gone(cluster: Cluster, name: str) -> bool:
    """Deleted, not merely being deleted: an orphaning delete would leave it with the
    `orphan` finalizer (no garbage collector here to finish it)."""
    return await cluster.get(DAEMONSET, name, cluster.namespace) is None


async def _node_and_policy(cluster: Cluster) -> tuple[str, dict[str, object]]:
    """A GPU node and the owner reference of a policy whose driver DaemonSet exists."""
    node = await cluster.add_node("gpu-u1", kernel="5.15.0-105-generic")
    policy = await cluster.create_policy("policy")
    await eventually(lambda: _exists(cluster, NEW), "the driver DaemonSet")
    live = await cluster.get(CLUSTER_POLICY, policy["metadata"]["name"])
    assert live is not None
    return node, owner_reference(live)
