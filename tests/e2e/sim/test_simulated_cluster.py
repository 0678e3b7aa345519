"""The simulated cluster behaves like a real one with GPUs: kwok nodes get Ready, DaemonSets
really roll out through kube-controller-manager and kube-scheduler, and the simulated NVIDIA
node software turns running operand pods into GPU resources, GFD labels and MIG layouts."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from gpusim import (
    LABEL_KERNEL,
    LABEL_OS_ID,
    LABEL_OS_VERSION,
    LABEL_PCI_NVIDIA,
    SimulatedCluster,
)
from tests.e2e.sim._kube import (
    DEVICE_PLUGIN_IMAGE,
    DRIVER_IMAGE,
    GPU_PCI_LABEL,
    MIG_MANAGER_IMAGE,
    allocatable,
    call,
    capacity,
    create_daemonset,
    daemonset,
    delete_daemonset,
    gpu_pod,
    label_history,
    node,
    nodes,
    pods,
    pods_running_on,
    running,
)
from tests.polling import eventually

pytestmark = pytest.mark.e2e

DRIVER = "nvidia-driver-daemonset"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
GFD = "gpu-feature-discovery"
MIG_MANAGER = "nvidia-mig-manager"
MIG_STATE = "nvidia.com/mig.config.state"


async def test_nodes_are_ready_kwok_nodes_with_nfd_labels(
    sim_cluster: SimulatedCluster, sim_api: Any
) -> None:
    found = await nodes(sim_api)
    assert set(sim_cluster.gpu_nodes) | set(sim_cluster.cpu_nodes) <= set(found)
    for name in sim_cluster.gpu_nodes + sim_cluster.cpu_nodes:
        item = found[name]
        conditions = {c["type"]: c["status"] for c in item["status"]["conditions"]}
        assert conditions["Ready"] == "True", name
        labels = item["metadata"]["labels"]
        assert labels[LABEL_OS_ID] in ("ubuntu", "rhel")
        assert labels[LABEL_OS_VERSION] in ("22.04", "9.4")
        assert labels[LABEL_KERNEL]
        info = item["status"]["nodeInfo"]
        assert info["containerRuntimeVersion"] == "containerd://2.1.4"
        assert info["kernelVersion"] == labels[LABEL_KERNEL]
        assert allocatable(item) == {}, "no GPU resources before any device plugin runs"
    for name in sim_cluster.gpu_nodes:
        assert found[name]["metadata"]["labels"][LABEL_PCI_NVIDIA] == "true"
    for name in sim_cluster.cpu_nodes:
        assert LABEL_PCI_NVIDIA not in found[name]["metadata"]["labels"]
    # The OS mix is round-robin over the GPU nodes.
    oses = {found[n]["metadata"]["labels"][LABEL_OS_ID] for n in sim_cluster.gpu_nodes}
    assert oses == {"ubuntu", "rhel"}


async def test_gpu_pod_waits_for_the_device_plugin_then_runs_on_a_gpu_node(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str
) -> None:
    core = client.CoreV1Api(sim_api)
    gpu_nodes = set(sim_cluster.gpu_nodes)
    on_gpus = {GPU_PCI_LABEL: "true"}

    # A pod asking for a GPU before any NVIDIA software runs: the scheduler rejects it.
    await call(core.create_namespaced_pod, namespace, gpu_pod("cuda"))

    async def unschedulable() -> bool:
        pod = await call(core.read_namespaced_pod, "cuda", namespace)
        conditions = pod["status"].get("conditions") or []
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
        )

    await eventually(unschedulable, "the scheduler reports the GPU pod Unschedulable")

    # The driver alone rolls out to the GPU nodes (and only them) but advertises nothing.
    await create_daemonset(sim_api, namespace, daemonset("driver", DRIVER, DRIVER_IMAGE, on_gpus))
    await eventually(
        lambda: pods_running_on(sim_api, namespace, DRIVER, gpu_nodes),
        "driver pods Running on every GPU node and nowhere else",
    )
    found = await nodes(sim_api)
    assert all(allocatable(found[n]) == {} for n in gpu_nodes)
    pod = await call(core.read_namespaced_pod, "cuda", namespace)
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")

    # The device plugin comes up: every GPU node advertises its 8 GPUs, CPU nodes none.
    await create_daemonset(
        sim_api, namespace, daemonset("device-plugin", DEVICE_PLUGIN, DEVICE_PLUGIN_IMAGE, on_gpus)
    )
    await eventually(
        lambda: pods_running_on(sim_api, namespace, DEVICE_PLUGIN, gpu_nodes),
        "device plugin pods Running on every GPU node and nowhere else",
    )

    async def advertised() -> bool:
        found = await nodes(sim_api)
        return all(
            allocatable(found[n]) == capacity(found[n]) == {"nvidia.com/gpu": "8"}
            for n in gpu_nodes
        ) and all(allocatable(found[n]) == {} for n in sim_cluster.cpu_nodes)

    await eventually(advertised, "nvidia.com/gpu=8 on every GPU node, nothing on CPU nodes")

    # Now the real scheduler binds the GPU pod to a GPU node and kwok runs it.
    async def placed() -> str | None:
        pod = await call(core.read_namespaced_pod, "cuda", namespace)
        return pod["spec"].get("nodeName") if running(pod) else None

    assert await eventually(placed, "the GPU pod Running") in gpu_nodes

    # Without a driver pod the GPUs are unusable: the resources go away.
    await delete_daemonset(sim_api, namespace, "driver")

    async def withdrawn() -> bool:
        found = await nodes(sim_api)
        return all(allocatable(found[n]) == capacity(found[n]) == {} for n in gpu_nodes)

    await eventually(withdrawn, "GPU resources gone once the driver pods are gone")

    # A GPU pod bound to a GPU node all the same (a scheduler acting on an older view):
    # the node's kubelet refuses it, as a real one's device manager does, and it never
    # runs. A pod that asks for no GPU, bound the same way, runs.
    target = sorted(gpu_nodes)[0]
    stale = gpu_pod("stale")
    stale["spec"]["nodeName"] = target
    plain = {
        "metadata": {"name": "plain"},
        "spec": {"nodeName": target, "containers": [{"name": "c", "image": "busybox"}]},
    }
    await call(core.create_namespaced_pod, namespace, stale)
    await call(core.create_namespaced_pod, namespace, plain)

    async def refused() -> dict[str, Any] | None:
        pod = await call(core.read_namespaced_pod, "stale", namespace)
        status: dict[str, Any] = pod["status"]
        assert status.get("phase") != "Running", f"a GPU pod runs on {target}, which has none"
        return status if status.get("phase") == "Failed" else None

    status = await eventually(refused, "the GPU pod refused by its node's kubelet")
    assert status["reason"] == "UnexpectedAdmissionError"
    assert status["message"] == (
        "Pod was rejected: Allocate failed due to no healthy devices present; "
        "cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
    )
    assert not status.get("containerStatuses")  # nothing ever started

    async def plain_runs() -> bool:
        return running(await call(core.read_namespaced_pod, "plain", namespace))

    await eventually(plain_runs, "the pod asking for no GPU Running on the same node")


async def test_gpu_feature_discovery_labels_follow_the_running_driver(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str
) -> None:
    on_gpus = {GPU_PCI_LABEL: "true"}
    await create_daemonset(sim_api, namespace, daemonset("driver", DRIVER, DRIVER_IMAGE, on_gpus))
    await create_daemonset(
        sim_api,
        namespace,
        daemonset("gfd", GFD, DEVICE_PLUGIN_IMAGE, on_gpus, env={"MIG_STRATEGY": "single"}),
    )

    async def labelled() -> dict[str, dict[str, str]] | None:
        found = await nodes(sim_api)
        labels = {n: found[n]["metadata"]["labels"] for n in sim_cluster.gpu_nodes}
        done = all(v.get("nvidia.com/gpu.product") for v in labels.values())
        return labels if done else None

    labels = await eventually(labelled, "GFD labels on every GPU node")
    for values in labels.values():
        assert values["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert values["nvidia.com/gpu.count"] == "8"
        assert values["nvidia.com/gpu.memory"] == "81559"
        assert values["nvidia.com/gpu.family"] == "hopper"
        assert values["nvidia.com/cuda.driver.major"] == "580"  # from the driver image tag
        assert values["nvidia.com/mig.capable"] == "false"
        assert values["nvidia.com/mig.strategy"] == "single"
    found = await nodes(sim_api)
    for name in sim_cluster.cpu_nodes:
        assert not any(k.startswith("nvidia.com/") for k in found[name]["metadata"]["labels"])


async def _equals(values: list[str], expected: list[str]) -> bool:
    return values == expected


async def _state_is(sim_api: Any, name: str, state: str) -> bool:
    item = await node(sim_api, name)
    return bool(item["metadata"]["labels"].get(MIG_STATE) == state)


async def test_mig_manager_reconfigures_to_mixed_then_single_and_rejects_bad_configs(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str, added_nodes: list[str]
) -> None:
    name = "mig-node-0"
    await sim_cluster.add_node(sim_cluster.gpu_node_spec(name, gpus=2, mig_capable=True))
    added_nodes.append(name)
    await sim_cluster.set_node_labels(name, {"sim-e2e": "mig"})
    here = {"sim-e2e": "mig"}
    await create_daemonset(sim_api, namespace, daemonset("driver", DRIVER, DRIVER_IMAGE, here))
    plugin = daemonset(
        "device-plugin", DEVICE_PLUGIN, DEVICE_PLUGIN_IMAGE, here, env={"MIG_STRATEGY": "mixed"}
    )
    await create_daemonset(sim_api, namespace, plugin)
    await create_daemonset(
        sim_api, namespace, daemonset("mig-manager", MIG_MANAGER, MIG_MANAGER_IMAGE, here)
    )

    async def resources(expected: dict[str, str]) -> bool:
        item = await node(sim_api, name)
        return allocatable(item) == capacity(item) == expected

    await eventually(lambda: resources({"nvidia.com/gpu": "2"}), "two whole GPUs before MIG")

    # Ask for seven 1g.10gb instances per GPU; the state goes pending, then success.
    async with label_history(sim_api, name, MIG_STATE) as seen:
        await sim_cluster.set_node_labels(name, {"nvidia.com/mig.config": "all-1g.10gb"})
        await eventually(
            lambda: _equals(seen, ["pending", "success"]), "mig.config.state pending, then success"
        )
    await eventually(
        lambda: resources({"nvidia.com/mig-1g.10gb": "14"}), "mixed: 14 x nvidia.com/mig-1g.10gb"
    )

    # The device plugin switched to the single strategy: the instances become nvidia.com/gpu.
    apps = client.AppsV1Api(sim_api)
    container = {"name": "device-plugin", "env": [{"name": "MIG_STRATEGY", "value": "single"}]}
    await call(
        apps.patch_namespaced_daemon_set,
        "device-plugin",
        namespace,
        {"spec": {"template": {"spec": {"containers": [container]}}}},
    )
    await eventually(lambda: resources({"nvidia.com/gpu": "14"}), "single: 14 x nvidia.com/gpu")

    # A profile this GPU does not have (A100-40GB's) fails and leaves the layout alone.
    await sim_cluster.set_node_labels(name, {"nvidia.com/mig.config": "all-1g.5gb"})

    await eventually(
        lambda: _state_is(sim_api, name, "failed"), "mig.config.state=failed for a missing profile"
    )
    assert await resources({"nvidia.com/gpu": "14"})


async def test_mig_manager_pauses_gpu_clients_while_it_reconfigures(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str, added_nodes: list[str]
) -> None:
    name = "mig-node-1"
    await sim_cluster.add_node(sim_cluster.gpu_node_spec(name, gpus=2, mig_capable=True))
    added_nodes.append(name)
    deploy = "nvidia.com/gpu.deploy.device-plugin"
    await sim_cluster.set_node_labels(name, {"sim-e2e": "mig-pause", deploy: "true"})
    here = {"sim-e2e": "mig-pause"}
    await create_daemonset(sim_api, namespace, daemonset("driver", DRIVER, DRIVER_IMAGE, here))
    # Like the operator's: the device plugin runs only where its deploy label is "true".
    plugin = daemonset(
        "device-plugin",
        DEVICE_PLUGIN,
        DEVICE_PLUGIN_IMAGE,
        {**here, deploy: "true"},
        env={"MIG_STRATEGY": "mixed"},
    )
    await create_daemonset(sim_api, namespace, plugin)
    await create_daemonset(
        sim_api, namespace, daemonset("mig-manager", MIG_MANAGER, MIG_MANAGER_IMAGE, here)
    )
    await eventually(
        lambda: pods_running_on(sim_api, namespace, DEVICE_PLUGIN, {name}), "device plugin up"
    )

    async with label_history(sim_api, name, deploy) as deploy_values:
        await sim_cluster.set_node_labels(name, {"nvidia.com/mig.config": "all-3g.40gb"})
        # The device plugin is paused (the DaemonSet controller removes its pod), then resumed.
        await eventually(
            lambda: _equals(deploy_values, ["true", "paused-for-mig-change", "true"]),
            "the device plugin paused for the MIG change and resumed",
        )
    assert await _state_is(sim_api, name, "success")
    await eventually(
        lambda: pods_running_on(sim_api, namespace, DEVICE_PLUGIN, {name}), "device plugin back"
    )

    async def mig_resources() -> bool:
        item = await node(sim_api, name)
        return allocatable(item) == {"nvidia.com/mig-3g.40gb": "4"}

    await eventually(mig_resources, "two 3g.40gb instances on each of the two GPUs")


async def test_a_node_joins_and_changes_kernel(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str, added_nodes: list[str]
) -> None:
    name = "joining-node-0"
    await create_daemonset(
        sim_api,
        namespace,
        daemonset("driver", DRIVER, DRIVER_IMAGE, {"sim-e2e": "join"}),
    )
    spec = sim_cluster.gpu_node_spec(name, os="rhel9.4")
    await sim_cluster.add_node(spec)
    added_nodes.append(name)
    item = await node(sim_api, name)
    assert item["metadata"]["labels"][LABEL_KERNEL] == spec.kernel
    assert item["metadata"]["labels"][LABEL_OS_ID] == "rhel"

    # The DaemonSet picks up the joined node as soon as it matches.
    await sim_cluster.set_node_labels(name, {"sim-e2e": "join"})
    await eventually(
        lambda: pods_running_on(sim_api, namespace, DRIVER, {name}), "driver pod on the new node"
    )

    await sim_cluster.change_kernel(name, "5.14.0-503.11.1.el9_5.x86_64")
    item = await node(sim_api, name)
    labels = item["metadata"]["labels"]
    assert labels[LABEL_KERNEL] == "5.14.0-503.11.1.el9_5.x86_64"
    assert labels["feature.node.kubernetes.io/kernel-version.major"] == "5"
    assert item["status"]["nodeInfo"]["kernelVersion"] == "5.14.0-503.11.1.el9_5.x86_64"
    found = await pods(sim_api, namespace, f"app={DRIVER}")
    assert [p["spec"]["nodeName"] for p in found] == [name]


async def test_a_pod_marked_unready_by_the_node_lifecycle_controller_is_ready_again(
    sim_cluster: SimulatedCluster, sim_api: Any, namespace: str
) -> None:
    """When a node's lease is late, kube-controller-manager marks its pods Ready=False; a
    real kubelet reports them ready again on its next sync, and so must the simulated one
    (a 5,000-node rollout on two cores otherwise never finished: 194 driver pods stayed
    unready on nodes that were Ready again)."""
    core = client.CoreV1Api(sim_api)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "steady"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    await call(core.create_namespaced_pod, namespace, pod)

    async def ready() -> bool:
        return running(await call(core.read_namespaced_pod, "steady", namespace))

    await eventually(ready, "the pod Running and Ready")
    # What the node lifecycle controller's MarkPodsNotReady writes.
    unready = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    await call(core.patch_namespaced_pod_status, "steady", namespace, unready)
    await eventually(ready, "the pod Ready again")
