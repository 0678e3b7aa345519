"""Issue 16's end-to-end checks for MIG and MPS, through the API as an admin and a job
owner see them.

*A MIG change on a node that runs a GPU job protected by a PodDisruptionBudget* (item 2).
The simulated MIG manager, like mig-parted on real GPUs, will not repartition GPUs a pod
holds: the change stays `pending` until the operator has cleared the node. The operator
clears it through the Eviction API, so the budget holds the job in place (and is named as
what blocks) until its owner relaxes it; then the job is evicted, with an Event saying so,
and the change goes through.

*An MPS config* (item 1): a device-plugin config with `sharing.mps`, used by one node
through its `nvidia.com/device-plugin.config` label, brings the MPS control daemon to that
node alone, and the node offers `replicas` clients per GPU.

*With the node agent* (issue 17 item 4): a pod that requests no GPU but sees them all
(`NVIDIA_VISIBLE_DEVICES=all`) holds a GPU process the agent lists. It is a bare pod (no
controller: one would start it again at once and hold the GPUs anew), so by `kubectl
drain`'s rules it holds the change and is named (issue 47 item 2) until the policy lets a
MIG change evict such pods (`migManager.podDeletion.force`); then it is evicted, and the
change goes through only once the agent lists no process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import GpuProcessEntry, gpu_processes
from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from tests.e2e.operator._harness import (
    NAMESPACE,
    create_policy,
    patch_policy,
    policy,
    wait_counted,
    wait_ready,
)
from tests.polling import eventually

NODE = "gpu-node-0000"
"""The node whose MIG layout changes (the simulator names them `gpu-node-NNNN`)."""
MPS_NODE = "gpu-node-0001"
"""The node that shares its GPUs through MPS."""
JOB_NS = "ml"
CONFIG = "all-1g.10gb"
STATE = "nvidia.com/mig.config.state"
LABELS = {"app": "train"}


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    # Two MIG-capable GPU nodes (two H100s each) and a CPU node.
    config = ClusterConfig(
        gpu_nodes=2,
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
                    "nodeSelector": {"kubernetes.io/hostname": NODE},
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


async def _ensure_policy(kube: Any) -> None:
    """The ClusterPolicy both tests run under (MIG instances as `nvidia.com/gpu`), ready."""
    try:
        await policy(kube)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        await create_policy(kube, {"mig": {"strategy": "single"}})
    await wait_ready(kube)


async def test_a_mig_change_waits_for_a_budget_then_evicts_the_gpu_pod_and_applies(
    operator: Any, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    assert operator_cluster.gpu_nodes == [NODE, MPS_NODE]
    core = client.CoreV1Api(kube)
    await _ensure_policy(kube)

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
        return _condition(await policy(kube), "MIGChangeBlocked")

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
    # The operator records its Events after the eviction returns; the MIG manager may say
    # `success` (the pod gone) before they are written.
    pod_events = await eventually(
        lambda: _events(kube, JOB_NS, job.metadata.name, "MIGChangeEviction"),
        "an Event on the evicted pod saying why it went",
    )
    assert pod_events[0].involved_object.uid == job.metadata.uid
    assert "Eviction API" in pod_events[0].message and CONFIG in pod_events[0].message
    evictions = await _events(kube, "default", NODE, "MIGChangeEviction")
    assert any(job.metadata.name in e.message for e in evictions)
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespaced_pod(job.metadata.name, JOB_NS)
    assert gone.value.status == 404

    async def unblocked() -> bool:
        return _condition(await policy(kube), "MIGChangeBlocked") is None

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


MPS_CONFIG = """version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
MPS_APP = "nvidia-device-plugin-mps-control-daemon"


async def test_an_mps_config_brings_the_control_daemon_and_shared_gpus_to_its_node(
    operator: Any, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    await _ensure_policy(kube)
    # Two configs: whole GPUs by default, MPS where a node's label asks for it.
    data = {"plain": "version: v1\n", "mps-4": MPS_CONFIG}
    await core.create_namespaced_config_map(
        NAMESPACE, {"metadata": {"name": "plugin-configs"}, "data": data}
    )
    await operator_cluster.set_node_labels(MPS_NODE, {"nvidia.com/device-plugin.config": "mps-4"})
    config = {"name": "plugin-configs", "default": "plain"}
    await patch_policy(kube, {"devicePlugin": {"config": config}})

    async def daemon_nodes() -> set[str] | None:
        pods = (await core.list_namespaced_pod(NAMESPACE, label_selector=f"app={MPS_APP}")).items
        running = {p.spec.node_name for p in pods if p.status.phase == "Running"}
        return running or None

    assert await eventually(daemon_nodes, "the MPS control daemon running", seconds=180) == {
        MPS_NODE
    }

    async def shared() -> Any:
        node = await core.read_node(MPS_NODE)
        return node if node.status.allocatable.get("nvidia.com/gpu") == "8" else None

    await eventually(shared, f"{MPS_NODE} offering 2 GPUs x 4 MPS clients", seconds=120)

    async def labelled() -> Any:
        # GPU feature discovery restarts with the new config too and relabels the node
        # once it runs again, which may be after the device plugin already offers the
        # shared GPUs.
        labels = (await core.read_node(MPS_NODE)).metadata.labels
        return labels if labels.get("nvidia.com/gpu.sharing-strategy") != "none" else None

    labels = await eventually(labelled, f"{MPS_NODE} labelled by GFD for sharing", seconds=120)
    assert labels.get("nvidia.com/gpu.sharing-strategy") == "mps"
    assert labels.get("nvidia.com/gpu.replicas") == "4"
    other = await core.read_node(NODE)
    assert other.metadata.labels.get("nvidia.com/gpu.sharing-strategy") != "mps"
    states = await wait_counted(kube, {"state-mps-control-daemon": 1})
    assert states["state-mps-control-daemon"]["state"] == "ready"
    assert await daemon_nodes() == {MPS_NODE}


def _sees_all_gpus() -> dict[str, Any]:
    """A pod that requests no GPU and sees them all through the NVIDIA runtime's variable:
    nothing but the node agent's process list says it uses them."""
    return {
        "metadata": {"name": "smi-watch", "labels": {"app": "smi-watch"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                }
            ],
        },
    }


async def test_with_the_node_agent_a_pod_holding_a_gpu_process_is_evicted_before_the_change(
    operator: Any, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    await _ensure_policy(kube)
    await patch_policy(kube, {"nodeAgent": {"enabled": True}})
    try:
        await core.create_namespace({"metadata": {"name": JOB_NS}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    # Only the process-holding pod on the node: no other GPU pod to clear.
    try:
        await client.AppsV1Api(kube).delete_namespaced_deployment("train", JOB_NS)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    await core.create_namespaced_pod(JOB_NS, _sees_all_gpus())

    async def listed() -> list[GpuProcessEntry] | None:
        node = await core.read_node(NODE)
        found = gpu_processes(node.metadata.annotations or {})
        return found if [p.pod_key for p in found] == [(JOB_NS, "smi-watch")] else None

    pod = await core.read_namespaced_pod("smi-watch", JOB_NS)
    processes = await eventually(listed, "the agent listing the pod's GPU process", seconds=180)
    assert processes[0].pod_uid == pod.metadata.uid

    before = await core.read_node(NODE)
    assert before.metadata.labels.get("nvidia.com/mig.config") == CONFIG  # the first test's
    # The admin turns MIG off on the node: the pod requests no GPU, yet the agent saw its
    # process, so it must go. No controller would bring it back: like `kubectl drain`
    # without --force, the change holds and names it.
    await operator_cluster.set_node_labels(NODE, {"nvidia.com/mig.config": "all-disabled"})

    async def held() -> dict[str, Any] | None:
        found = _condition(await policy(kube), "MIGChangeBlocked")
        return found if found and "all-disabled" in found["message"] else None

    condition = await eventually(held, "the bare pod named as holding the MIG change")
    assert f"{JOB_NS}/smi-watch (not managed by a controller" in condition["message"]
    still = await core.read_namespaced_pod("smi-watch", JOB_NS)
    assert still.metadata.deletion_timestamp is None
    # The admin lets MIG changes evict bare pods: it is evicted, and the change goes through
    # once no process is left.
    await patch_policy(kube, {"migManager": {"podDeletion": {"force": True}}})

    async def mig_off() -> Any:
        # `success` alone may still be the previous change's: whole GPUs offered again
        # (2, not 14 MIG instances) say this one went through.
        node = await core.read_node(NODE)
        whole = (node.status.allocatable or {}).get("nvidia.com/gpu") == "2"
        return node if whole and node.metadata.labels.get(STATE) == "success" else None

    await eventually(mig_off, f"{STATE}=success and whole GPUs again", seconds=180)

    async def no_process() -> bool:
        # The node software writes the MIG manager's labels first and lets the agent look
        # after them: `success` may be read before the agent's list is empty.
        node = await core.read_node(NODE)
        return gpu_processes(node.metadata.annotations or {}) == []

    await eventually(no_process, f"the agent listing no GPU process on {NODE}", seconds=60)
    with pytest.raises(client.ApiException) as gone:
        await core.read_namespaced_pod("smi-watch", JOB_NS)
    assert gone.value.status == 404
    # The operator records its Events after the eviction returns, maybe after `success`.
    pod_events = await eventually(
        lambda: _events(kube, JOB_NS, "smi-watch", "MIGChangeEviction"),
        "an Event on the evicted pod saying why it went",
    )
    assert pod_events[0].involved_object.uid == pod.metadata.uid
    assert "all-disabled" in pod_events[0].message
