"""GPU remediation on a simulated cluster (`remediation.enabled`): what an admin sees when a
GPU breaks. One cluster for the module; each test breaks GPUs on nodes of its own.

The simulator makes a GPU sick (`gpusim.error_patch`: an XID, or a reset that fails); the
simulated device plugin stops offering it, the product's node agent reports it and resets
it when the operator asks.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import (
    REBOOT_RESULT_ANNOTATION,
    REMEDIATION_FAILED_CONDITION,
    REMEDIATION_STATE_LABEL,
    REMEDIATION_TAINT,
    RESET_REQUEST_ANNOTATION,
)
from gpusim import ClusterConfig, SimulatedCluster, error_patch, load_documents
from tests.e2e.operator._harness import REPO, OperatorProcess, create_policy
from tests.e2e.operator._harness import policy as _policy
from tests.e2e.operator._harness import wait_ready as _wait_ready
from tests.polling import eventually

pytestmark = pytest.mark.e2e

GPUS = 2
WAIT = float(os.environ.get("GPU_OPERATOR_E2E_REMEDIATION_WAIT", "120"))
"""Seconds any one step may take on a loaded machine (not asserted: a ceiling)."""
POLICY = {
    "nodeAgent": {"enabled": True},
    "remediation": {
        "enabled": True,
        "maxParallel": 1,
        "maxPerNodePerWindow": 1,
        "drainTimeoutSeconds": 0,
        "resetTimeoutSeconds": 60,
        "validationTimeoutSeconds": 60,
    },
}


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    """Six GPU nodes of two GPUs: each test breaks its own."""
    crds = load_documents(sorted((REPO / "config" / "crd").glob("*.yaml")))
    config = ClusterConfig(gpu_nodes=6, cpu_nodes=0, gpus_per_node=GPUS)
    with SimulatedCluster(config, crds=crds) as sim:
        yield sim


@pytest.fixture
async def ready(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> AsyncIterator[list[str]]:
    """The stack rolled out with remediation on (once); the GPU node names."""
    custom = client.CustomObjectsApi(kube)
    found = await custom.list_cluster_custom_object("nvidia.com", "v1", "clusterpolicies")
    if not found["items"]:
        await create_policy(kube, POLICY)
        await _wait_ready(kube)
        core = client.CoreV1Api(kube)
        for name in operator_cluster.gpu_nodes:
            await eventually(
                lambda n=name: _validated(core, n), f"{name} GPUValidated=True", seconds=WAIT
            )
    yield operator_cluster.gpu_nodes


async def _validated(core: Any, name: str) -> bool | None:
    node = await core.read_node(name)
    c = _conditions(node).get("GPUValidated")
    return True if c is not None and c.status == "True" else None


def _conditions(node: Any) -> dict[str, Any]:
    return {c.type: c for c in node.status.conditions or []}


async def _break(core: Any, name: str, gpu: int, **what: Any) -> None:
    node = await core.read_node(name)
    body = error_patch(node.metadata.annotations or {}, gpu, **what)
    await core.patch_node(name, {"metadata": {"annotations": body}})


def _state(node: Any) -> str | None:
    return (node.metadata.labels or {}).get(REMEDIATION_STATE_LABEL)


def _tainted(node: Any) -> bool:
    return any(t.key == REMEDIATION_TAINT for t in node.spec.taints or [])


def _offered(node: Any) -> int:
    return int((node.status.allocatable or {}).get("nvidia.com/gpu", "0"))


async def _in_state(core: Any, name: str, state: str) -> Any:
    async def check() -> Any:
        node = await core.read_node(name)
        return node if _state(node) == state else None

    return await eventually(check, f"{name} in remediation state {state}", seconds=WAIT)


async def _reasons(core: Any, name: str) -> list[str]:
    events = await core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}"
    )
    ordered = sorted(events.items, key=lambda e: e.metadata.creation_timestamp)
    return [e.reason for e in ordered]


async def test_xid_79_fences_drains_resets_and_returns_the_node_across_a_restart(
    ready: list[str], operator: OperatorProcess, kube: Any
) -> None:
    """XID 79 on one GPU: tainted, the GPU pod evicted once its PDB allows it (the
    eviction waits), the operator killed meanwhile resumes, reset, re-validated, untainted,
    both GPUs offered again, each step an Event."""
    core = client.CoreV1Api(kube)
    apps = client.AppsV1Api(kube)
    policy = client.PolicyV1Api(kube)
    name = ready[0]
    labels = {"app": "trainer"}
    await apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "trainer"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": name},
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
        },
    )
    await policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "metadata": {"name": "trainer"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": labels}},
        },
    )

    async def running() -> Any:
        pods = await core.list_namespaced_pod("default", label_selector="app=trainer")
        live = [p for p in pods.items if p.status.phase == "Running"]
        return live[0] if live else None

    first = await eventually(running, "the trainer pod running", seconds=WAIT)
    await _break(core, name, 1, xid=79)

    draining = await _in_state(core, name, "drain")
    assert _tainted(draining)
    assert _offered(draining) == GPUS - 1  # the device plugin dropped the sick GPU

    async def blocked() -> list[str] | None:
        reasons = await _reasons(core, name)
        return reasons if "GPURemediationBlocked" in reasons else None

    await eventually(blocked, "the PDB named as what the drain waits for", seconds=WAIT)
    still = await core.read_namespaced_pod(first.metadata.name, "default")
    assert still.metadata.deletion_timestamp is None  # the budget held

    async def listed() -> list[Any] | None:
        entries = ((await _policy(kube)).get("status") or {}).get("remediation") or []
        return entries or None

    (entry,) = await eventually(listed, "the policy status listing the node", seconds=WAIT)
    assert (entry["node"], entry["step"], entry["gpu"]) == (name, "drain", "1")
    assert "XID 79" in entry["reason"]

    operator.kill()
    operator.start()
    await policy.delete_namespaced_pod_disruption_budget("trainer", "default")

    done = await _in_state(core, name, "done")
    assert not _tainted(done)

    async def offered_again() -> Any:
        node = await core.read_node(name)
        return node if _offered(node) == GPUS else None

    node = await eventually(offered_again, f"{name} offering {GPUS} GPUs again", seconds=WAIT)
    assert _conditions(node)["GPUHealthy"].status == "True"
    pods = await core.list_namespaced_pod("default", label_selector="app=trainer")
    assert first.metadata.uid not in {p.metadata.uid for p in pods.items}  # it was evicted
    reasons = await _reasons(core, name)
    steps = [r for r in reasons if r.startswith("GPURemediation") and r != "GPURemediationBlocked"]
    assert list(dict.fromkeys(steps)) == [
        "GPURemediationTainted",
        "GPURemediationDraining",
        "GPURemediationResetting",
        "GPURemediationValidating",
        "GPURemediationDone",
    ]
    await apps.delete_namespaced_deployment("trainer", "default")


async def test_three_sick_nodes_with_a_limit_of_one_go_one_at_a_time(
    ready: list[str], kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    names = ready[1:4]
    for name in names:
        await _break(core, name, 0, xid=79)
    most = 0
    queued = False

    async def all_done() -> bool | None:
        nonlocal most, queued
        nodes = [await core.read_node(n) for n in names]
        states = [_state(n) for n in nodes]
        under_way = sum(1 for s in states if s in ("taint", "drain", "reset", "validate"))
        most = max(most, under_way)
        healthy = [_conditions(n)["GPUHealthy"].status for n in nodes]
        if under_way and any(
            s is None and h == "False" for s, h in zip(states, healthy, strict=True)
        ):
            queued = True  # a sick node waits while another is remediated
        return True if states == ["done"] * 3 else None

    await eventually(all_done, "the three nodes remediated", seconds=3 * WAIT, interval=0.2)
    assert most == 1
    assert queued


async def test_a_gpu_failing_again_within_the_window_stays_fenced(
    ready: list[str], kube: Any
) -> None:
    core = client.CoreV1Api(kube)
    name = ready[4]
    await _break(core, name, 1, xid=79)
    await _in_state(core, name, "done")
    await _break(core, name, 1, xid=79)
    failed = await _in_state(core, name, "failed")
    assert _tainted(failed)

    async def condition() -> Any:
        c = _conditions(await core.read_node(name)).get(REMEDIATION_FAILED_CONDITION)
        return c if c is not None and c.status == "True" else None

    c = await eventually(condition, f"{name} {REMEDIATION_FAILED_CONDITION}=True", seconds=WAIT)
    assert "GPU 1" in c.message and "XID 79" in c.message and "again" in c.message
    asked = (failed.metadata.annotations or {}).get(RESET_REQUEST_ANNOTATION)
    await asyncio.sleep(3)  # never loops: no new reset is asked, the node stays failed
    node = await core.read_node(name)
    assert _state(node) == "failed" and _tainted(node)
    assert (node.metadata.annotations or {}).get(RESET_REQUEST_ANNOTATION) == asked


async def test_a_failed_reset_writes_the_reboot_sentinel(ready: list[str], kube: Any) -> None:
    core = client.CoreV1Api(kube)
    name = ready[5]
    await _break(core, name, 0, xid=79, reset_fails=True)
    failed = await _in_state(core, name, "failed")
    assert _tainted(failed)

    async def sentinel() -> str | None:
        node = await core.read_node(name)
        answer = (node.metadata.annotations or {}).get(REBOOT_RESULT_ANNOTATION, "")
        return answer if answer.endswith("/written") else None

    await eventually(sentinel, "the node agent wrote the reboot sentinel", seconds=WAIT)
    c = _conditions(await core.read_node(name))[REMEDIATION_FAILED_CONDITION]
    assert c.status == "True" and "reset failed" in c.message and "GPU 0" in c.message
