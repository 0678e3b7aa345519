"""A MIG change on a node that runs a GPU job protected by a PodDisruptionBudget, as an
admin and the job's owner see it through the API (issue 16, item 2).

The simulated MIG manager, like mig-parted on real GPUs, will not repartition GPUs a pod
holds: the change stays `pending` until the operator has cleared the node. The operator
clears it through the Eviction API, so the budget holds the job in place (and is named as
what blocks) until its owner relaxes it; then the job is evicted, with an Event saying so,
and the change goes through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from tests.e2e.operator.test_operator_on_simulated_cluster import (
    GROUP,
    PLURAL,
    POLICY,
    VERSION,
    _policy,
    _wait_ready,
)
from tests.polling import eventually

NODE = "gpu-node-0000"
"""The cluster's one GPU node (the simulator names them `gpu-node-NNNN`)."""
JOB_NS = "ml"
CONFIG = "all-1g.10gb"
STATE = "nvidia.com/mig.config.state"
LABELS = {"app": "train"}


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    # One MIG-capable GPU node (two H100s) is all this needs; a CPU node for the rest.
    config = ClusterConfig(
        gpu_nodes=1,
        cpu_nodes=1,
        gpus_per_node=2,
        mig_capable=True,
        os=parse_os_list("ubuntu22.04"),
    )
    with SimulatedCluster(config) as sim:
        yield sim


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": LABELS},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "containers": [
                        {
                            "name": "cuda",
                            "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                },
            },
        },
    }


def _budget(min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": LABELS}},
    }


async def _events(kube: Any, namespace: str, name: str, reason: str) -> list[Any]:
    core = client.CoreV1Api(kube)
    found = await core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason={reason}"
    )
    return list(found.items)


def _condition(policy: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (policy.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


async def test_a_mig_change_waits_for_a_budget_then_evicts_the_gpu_pod_and_applies(
    operator: Any, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    assert operator_cluster.gpu_nodes == [NODE]
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": POLICY}}
    spec = {"mig": {"strategy": "single"}}
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {**policy, "spec": spec})
    await _wait_ready(kube)

    # A training job with one GPU, and a budget that allows no disruption at all.
    await core.create_namespace({"metadata": {"name": JOB_NS}})
    await client.AppsV1Api(kube).create_namespaced_deployment(JOB_NS, _deployment())
    policy_api = client.PolicyV1Api(kube)
    await policy_api.create_namespaced_pod_disruption_budget(JOB_NS, _budget(1))

    async def job_running() -> Any:
        pods = (await core.list_namespaced_pod(JOB_NS)).items
        running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == NODE]
        return running[0] if running else None

    job = await eventually(job_running, f"the GPU job running on {NODE}", seconds=180)

    async def budget_counted() -> bool:
        pdb = await policy_api.read_namespaced_pod_disruption_budget("train", JOB_NS)
        return bool(pdb.status and pdb.status.current_healthy == 1)

    await eventually(budget_counted, "the budget counting the job")

    # The admin asks for seven 1g.10gb instances per GPU.
    await operator_cluster.set_node_labels(NODE, {"nvidia.com/mig.config": CONFIG})

    async def blocked() -> dict[str, Any] | None:
        return _condition(await _policy(kube), "MIGChangeBlocked")

    condition = await eventually(blocked, "the policy saying what blocks the MIG change")
    assert condition["status"] == "True" and condition["reason"] == "EvictionBlocked"
    assert NODE in condition["message"] and job.metadata.name in condition["message"]
    assert f"PodDisruptionBudget {JOB_NS}/train" in condition["message"]
    node_events = await eventually(
        lambda: _events(kube, "default", NODE, "MIGChangeBlocked"), "a MIGChangeBlocked Event"
    )
    assert node_events[0].type == "Warning"
    assert f"{JOB_NS}/{job.metadata.name}" in node_events[0].message
    # The budget held: the job runs on, and the GPUs were not repartitioned under it.
    still = await core.read_namespaced_pod(job.metadata.name, JOB_NS)
    assert still.status.phase == "Running" and still.metadata.deletion_timestamp is None
    node = await core.read_node(NODE)
    assert node.metadata.labels[STATE] == "pending"

    # The job's owner allows the disruption: the job is evicted and the change goes through.
    await policy_api.patch_namespaced_pod_disruption_budget(
        "train", JOB_NS, {"spec": {"minAvailable": 0}}
    )

    async def applied() -> Any:
        node = await core.read_node(NODE)
        return node if node.metadata.labels.get(STATE) == "success" else None

    await eventually(applied, f"{STATE}=success", seconds=120)
    pod_events = await _events(kube, JOB_NS, job.metadata.name, "MIGChangeEviction")
    assert pod_events, "the evicted pod has no Event saying why it went"
    assert pod_events[0].involved_object.uid == job.metadata.uid
    assert "Eviction API" in pod_events[0].message and CONFIG in pod_events[0].message
    evictions = await _events(kube, "default", NODE, "MIGChangeEviction")
    assert any(job.metadata.name in e.message for e in evictions)
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespaced_pod(job.metadata.name, JOB_NS)
    assert gone.value.status == 404

    async def unblocked() -> bool:
        return _condition(await _policy(kube), "MIGChangeBlocked") is None

    await eventually(unblocked, "the MIGChangeBlocked condition cleared")

    async def instances() -> bool:
        # The paused device plugin comes back and offers the new layout: single strategy,
        # 2 GPUs x 7 instances.
        node = await core.read_node(NODE)
        gpus = {k: v for k, v in node.status.allocatable.items() if k.startswith("nvidia.com/")}
        return gpus == {"nvidia.com/gpu": "14"}

    await eventually(instances, "14 x nvidia.com/gpu (MIG instances)", seconds=120)
    # The Deployment's new pod runs on the repartitioned node.
    await eventually(job_running, "the job back on a MIG instance", seconds=120)
