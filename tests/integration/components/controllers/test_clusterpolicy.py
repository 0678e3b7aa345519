"""The ClusterPolicy controller on a real API server: from a policy and nodes carrying NFD
labels to every operand object, the status, Events and metrics; and back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.api import ClusterPolicy
from components.controllers import HASH_ANNOTATION
from components.controllers import _readiness as unready_names_module
from components.controllers.clusterpolicy import _controller as clusterpolicy_module
from components.operands import OPERANDS, ClusterView, GPUNode
from reconciler import GVK, Object, owner_reference
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    DAEMONSET,
    NODE,
    Cluster,
    node_manifest,
    subset,
)
from tests.monitoring import SERVICE_MONITOR_CRD, SERVICE_MONITOR_CRD_NAME
from tests.polling import eventually

pytestmark = pytest.mark.integration

DEPLOY = "nvidia.com/gpu.deploy."
UBUNTU_KERNELS = ("5.15.0-105-generic", "5.15.0-113-generic")
RHEL_KERNEL = "5.14.0-427.13.1.el9_4.x86_64"
POD = GVK("", "v1", "Pod")


async def mixed_cluster(cluster: Cluster) -> dict[str, str]:
    """Two ubuntu 22.04 GPU nodes on two kernels, a MIG-capable rhel 9.4 GPU node, and a
    CPU-only node."""
    return {
        "u1": await cluster.add_node("gpu-u1", kernel=UBUNTU_KERNELS[0]),
        "u2": await cluster.add_node("gpu-u2", kernel=UBUNTU_KERNELS[1]),
        "r1": await cluster.add_node(
            "gpu-r1", os_id="rhel", os_version="9.4", kernel=RHEL_KERNEL, mig=True
        ),
        "cpu": await cluster.add_node("cpu", gpu=False),
    }


async def ready(cluster: Cluster, policy: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        status = await cluster.status(policy)
        return status if status.get("state") == "ready" else None

    result: dict[str, Any] = await eventually(check, f"ClusterPolicy {policy} to be ready")
    return result


async def expected_objects(cluster: Cluster, policy_name: str) -> list[dict[str, Any]]:
    """What the renderers want for the live policy and nodes."""
    obj = await cluster.get(CLUSTER_POLICY, policy_name)
    assert obj is not None
    policy = ClusterPolicy.from_dict(obj)
    nodes = [await cluster.client.get_live(NODE, n) for n in cluster.nodes]
    view = ClusterView(
        namespace=cluster.namespace,
        gpu_nodes=sorted(
            (
                GPUNode.from_node(n)
                for n in nodes
                if n["metadata"]["labels"].get("feature.node.kubernetes.io/pci-10de.present")
                == "true"
            ),
            key=lambda n: n.name,
        ),
        has_service_monitor_crd=False,
        owner=owner_reference(obj),
    )
    out: list[dict[str, Any]] = []
    for operand in OPERANDS:
        if operand.enabled(policy):
            out += operand.render(policy, view).objects
    return out


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


async def test_full_desired_state_object_by_object(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]
    status = await ready(cluster, policy["name"])
    await cluster.settle()

    # Every object the renderers want is there as rendered; nothing else is.
    expected = await expected_objects(cluster, policy["name"])
    live = {key(o): o for o in await cluster.owned()}
    assert sorted(live) == sorted(key(o) for o in expected)
    for obj in expected:
        problems = subset(obj, live[key(obj)])
        assert not problems, f"{key(obj)}: {problems[:5]}"
        assert HASH_ANNOTATION in live[key(obj)]["metadata"]["annotations"]

    # Owned by the policy, so deleting it garbage-collects everything.
    for obj in live.values():
        (ref,) = obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"]) == (
            "ClusterPolicy",
            policy["name"],
            policy["uid"],
        )
        assert ref["controller"] is True and ref["blockOwnerDeletion"] is True

    # One driver DaemonSet per OS, each pulling its OS's image and selecting its nodes.
    daemonsets = await cluster.daemonsets()
    for os_tag, os_id, version, image_tag in (
        ("ubuntu22.04", "ubuntu", "22.04", "ubuntu22.04"),
        ("rhel9.4", "rhel", "9.4", "rhel9"),  # rhel images are tagged by major version
    ):
        ds = daemonsets[f"nvidia-driver-daemonset-{os_tag}"]
        pod = ds["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"].endswith(f"-{image_tag}")
        assert pod["nodeSelector"]["feature.node.kubernetes.io/system-os_release.ID"] == os_id
        assert (
            pod["nodeSelector"]["feature.node.kubernetes.io/system-os_release.VERSION_ID"]
            == version
        )
        assert pod["nodeSelector"][DEPLOY + "driver"] == "true"
        assert ds["spec"]["updateStrategy"]["type"] == "OnDelete"
    assert not [
        n
        for n in daemonsets
        if n.startswith("nvidia-driver-daemonset-")
        and n not in ("nvidia-driver-daemonset-ubuntu22.04", "nvidia-driver-daemonset-rhel9.4")
    ]
    runtime_class = await cluster.get(GVK("node.k8s.io", "v1", "RuntimeClass"), "nvidia")
    assert runtime_class is not None and runtime_class["handler"] == "nvidia"

    # Node labels: operands on GPU nodes, the MIG manager only where MIG is possible.
    for name in (nodes["u1"], nodes["u2"], nodes["r1"]):
        labels = await cluster.node_labels(name)
        assert labels["nvidia.com/gpu.present"] == "true"
        for operand in (
            "driver",
            "container-toolkit",
            "device-plugin",
            "dcgm",
            "dcgm-exporter",
            "gpu-feature-discovery",
            "operator-validator",
            "node-status-exporter",  # as the reference: labelled though disabled
            "client",
        ):
            assert labels[DEPLOY + operand] == "true", (name, operand)
        assert (DEPLOY + "mig-manager" in labels) == (name == nodes["r1"])
    assert await cluster.node_labels(nodes["cpu"]) == {}

    # Status: ready, every operand in the reference's order.
    assert [c["name"] for c in status["components"]] == [op.name for op in OPERANDS]
    assert {c["name"]: c["state"] for c in status["components"]}[
        "state-node-status-exporter"
    ] == "disabled"
    assert status["namespace"] == cluster.namespace
    ready_cond = await cluster.condition(policy["name"])
    assert ready_cond["reason"] == "Reconciled"

    # Metrics and Events.
    assert cluster.metric("gpu_operator_gpu_nodes_total") == 3
    assert cluster.metric("gpu_operator_reconciliation_status") == 1
    assert cluster.metric("gpu_operator_reconciliation_has_nfd_labels") == 1
    assert cluster.metric("gpu_operator_driver_auto_upgrade_enabled") == 0  # off unless set
    assert (cluster.metric("gpu_operator_reconciliation_last_success_ts_seconds") or 0) > 0
    events = await cluster.events(policy["name"])
    created = [e for e in events if e["reason"] == "Created"]
    assert any(
        "DaemonSet" in e["message"] and "nvidia-driver-daemonset-rhel9.4" in e["message"]
        for e in created
    )


async def test_a_second_reconcile_writes_nothing(cluster: Cluster) -> None:
    await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    total = cluster.metric("gpu_operator_reconciliation_total") or 0
    await cluster.assert_second_reconcile_writes_nothing()
    assert (cluster.metric("gpu_operator_reconciliation_total") or 0) > total


async def test_toggling_an_operand_removes_and_restores_it(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    exporter = ("DaemonSet", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")

    def component(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return sorted(
            key(o)
            for o in objects
            if o["metadata"]["labels"]["nvidia.com/gpu-operator.component"] == "state-dcgm-exporter"
        )

    present = component(await cluster.owned())
    assert {k[0] for k in present} >= set(exporter)

    await cluster.patch_policy(policy, {"dcgmExporter": {"enabled": False}})
    await eventually(lambda: _none_left(cluster), "the DCGM exporter objects to be deleted")
    await cluster.settle()
    # The deploy label stays, as the reference leaves it: it says where the operand may run.
    assert (await cluster.node_labels(nodes["u1"]))[DEPLOY + "dcgm-exporter"] == "true"
    status = await cluster.status(policy)
    assert {c["name"]: c["state"] for c in status["components"]}[
        "state-dcgm-exporter"
    ] == "disabled"
    assert any(e["reason"] == "Deleted" for e in await cluster.events(policy))

    await cluster.patch_policy(policy, {"dcgmExporter": {"enabled": True}})

    async def restored() -> bool:
        return component(await cluster.owned()) == present

    await eventually(restored, "the DCGM exporter objects to come back")


async def _none_left(cluster: Cluster) -> bool:
    return not [
        o
        for o in await cluster.owned()
        if o["metadata"]["labels"]["nvidia.com/gpu-operator.component"] == "state-dcgm-exporter"
    ]


async def _has_label(cluster: Cluster, node: str, label: str) -> bool:
    return label in await cluster.node_labels(node)


async def test_opting_a_node_out(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    assert "nvidia-driver-daemonset-rhel9.4" in await cluster.daemonsets()

    await cluster.label_node(nodes["r1"], {DEPLOY + "operands": "false"})

    async def opted_out() -> bool:
        labels = await cluster.node_labels(nodes["r1"], DEPLOY)
        return labels == {DEPLOY + "operands": "false"}

    await eventually(opted_out, "the rhel node's deploy labels to go")
    # Its OS had no other node: the rhel driver DaemonSet is no longer needed.
    await eventually(
        lambda: _no_daemonset(cluster, "nvidia-driver-daemonset-rhel9.4"),
        "the rhel driver DaemonSet to go",
    )
    assert (await cluster.node_labels(nodes["r1"]))["nvidia.com/gpu.present"] == "true"
    # One OS left: its DaemonSet takes the reference's name.
    await eventually(
        lambda: _has_daemonset(cluster, "nvidia-driver-daemonset"), "the single-OS name"
    )

    await cluster.label_node(nodes["r1"], {DEPLOY + "operands": None})
    await eventually(
        lambda: _has_label(cluster, nodes["r1"], DEPLOY + "driver"), "the node to opt back in"
    )
    await eventually(
        lambda: _has_daemonset(cluster, "nvidia-driver-daemonset-rhel9.4"),
        "the rhel driver DaemonSet back",
    )


async def _no_daemonset(cluster: Cluster, name: str) -> bool:
    return name not in await cluster.daemonsets()


async def _has_daemonset(cluster: Cluster, name: str) -> bool:
    return name in await cluster.daemonsets()


async def test_a_node_that_loses_its_gpu_loses_its_labels(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    await cluster.label_node(nodes["u2"], {"feature.node.kubernetes.io/pci-10de.present": None})

    async def cleaned() -> bool:
        return await cluster.node_labels(nodes["u2"]) == {"nvidia.com/gpu.present": "false"}

    await eventually(cleaned, "the GPU labels to go")
    await eventually(lambda: cluster.metric("gpu_operator_gpu_nodes_total") == 2, "2 GPU nodes")


async def test_cpu_only_cluster(cluster: Cluster) -> None:
    cpu = [await cluster.add_node(f"cpu{i}", gpu=False) for i in range(2)]
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    await cluster.settle()
    cond = await cluster.condition(policy)
    assert (cond["status"], cond["reason"]) == ("True", "NoGPUNodes")
    assert not [n for n in await cluster.daemonsets() if n.startswith("nvidia-driver-daemonset")]
    for name in cpu:
        assert await cluster.node_labels(name) == {}
    assert cluster.metric("gpu_operator_gpu_nodes_total") == 0


async def test_a_second_policy_is_ignored_until_the_first_goes(cluster: Cluster) -> None:
    await mixed_cluster(cluster)
    first = (await cluster.create_policy("first"))["metadata"]
    await ready(cluster, first["name"])
    second = (await cluster.create_policy("second"))["metadata"]

    async def ignored() -> bool:
        return (await cluster.status(second["name"])).get("state") == "ignored"

    await eventually(ignored, "the second ClusterPolicy to be ignored")
    cond = await cluster.condition(second["name"])
    assert cond["status"] == "False" and cond["reason"] == "Ignored"
    assert f"ClusterPolicy {first['name']} is active" in cond["message"]
    assert (await cluster.status(first["name"]))["state"] == "ready"

    # Deleting the active one: the next oldest takes over what it owned.
    await cluster.client.delete(CLUSTER_POLICY, first["name"])
    await ready(cluster, second["name"])

    async def taken_over() -> bool:
        objects = await cluster.owned()
        return bool(objects) and all(
            o["metadata"]["ownerReferences"][0]["uid"] == second["uid"] for o in objects
        )

    await eventually(taken_over, "every object to be owned by the second ClusterPolicy")

    await cluster.client.delete(CLUSTER_POLICY, second["name"])
    await eventually(
        lambda: cluster.metric("gpu_operator_reconciliation_status") == -1,
        "the status metric to say there is no ClusterPolicy",
    )


async def test_invalid_combinations_give_conditions(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    no_kernel = await cluster.add_node("gpu-nokernel", kernel=None)
    policy = (
        await cluster.create_policy(
            "policy",
            {
                "driver": {"usePrecompiled": True, "version": "570"},
                "dcgmExporter": {"serviceMonitor": {"enabled": True}},
            },
        )
    )["metadata"]["name"]

    async def error() -> Any:
        cond = await cluster.condition(policy, "Error")
        return cond if cond and cond["status"] == "True" else None

    cond = await eventually(error, "an Error condition")
    await cluster.settle()
    cond = await cluster.condition(policy, "Error")
    assert cond["reason"] == "KernelLabelMissing"
    assert no_kernel in cond["message"]
    assert "ServiceMonitor" in cond["message"]
    status = await cluster.status(policy)
    assert status["state"] == "notReady"
    assert cluster.metric("gpu_operator_reconciliation_status") == 0
    # Precompiled: one driver DaemonSet per kernel and OS; the node without a kernel label
    # gets none, and nothing else is held back.
    drivers = sorted(n for n in await cluster.daemonsets() if n.startswith("nvidia-driver"))
    assert drivers == [
        "nvidia-driver-daemonset-5.14.0-427.13.1.el9.4-rhel9.4",
        "nvidia-driver-daemonset-5.15.0-105-generic-ubuntu22.04",
        "nvidia-driver-daemonset-5.15.0-113-generic-ubuntu22.04",
    ]
    assert nodes  # the mixed nodes are served


async def test_service_monitor_once_its_crd_exists(cluster: Cluster) -> None:
    await cluster.add_node("gpu", kernel=UBUNTU_KERNELS[0])
    policy = (
        await cluster.create_policy(
            "policy", {"dcgmExporter": {"serviceMonitor": {"enabled": True}}}
        )
    )["metadata"]["name"]

    async def reason() -> str | None:
        cond = await cluster.condition(policy, "Error")
        return cond["reason"] if cond and cond["status"] == "True" else None

    assert await eventually(reason, "the missing CRD to be reported") == "ServiceMonitorCRDMissing"
    await install_service_monitor_crd(cluster)
    await ready(cluster, policy)
    monitor = await eventually(
        lambda: cluster.get(
            GVK("monitoring.coreos.com", "v1", "ServiceMonitor"),
            "nvidia-dcgm-exporter",
            cluster.namespace,
        ),
        "the ServiceMonitor",
    )
    assert monitor["metadata"]["ownerReferences"][0]["name"] == policy


async def install_service_monitor_crd(cluster: Cluster) -> None:
    from gpusim import apply_crds

    cluster.crds.append(SERVICE_MONITOR_CRD_NAME)
    await apply_crds(cluster.api, [SERVICE_MONITOR_CRD])


async def test_missing_nfd_labels(cluster: Cluster) -> None:
    others = [
        n
        for n in await cluster.client.list_live(NODE)
        if any(
            k.startswith("feature.node.kubernetes.io/") for k in n["metadata"].get("labels") or {}
        )
    ]
    if others:
        pytest.skip("other nodes with NFD labels are on the shared control plane")
    bare = node_manifest(cluster.name("bare"), gpu=False)
    bare["metadata"]["labels"] = {"kubernetes.io/hostname": cluster.name("bare")}
    await cluster.client.create(bare)
    cluster.nodes.append(cluster.name("bare"))
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]

    async def reason() -> str | None:
        cond = await cluster.condition(policy)
        return cond["reason"] if cond else None

    assert await eventually(reason, "a Ready condition") == "NFDLabelsMissing"
    assert (await cluster.status(policy))["state"] == "notReady"
    assert cluster.metric("gpu_operator_reconciliation_has_nfd_labels") == 0


async def plugin_daemonset_wants(cluster: Cluster, nodes: int, ready: int = 0) -> Object:
    """No DaemonSet controller runs here, so the test plays its part: the device plugin's
    DaemonSet says it wants a pod on `nodes` nodes, `ready` of them ready."""
    ds = (await cluster.daemonsets())["nvidia-device-plugin-daemonset"]
    await cluster.client.patch(
        DAEMONSET,
        ds["metadata"]["name"],
        {
            "status": {
                "desiredNumberScheduled": nodes,
                "currentNumberScheduled": nodes,
                "numberMisscheduled": 0,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": nodes - ready,
            }
        },
        namespace=cluster.namespace,
        subresource="status",
    )
    return ds


async def plugin_pod(cluster: Cluster, ds: Object, node: str) -> str:
    """A device plugin pod of `ds` on `node`, not ready; its name. It carries the
    template's labels, as the DaemonSet controller's pods do."""
    name = f"nvidia-device-plugin-daemonset-{node}"
    await cluster.client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": cluster.namespace,
                "labels": ds["spec"]["template"]["metadata"]["labels"],
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": ds["metadata"]["name"],
                        "uid": ds["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin"}],
            },
        }
    )
    return name


async def pod_turns_ready(cluster: Cluster, name: str) -> None:
    now = "2026-01-01T00:00:00Z"
    await cluster.client.patch(
        GVK("", "v1", "Pod"),
        name,
        {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            }
        },
        namespace=cluster.namespace,
        subresource="status",
    )


async def plugin_status(cluster: Cluster, policy: str) -> dict[str, Any]:
    status = await cluster.status(policy)
    plugin: dict[str, Any] = {c["name"]: c for c in status["components"]}["state-device-plugin"]
    return plugin


async def test_an_operand_not_ready_is_named_with_its_nodes(cluster: Cluster) -> None:
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    ds = await plugin_daemonset_wants(cluster, 1)
    await plugin_pod(cluster, ds, nodes["u1"])

    async def not_ready() -> Any:
        cond = await cluster.condition(policy)
        named = cond and f"state-device-plugin on {nodes['u1']}" in cond["message"]
        return cond if named and cond["reason"] == "OperandNotReady" else None

    await eventually(not_ready, "OperandNotReady naming the device plugin and its node")
    status = await cluster.status(policy)
    assert status["state"] == "notReady"
    plugin = {c["name"]: c for c in status["components"]}["state-device-plugin"]
    assert (plugin["state"], plugin["notReadyNodes"], plugin["nodesDesired"]) == (
        "notReady",
        [nodes["u1"]],
        1,
    )
    assert cluster.metric("gpu_operator_reconciliation_status") == 0
    events = await cluster.events(policy)
    assert any(e["reason"] == "OperandNotReady" and e["type"] == "Warning" for e in events)


async def test_a_daemonset_that_counts_no_node_yet_is_not_ready(cluster: Cluster) -> None:
    """kube-controller-manager writes a new DaemonSet's first status from its own node
    cache; when that has not seen the labels that bring the nodes in yet, it says "spec
    observed, 0 desired". The policy said `ready` on that, before any pod existed. Here the
    stand-in leaves the device plugin's DaemonSet to the test, which writes that status."""
    plugin = "nvidia-device-plugin-daemonset"
    cluster.unobserved.add(plugin)
    nodes = await mixed_cluster(cluster)
    gpu_nodes = sorted(nodes[key] for key in ("u1", "u2", "r1"))
    for name in gpu_nodes:
        # What the node lifecycle controller does once a kubelet reports Ready (the API
        # server taints every new node not-ready, and a DaemonSet's pods do not tolerate it).
        await cluster.client.patch(NODE, name, {"spec": {"taints": None}})
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    ds = await eventually(lambda: _daemonset(cluster, plugin), f"DaemonSet {plugin}")

    async def counts(n: int) -> None:
        await cluster.client.patch(
            DAEMONSET,
            plugin,
            {
                "status": {
                    "observedGeneration": ds["metadata"]["generation"],
                    "desiredNumberScheduled": n,
                    "currentNumberScheduled": n,
                    "updatedNumberScheduled": n,
                    "numberReady": n,
                    "numberAvailable": n,
                    "numberMisscheduled": 0,
                }
            },
            namespace=cluster.namespace,
            subresource="status",
        )

    await counts(0)

    async def named() -> Any:
        components = (await cluster.status(policy)).get("components") or []
        plugin_state = {c["name"]: c for c in components}.get("state-device-plugin") or {}
        return plugin_state if plugin_state.get("notReadyNodes") == gpu_nodes else None

    plugin_state = await eventually(named, "the device plugin not ready on the three GPU nodes")
    assert (plugin_state["state"], plugin_state["nodesDesired"]) == ("notReady", 3)
    assert (await cluster.status(policy))["state"] == "notReady"

    # The controller's cache catches up: it counts the three nodes, their pods available.
    await counts(3)
    status = await ready(cluster, policy)
    plugin_state = {c["name"]: c for c in status["components"]}["state-device-plugin"]
    assert (plugin_state["state"], plugin_state["nodesDesired"]) == ("ready", 3)


async def _daemonset(cluster: Cluster, name: str) -> Object | None:
    return (await cluster.daemonsets()).get(name)


async def test_progress_alone_is_written_at_most_every_few_seconds(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts and the nodes named as not ready change with every pod of a rollout: they
    are written at most every `STATUS_PROGRESS_SECONDS`, while a change of state is written
    at once. The interval is made an hour here, so that 'not yet written' cannot be a slow
    machine's doing."""
    monkeypatch.setattr(clusterpolicy_module, "STATUS_PROGRESS_SECONDS", 3600.0)
    # The device plugin's pods are not cached: its nodes are named by a LIST once its counts
    # stand still. At once here, so that the names come with the change of state.
    monkeypatch.setattr(unready_names_module, "STALL_SECONDS", 0.0)
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    ds = (await cluster.daemonsets())["nvidia-device-plugin-daemonset"]
    pods = {key: await plugin_pod(cluster, ds, nodes[key]) for key in ("u1", "u2", "r1")}
    await plugin_daemonset_wants(cluster, 3)
    everywhere = sorted(nodes[key] for key in ("u1", "u2", "r1"))

    async def names(expected: list[str]) -> Any:
        plugin = await plugin_status(cluster, policy)
        return plugin if plugin["notReadyNodes"] == expected else None

    # Ready -> notReady is a change of state: written at once, interval or not.
    await eventually(lambda: names(everywhere), "the status to name the three nodes")

    # One pod turns ready: progress alone, held back for the interval. Without the hold,
    # the paced reconcile writes it within `PACE_MAX_SECONDS`.
    await pod_turns_ready(cluster, pods["u1"])
    await plugin_daemonset_wants(cluster, 3, ready=1)
    for _ in range(int(clusterpolicy_module.PACE_MAX_SECONDS) + 2):
        await asyncio.sleep(1.0)
        assert (await plugin_status(cluster, policy))["notReadyNodes"] == everywhere

    # With the interval past, the next change carries everything held back.
    monkeypatch.setattr(clusterpolicy_module, "STATUS_PROGRESS_SECONDS", 0.5)
    await pod_turns_ready(cluster, pods["u2"])
    await plugin_daemonset_wants(cluster, 3, ready=2)
    plugin = await eventually(lambda: names([nodes["r1"]]), "the status to name r1 alone")
    assert (plugin["state"], plugin["nodesDesired"]) == ("notReady", 3)
    assert (await cluster.status(policy))["state"] == "notReady"


async def test_an_operand_waiting_for_the_driver_is_named_once_the_driver_is_ready(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The device plugin's pods are not cached: its nodes are named by a LIST of them when
    its counts stand still. While the driver is not ready that is no fault of the plugin's
    (its pods wait for the driver, which names the node itself), so nothing is listed: at
    1,000 nodes a rollout listed the pods of every operand again and again while its drivers
    came up. Stalls are named at once here, so that only the driver's readiness holds it."""
    monkeypatch.setattr(unready_names_module, "STALL_SECONDS", 0.0)
    node = await cluster.add_node("gpu-u1", kernel=UBUNTU_KERNELS[0])
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    daemonsets = await cluster.daemonsets()
    (driver,) = (ds for name, ds in daemonsets.items() if name.startswith("nvidia-driver"))

    async def driver_counts(ready: int) -> None:
        await cluster.client.patch(
            DAEMONSET,
            driver["metadata"]["name"],
            {
                "status": {
                    "observedGeneration": driver["metadata"]["generation"],
                    "desiredNumberScheduled": 1,
                    "currentNumberScheduled": 1,
                    "updatedNumberScheduled": 1,
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "numberAvailable": ready,
                    "numberUnavailable": 1 - ready,
                }
            },
            namespace=cluster.namespace,
            subresource="status",
        )

    def pod_lists() -> float:
        """GETs of pods: a LIST is a GET of the collection."""
        return (
            cluster.metric("rest_client_requests_by_resource_total", method="GET", resource="pods")
            or 0.0
        )

    listed = pod_lists()  # the informers' own LISTs at start
    await driver_counts(0)
    plugin = daemonsets["nvidia-device-plugin-daemonset"]
    await plugin_pod(cluster, plugin, node)
    await plugin_daemonset_wants(cluster, 1)

    async def both_not_ready() -> Any:
        status = await cluster.status(policy)
        states = {c["name"]: c for c in status.get("components") or []}
        waiting = (states["state-driver"]["state"], states["state-device-plugin"]["state"])
        return states if waiting == ("notReady", "notReady") else None

    states = await eventually(both_not_ready, "the driver and the device plugin not ready")
    # Time for the paced reconciles that would have listed the pods.
    await asyncio.sleep(clusterpolicy_module.PACE_MAX_SECONDS + 1)
    assert states["state-device-plugin"]["notReadyNodes"] == []
    assert (await plugin_status(cluster, policy))["notReadyNodes"] == []
    assert pod_lists() == listed

    await driver_counts(1)
    named = await eventually(
        lambda: _named(cluster, policy, [node]), "the device plugin's node named"
    )
    assert named["state"] == "notReady"
    assert pod_lists() > listed


async def _named(cluster: Cluster, policy: str, nodes: list[str]) -> dict[str, Any] | None:
    plugin = await plugin_status(cluster, policy)
    return plugin if plugin["notReadyNodes"] == nodes else None


async def test_the_policy_turns_ready_when_its_last_daemonset_rolls_out(
    reconciles_an_hour_apart: None, cluster: Cluster
) -> None:
    """A DaemonSet finishing its rollout is what a paced reconcile waits for: the policy
    says `ready` then, not at its next turn (at 100 nodes that turn came 3-5 s later). Here
    the turn is an hour away; each DaemonSet's rollout finishes when the DaemonSet
    controller's stand-in marks its spec seen (no pod is wanted on these nodes)."""
    await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    status = await ready(cluster, policy)
    assert all(c["state"] in ("ready", "disabled") for c in status["components"])


async def test_an_edit_and_a_deleted_daemonset_are_acted_on_at_once(
    reconciles_an_hour_apart: None, cluster: Cluster
) -> None:
    """Pacing spaces the turns that only report progress; an admin's edit of the policy and
    a DaemonSet of ours deleted behind our back are not progress: each is acted on when
    seen, not at the next turn (an hour away here; up to 5 s in a real operator)."""
    await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    await cluster.settle(delayed_counts=False)

    await cluster.patch_policy(policy, {"dcgmExporter": {"enabled": False}})
    await eventually(lambda: _none_left(cluster), "the DCGM exporter objects deleted", 30)
    await cluster.settle(delayed_counts=False)

    plugin = "nvidia-device-plugin-daemonset"
    uid = (await cluster.daemonsets())[plugin]["metadata"]["uid"]
    await cluster.client.delete(DAEMONSET, plugin, namespace=cluster.namespace)

    async def recreated() -> bool:
        again = (await cluster.daemonsets()).get(plugin)
        return again is not None and again["metadata"]["uid"] != uid

    await eventually(recreated, f"{plugin} recreated", 30)


async def test_pods_of_a_daemonset_replaced_under_its_name_are_deleted(cluster: Cluster) -> None:
    """No garbage collector runs here: as kube-controller-manager's after an API server
    restart that hid the DaemonSet's deletion from it (tests/e2e/outage), nothing else
    collects the old DaemonSet's pods once the operator has recreated it. A device plugin
    left so would keep its node offering GPUs through a driver upgrade's pause. The new
    DaemonSet's own pods stay."""
    nodes = await mixed_cluster(cluster)
    policy = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, policy)
    plugin = "nvidia-device-plugin-daemonset"
    old = (await cluster.daemonsets())[plugin]
    stale = await plugin_pod(cluster, old, nodes["u1"])
    await cluster.client.delete(DAEMONSET, plugin, namespace=cluster.namespace)

    async def recreated() -> Object | None:
        again = (await cluster.daemonsets()).get(plugin)
        return (
            again
            if again is not None and again["metadata"]["uid"] != old["metadata"]["uid"]
            else None
        )

    new = await eventually(recreated, f"{plugin} recreated", 30)
    kept = await plugin_pod(cluster, new, nodes["u2"])

    async def deleting(name: str) -> bool:
        pod = await cluster.get(POD, name, cluster.namespace)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    await eventually(lambda: deleting(stale), "the replaced DaemonSet's pod deleted", 30)
    await cluster.settle(delayed_counts=False)
    assert not await deleting(kept), "the new DaemonSet's pod was deleted"
