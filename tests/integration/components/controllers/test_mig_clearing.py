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
    cluster: Cluster,
    name: str,
    node: str,
    *,
    owner_kind: str = "",
    labels: Any = None,
    empty_dir: bool = False,
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
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
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


async def terminating(cluster: Cluster, name: str) -> bool:
    pod = await cluster.client.get_live(POD, name, cluster.namespace)
    return bool(pod["metadata"].get("deletionTimestamp"))


async def remove_pods(cluster: Cluster, *names: str) -> None:
    for name in names:
        await cluster.client.delete(
            POD, name, namespace=cluster.namespace, grace_period_seconds=0, missing_ok=True
        )


async def test_a_bare_gpu_pod_or_one_with_emptydir_holds_the_whole_node_and_is_named(
    cluster: Cluster,
) -> None:
    # kubectl drain's rules: a pod no controller recreates, or one whose emptyDir data would
    # be lost, refuses the node; nothing on it is evicted, not even the pods free to go.
    policy = (await cluster.create_policy("mig"))["metadata"]["name"]
    node = await cluster.add_node("mig", mig=True, labels={CONFIG: "all-1g.10gb"})
    await gpu_pod(cluster, "bare", node)
    await gpu_pod(cluster, "scratch", node, owner_kind="ReplicaSet", empty_dir=True)
    await gpu_pod(cluster, "free", node, owner_kind="ReplicaSet")
    await cluster.settle()

    await cluster.label_node(node, {STATE: "pending"})

    async def blocked() -> Any:
        cond = await cluster.condition(policy, "MIGChangeBlocked")
        return cond if cond and node in cond["message"] else None

    cond = await eventually(blocked, "the policy naming what blocks the MIG change")
    message = cond["message"]
    assert (
        f"{cluster.namespace}/bare (not managed by a controller; set "
        "migManager.podDeletion.force to remove it)" in message
    )
    assert (
        f"{cluster.namespace}/scratch (uses emptyDir, whose data would be lost; set "
        "migManager.podDeletion.deleteEmptyDir)" in message
    )
    assert "no GPU pod is evicted while these block" in message
    events = [e for e in await cluster.events(node) if e["reason"] == "MIGChangeBlocked"]
    assert events and "bare" in events[-1]["message"] and "scratch" in events[-1]["message"]
    await cluster.settle()
    for name in ("bare", "scratch", "free"):
        assert not await terminating(cluster, name), name
        assert not await pod_events(cluster, name), name
    await remove_pods(cluster, "bare", "scratch", "free")


async def test_a_policy_that_opts_in_evicts_bare_and_emptydir_gpu_pods(cluster: Cluster) -> None:
    policy = (await cluster.create_policy("mig"))["metadata"]["name"]
    node = await cluster.add_node("mig", mig=True, labels={CONFIG: "all-1g.10gb"})
    await gpu_pod(cluster, "bare", node)
    await gpu_pod(cluster, "scratch", node, owner_kind="ReplicaSet", empty_dir=True)
    await cluster.settle()
    await cluster.label_node(node, {STATE: "pending"})

    async def blocked() -> Any:
        return await cluster.condition(policy, "MIGChangeBlocked")

    await eventually(blocked, "the MIG change blocked by the bare and emptyDir pods")
    # The admin accepts losing them (the driver upgrade's podDeletion names, under migManager).
    pod_deletion = {"force": True, "deleteEmptyDir": True}
    await cluster.patch_policy(policy, {"migManager": {"podDeletion": pod_deletion}})

    async def both_evicted() -> bool:
        return all(
            [
                await terminating(cluster, n) and bool(await pod_events(cluster, n))
                for n in ("bare", "scratch")
            ]
        )

    await eventually(both_evicted, "the bare and emptyDir pods evicted once allowed")

    async def unblocked() -> bool:
        return await cluster.condition(policy, "MIGChangeBlocked") is None

    await eventually(unblocked, "nothing reported as blocking once both were evicted")
    await remove_pods(cluster, "bare", "scratch")


async def test_pending_is_ignored_unless_the_active_policy_runs_the_mig_manager_there(
    cluster: Cluster,
) -> None:
    policy = await cluster.create_policy("mig", {"migManager": {"enabled": False}})
    name = policy["metadata"]["name"]
    node = await cluster.add_node("mig", mig=True, labels={CONFIG: "all-1g.10gb"})
    # Not a MIG node: no MIG manager runs there, whatever its labels say.
    plain = await cluster.add_node("plain", labels={CONFIG: "all-1g.10gb"})
    await gpu_pod(cluster, "job", node, owner_kind="ReplicaSet")
    await gpu_pod(cluster, "other", plain, owner_kind="ReplicaSet")
    await cluster.settle()
    # Anyone may write the MIG manager's label; with no MIG manager it asks for nothing.
    await cluster.label_node(node, {STATE: "pending"})
    await cluster.label_node(plain, {STATE: "pending"})
    await cluster.settle()
    for pod in ("job", "other"):
        assert not await terminating(cluster, pod), pod
        assert not await pod_events(cluster, pod), pod
    assert await cluster.condition(name, "MIGChangeBlocked") is None

    # The policy turns the MIG manager on: the MIG node's change goes ahead, the other not.
    await cluster.patch_policy(name, {"migManager": {"enabled": True}})

    async def evicted() -> bool:
        return await terminating(cluster, "job")

    await eventually(evicted, "the MIG node's GPU pod evicted once the MIG manager is enabled")
    await cluster.settle()
    assert not await terminating(cluster, "other")
    await remove_pods(cluster, "job", "other")
