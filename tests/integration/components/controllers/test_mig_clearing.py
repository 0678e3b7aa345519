"""Clearing a node for a MIG change against a real API server: evictions only (a budget's
429 waits for the budget, never becomes a delete), an Event for each pod that goes, and
what cannot go named on the node and in the ClusterPolicy's status."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import GVK, Object, name_of
from tests.integration.components.controllers.conftest import EVENT, Cluster
from tests.polling import eventually

pytestmark = pytest.mark.integration

POD = GVK("", "v1", "Pod")
PDB = GVK("policy", "v1", "PodDisruptionBudget")
CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


async def gpu_pod(
    cluster: Cluster, name: str, node: str, *, owner_kind: str = "", labels: Any = None
) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": cluster.namespace, "labels": labels or {}}
    if owner_kind:
        ref = {"apiVersion": "apps/v1", "kind": owner_kind, "name": f"{name}-owner"}
        meta["ownerReferences"] = [{**ref, "uid": f"uid-{name}", "controller": True}]
    spec = {
        "nodeName": node,
        "containers": [
            {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ],
    }
    await cluster.client.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    # Running and Ready, as a kubelet (absent here) would report it: the Eviction API lets a
    # pod that never ran go whatever its budget says.
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return await cluster.client.patch(
        POD, name, {"status": status}, namespace=cluster.namespace, subresource="status"
    )


async def count_budget(cluster: Cluster, pdb: Object, *, allowed: int) -> None:
    """What the disruption controller (absent beside a bare API server) would write."""
    status = {
        "observedGeneration": pdb["metadata"]["generation"],
        "disruptionsAllowed": allowed,
        "currentHealthy": 1,
        "desiredHealthy": 1 - allowed,
        "expectedPods": 1,
    }
    await cluster.client.patch(
        PDB,
        name_of(pdb),
        {"status": status},
        namespace=cluster.namespace,
        subresource="status",
    )


async def pod_events(cluster: Cluster, name: str) -> list[Object]:
    items = await cluster.client.list_live(EVENT, namespace=cluster.namespace)
    return [
        e
        for e in items
        if e["involvedObject"].get("name") == name and e["reason"] == "MIGChangeEviction"
    ]


async def test_a_pending_mig_change_evicts_gpu_pods_waits_on_budgets_and_reports_blockers(
    cluster: Cluster,
) -> None:
    policy = (await cluster.create_policy("mig"))["metadata"]["name"]
    node = await cluster.add_node("mig", mig=True, labels={CONFIG: "all-1g.10gb"})
    other = await cluster.add_node("busy", mig=True)
    job = await gpu_pod(cluster, "job", node, owner_kind="ReplicaSet", labels={"app": "job"})
    await gpu_pod(cluster, "held", node, owner_kind="ReplicaSet", labels={"app": "held"})
    await gpu_pod(cluster, "agent", node, owner_kind="DaemonSet")
    await gpu_pod(cluster, "elsewhere", other, owner_kind="ReplicaSet")
    # A budget that allows no disruption: the Eviction API refuses with a 429.
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"}
    budget |= {"metadata": {"name": "held", "namespace": cluster.namespace}}
    budget |= {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}}}
    pdb = await cluster.client.create(budget)
    await count_budget(cluster, pdb, allowed=0)
    await cluster.settle()
    # Not pending yet (the MIG manager has not found a change): nothing moves.
    assert not await pod_events(cluster, "job")

    await cluster.label_node(node, {STATE: "pending"})

    async def blocked() -> Any:
        cond = await cluster.condition(policy, "MIGChangeBlocked")
        return cond if cond and "held" in cond["message"] and "agent" in cond["message"] else None

    cond = await eventually(blocked, "the policy naming what blocks the MIG change")
    assert cond["status"] == "True" and node in cond["message"]
    budget_name = f"PodDisruptionBudget {cluster.namespace}/held"
    assert f"{budget_name} allows no disruption now" in cond["message"]
    assert "DaemonSet agent-owner would recreate it" in cond["message"]
    events = [e for e in await cluster.events(node) if e["reason"] == "MIGChangeBlocked"]
    assert events and events[-1]["type"] == "Warning"
    # The free pod was evicted (terminating: no kubelet here finishes it), with an Event on it.
    live = await cluster.client.get_live(POD, "job", cluster.namespace)
    assert (
        live["metadata"].get("deletionTimestamp")
        and live["metadata"]["uid"] == job["metadata"]["uid"]
    )
    evicted = await pod_events(cluster, "job")
    assert evicted[0]["type"] == "Warning" and "Eviction API" in evicted[0]["message"]
    # The budget's pod and the DaemonSet's pod are untouched, as is the other node's.
    for name in ("held", "agent", "elsewhere"):
        pod = await cluster.client.get_live(POD, name, cluster.namespace)
        assert not pod["metadata"].get("deletionTimestamp"), name

    # The budget allows one disruption now (its owner lowered what it needs).
    await count_budget(cluster, pdb, allowed=1)

    async def held_evicted() -> bool:
        pod = await cluster.client.get_live(POD, "held", cluster.namespace)
        return bool(pod["metadata"].get("deletionTimestamp")) and bool(
            await pod_events(cluster, "held")
        )

    await eventually(held_evicted, "the budget's pod evicted once the budget allows it")

    # The change is done (or withdrawn): nothing is reported as blocking any more.
    await cluster.label_node(node, {STATE: "success"})

    async def cleared() -> bool:
        return await cluster.condition(policy, "MIGChangeBlocked") is None

    await eventually(cleared, "the MIGChangeBlocked condition gone")
    for name in ("job", "held", "agent", "elsewhere"):
        await cluster.client.delete(
            POD, name, namespace=cluster.namespace, grace_period_seconds=0, missing_ok=True
        )
