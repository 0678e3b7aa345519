"""The node agent on a simulated cluster (`nodeAgent.enabled`): what an admin sees on the
nodes and in the ClusterPolicy status.

The agent pods run the product's agent logic per node over a simulated NVML (the GPU node
behaviour runs it where the operator's agent pod is Ready). One GPU node has a driver
installed on the host: it gets no driver pod and a condition naming it and its driver; a
GPU that raises an XID makes its node `GPUHealthy=False` and the policy counts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import GpuProcessEntry, gpu_processes
from gpusim import ClusterConfig, SimulatedCluster
from tests.e2e.operator._harness import (
    NAMESPACE,
    OperatorProcess,
    create_policy,
    patch_policy,
)
from tests.e2e.operator._harness import policy as _policy
from tests.e2e.operator._harness import wait_ready as _wait_ready
from tests.e2e.operator.test_operator_on_simulated_cluster import GPU_POD
from tests.polling import eventually

HOST_DRIVER = "550.54.15"
HOST_NODE = "gpu-host"
XID_ANNOTATION = "sim.gpu-operator.io/xids"


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    """Small: one GPU node with our driver, one with the host's (added by the test)."""
    with SimulatedCluster(ClusterConfig(gpu_nodes=1, cpu_nodes=0, gpus_per_node=2)) as sim:
        yield sim


def _conditions(node: Any) -> dict[str, Any]:
    return {c.type: c for c in node.status.conditions or []}


async def _driver_pods_on(kube: Any, node: str) -> list[Any]:
    pods = await client.CoreV1Api(kube).list_namespaced_pod(
        NAMESPACE, field_selector=f"spec.nodeName={node}"
    )
    return [
        p
        for p in pods.items
        if (p.metadata.labels or {}).get("app", "").startswith("nvidia-driver-daemonset")
    ]


async def _agent_status(kube: Any) -> dict[str, Any]:
    return dict(((await _policy(kube)).get("status") or {}).get("nodeAgent") or {})


async def test_a_host_driver_node_gets_no_driver_pod_and_a_condition_naming_it(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    await operator_cluster.add_node(
        operator_cluster.gpu_node_spec(HOST_NODE, host_driver=HOST_DRIVER)
    )
    await create_policy(kube, {"nodeAgent": {"enabled": True}})
    ours = operator_cluster.gpu_nodes[0]

    async def both_reported() -> dict[str, Any] | None:
        agents = await _agent_status(kube)
        return (
            agents
            if agents.get("hostDriverNodes") == [HOST_NODE] and agents.get("nodes") == 2
            else None
        )

    await eventually(both_reported, "both agents report, one on a host driver", seconds=240)

    async def pre_installed() -> Any:
        # The node labeller and the policy's status follow the agent's condition, each in
        # its own controller: the status may say so before the label is written.
        host = await core.read_node(HOST_NODE)
        label = host.metadata.labels.get("nvidia.com/gpu.deploy.driver")
        return host if label == "pre-installed" else None

    host = await eventually(pre_installed, f"{HOST_NODE} labelled pre-installed", seconds=60)
    ready = _conditions(host)["GPUDriverReady"]
    assert (ready.status, ready.reason) == ("True", "HostDriver")
    assert HOST_NODE in ready.message and HOST_DRIVER in ready.message

    async def driver_ready() -> Any:
        # An agent counts as reporting from its first look, which may be before our driver
        # pod is Ready on its node (`DriverNotLoaded` until then).
        c = _conditions(await core.read_node(ours)).get("GPUDriverReady")
        return c if c is not None and c.status == "True" else None

    mine = await eventually(driver_ready, f"{ours} GPUDriverReady=True", seconds=60)
    assert mine.reason == "DriverContainer"

    async def driver_gone() -> bool | None:
        return True if not await _driver_pods_on(kube, HOST_NODE) else None

    await eventually(driver_gone, f"no driver pod on {HOST_NODE}", seconds=60)
    await _wait_ready(kube)
    # And it stays so: no driver pod comes back to fight the host's driver.
    await asyncio.sleep(3)
    assert await _driver_pods_on(kube, HOST_NODE) == []
    assert len(await _driver_pods_on(kube, ours)) == 1

    async def validated() -> dict[str, tuple[int, int]] | None:
        # `ready` follows the DaemonSets; the summary follows the agents' conditions, which
        # each agent writes in its own time (validation waits for the toolkit and the
        # device plugin).
        agents = await _agent_status(kube)
        counts = {c["type"]: (c["true"], c["false"]) for c in agents.get("conditions") or []}
        return counts if counts.get("GPUValidated") == counts.get("GPUHealthy") == (2, 0) else None

    await eventually(validated, "the policy counting both nodes validated and healthy", seconds=60)


async def test_an_xid_makes_the_node_unhealthy_and_the_policy_counts_it(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    node = operator_cluster.gpu_nodes[0]
    await core.patch_node(node, {"metadata": {"annotations": {XID_ANNOTATION: "1:79"}}})

    async def unhealthy() -> Any:
        c = _conditions(await core.read_node(node)).get("GPUHealthy")
        return c if c is not None and c.status == "False" else None

    healthy = await eventually(unhealthy, f"{node} GPUHealthy=False", seconds=60)
    assert healthy.reason == "XID"
    assert "GPU 1" in healthy.message and "XID 79" in healthy.message

    async def counted() -> dict[str, Any] | None:
        agents = await _agent_status(kube)
        summary = {c["type"]: c for c in agents.get("conditions") or []}.get("GPUHealthy")
        return summary if summary and summary["false"] == 1 else None

    summary = await eventually(counted, "the policy counts the unhealthy node", seconds=60)
    assert summary["true"] == 1 and summary["notTrue"] == [f"{node}: XID"]
    host = _conditions(await core.read_node(HOST_NODE))["GPUHealthy"]
    assert host.status == "True"


async def test_gpu_processes_are_listed_with_the_pods_that_own_them(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    await core.create_namespaced_pod("default", GPU_POD)

    async def listed() -> list[GpuProcessEntry] | None:
        pod = await core.read_namespaced_pod("cuda-job", "default")
        if not pod.spec.node_name:
            return None
        node = await core.read_node(pod.spec.node_name)
        return gpu_processes(node.metadata.annotations or {}) or None

    processes = await eventually(listed, "the GPU pod's process on its node", seconds=60)
    assert [p.pod_key for p in processes] == [("default", "cuda-job")]
    assert processes[0].gpu.startswith("GPU-") and processes[0].pid > 0
    await core.delete_namespaced_pod("cuda-job", "default", grace_period_seconds=0)


async def test_a_driver_upgrade_is_validated_by_the_agent(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    node = operator_cluster.gpu_nodes[0]
    (old,) = await _driver_pods_on(kube, node)
    await patch_policy(
        kube, {"driver": {"version": "580.95.05", "upgradePolicy": {"autoUpgrade": True}}}
    )

    async def done() -> Any:
        n = await core.read_node(node)
        state = (n.metadata.labels or {}).get("nvidia.com/gpu-driver-upgrade-state")
        pods = await _driver_pods_on(kube, node)
        fresh = [p for p in pods if p.metadata.uid != old.metadata.uid]
        return (n, fresh[0]) if state == "upgrade-done" and fresh else None

    upgraded, new = await eventually(done, f"{node} upgraded to 580.95.05", seconds=240)
    conditions = _conditions(upgraded)
    validated = conditions["GPUValidated"]
    assert validated.status == "True"
    # The answer the walk waited for is about the new driver, not the one before.
    assert validated.last_transition_time >= new.metadata.creation_timestamp.replace(microsecond=0)
    assert "580.95.05" in conditions["GPUDriverReady"].message
    # The host-driver node took no part: still no driver pod there.
    assert await _driver_pods_on(kube, HOST_NODE) == []


SEES_GPUS = "smi-watch"


async def test_a_pod_using_a_gpu_without_requesting_one_is_named_by_the_upgrade_walk(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    """The agent's list marks a pod that sees the GPUs through its environment; the walk
    cannot restart the driver under it, and says so by name until it is gone."""
    core = client.CoreV1Api(kube)
    node = operator_cluster.gpu_nodes[0]
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    await core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": SEES_GPUS},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "containers": [{"name": "smi", "image": "nvcr.io/nvidia/cuda:12.9.0", "env": env}],
            },
        },
    )

    async def listed() -> GpuProcessEntry | None:
        n = await core.read_node(node)
        found = [
            p
            for p in gpu_processes(n.metadata.annotations or {})
            if p.pod_key == ("default", SEES_GPUS)
        ]
        return found[0] if found else None

    entry = await eventually(listed, "the env-only pod's process on its node", seconds=60)
    assert entry.unrequested

    await patch_policy(kube, {"driver": {"version": "580.105.08"}})

    async def failed() -> str | None:
        n = await core.read_node(node)
        labels, annotations = n.metadata.labels or {}, n.metadata.annotations or {}
        if labels.get("nvidia.com/gpu-driver-upgrade-state") != "upgrade-failed":
            return None
        return str(annotations.get("nvidia.com/gpu-driver-upgrade-message") or "")

    message = await eventually(failed, f"{node} failing on {SEES_GPUS}", seconds=120)
    assert f"default/{SEES_GPUS} uses GPU" in message and "without requesting one" in message

    async def in_status() -> bool:
        status = (await _policy(kube)).get("status") or {}
        entries = (status.get("upgrade") or {}).get("nodes") or []
        return any(SEES_GPUS in str(e.get("message")) for e in entries if e.get("name") == node)

    await eventually(in_status, f"the policy's status naming {SEES_GPUS}", seconds=60)

    (before,) = await _driver_pods_on(kube, node)
    await core.delete_namespaced_pod(SEES_GPUS, "default", grace_period_seconds=0)

    async def done() -> bool:
        n = await core.read_node(node)
        state = (n.metadata.labels or {}).get("nvidia.com/gpu-driver-upgrade-state")
        pods = await _driver_pods_on(kube, node)
        return state == "upgrade-done" and any(p.metadata.uid != before.metadata.uid for p in pods)

    await eventually(done, f"{node} upgraded once {SEES_GPUS} is gone", seconds=240)
