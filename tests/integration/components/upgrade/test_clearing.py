"""Clearing a node against a real API server: jobs, pod deletion, drain through evictions."""

from __future__ import annotations

from components.upgrade import DRAIN_SKIP_LABEL, FAILED_STATE, MESSAGE
from reconciler import annotations_of, name_of

from .conftest import PDB, POD, Kit, S, eventually


async def _upgrade(kit: Kit) -> None:
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")


async def _state(kit: Kit, node: str) -> str:
    return (await kit.states())[node]


async def test_jobs_are_waited_for_then_the_upgrade_goes_on(kit: Kit) -> None:
    node = await kit.add_node("a")
    job = await kit.gpu_pod("train", node, labels={"kind": "batch"})
    await kit.cluster_policy(
        {"autoUpgrade": True, "waitForCompletion": {"podSelector": "kind=batch"}}
    )
    await kit.start_operator()
    await _upgrade(kit)

    async def waiting() -> bool:
        return await _state(kit, node) == S.WAIT_FOR_JOBS_REQUIRED

    await eventually(waiting, "the node waiting for the job")
    # The job finishes: its pod reports Succeeded.
    await kit.client.patch(
        POD, job, {"status": {"phase": "Succeeded"}}, namespace=kit.namespace, subresource="status"
    )
    await eventually(kit.upgraded, "the upgrade after the job finished")


async def test_a_pod_that_cannot_be_deleted_fails_the_node_until_it_is_gone(kit: Kit) -> None:
    node = await kit.add_node("a")
    bare = await kit.gpu_pod("bare", node, managed=False)
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await _upgrade(kit)

    async def failed() -> bool:
        return await _state(kit, node) == S.UPGRADE_FAILED

    await eventually(failed, "upgrade-failed: the bare pod needs podDeletion.force")
    n = await kit.node(node)
    assert annotations_of(n)[FAILED_STATE] == S.POD_DELETION_REQUIRED
    assert bare in annotations_of(n)[MESSAGE] and "force" in annotations_of(n)[MESSAGE]
    assert n["spec"].get("unschedulable") is True  # a failed node stays cordoned
    assert [p for p in await kit.pods(app="train") if name_of(p) == bare]
    events = await kit.events(node)
    assert any(e["type"] == "Warning" and bare in e["message"] for e in events)

    # Its owner removes it: nothing blocks the deletion any more, the node recovers.
    await kit.client.delete(POD, bare, namespace=kit.namespace)
    await eventually(kit.upgraded, "recovery once the blocking pod is gone")
    assert not (await kit.node(node))["spec"].get("unschedulable")


async def test_drain_honours_a_disruption_budget_times_out_and_recovers(kit: Kit) -> None:
    node = await kit.add_node("a")
    operator_pod = "gpu-operator-abc"
    # A GPU pod with emptyDir data: pod deletion may not take it (no deleteEmptyDir), the
    # drain may (its own deleteEmptyDir), through an eviction the budget refuses.
    held = await kit.gpu_pod(
        "db", node, labels={"role": "db"}, volumes=[{"name": "scratch", "emptyDir": {}}]
    )
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "x",
             "controller": True}  # fmt: skip
    await kit.pod(operator_pod, node, {"app": "gpu-operator"}, owner=owner)
    await kit.pod("infra", node, {"app": "infra", DRAIN_SKIP_LABEL: "true"}, owner=owner)
    pdb = await kit.client.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": kit.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"role": "db"}}},
        }
    )

    async def budget(allowed: int) -> None:
        # What the disruption controller would write (no controller-manager runs here).
        await kit.client.patch(
            PDB,
            "db",
            {
                "status": {
                    "observedGeneration": pdb["metadata"]["generation"],
                    "disruptionsAllowed": allowed,
                    "currentHealthy": 1,
                    "desiredHealthy": 1 - allowed if allowed < 1 else 0,
                    "expectedPods": 1,
                }
            },
            namespace=kit.namespace,
            subresource="status",
        )

    await budget(0)
    await kit.cluster_policy(
        {
            "autoUpgrade": True,
            "drain": {"enable": True, "deleteEmptyDir": True, "timeoutSeconds": 2},
        }
    )
    await kit.start_operator(operator_pod=(kit.namespace, operator_pod), trim_pods=True)
    await _upgrade(kit)

    async def failed() -> bool:
        return await _state(kit, node) == S.UPGRADE_FAILED

    await eventually(failed, "the drain timing out against the budget")
    n = await kit.node(node)
    assert annotations_of(n)[FAILED_STATE] == S.DRAIN_REQUIRED
    assert "PodDisruptionBudget" in annotations_of(n)[MESSAGE]
    assert [p for p in await kit.pods(app="train") if name_of(p) == held]
    events = await kit.events(node)
    assert any("eviction refused" in e["message"] for e in events)

    await budget(1)  # the budget allows a disruption again
    await eventually(kit.upgraded, "recovery once the budget allows the eviction")
    assert not [p for p in await kit.pods(app="train") if name_of(p) == held]
    # Never evicted: the operator's own pod, and the pod labelled to skip the drain.
    assert await kit.pods(app="gpu-operator")
    assert await kit.pods(app="infra")
    assert not (await kit.node(node))["spec"].get("unschedulable")
