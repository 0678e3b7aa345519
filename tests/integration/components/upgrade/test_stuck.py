"""Stuck states explain themselves, against a real API server: what holds a waiting node
is named in the policy's status and in one Event; a wait that times out fails the node
with that reason; a failed node is retried with a backoff kept on the node; and it counts
as recovered only when its driver is current and validated."""

from __future__ import annotations

import asyncio

from components.upgrade import FAILED_STATE, MESSAGE, RETRIES, Backoff
from reconciler import Object, annotations_of
from reconciler.kinds import CONTROLLER_REVISION

from .conftest import CLUSTER_POLICY, DS_NAME, PDB, POD, Kit, S, eventually

SCRATCH = [{"name": "scratch", "emptyDir": {}}]
"""emptyDir data: pod deletion may not take the pod, the drain may (its own consent)."""
DRAIN = {"enable": True, "deleteEmptyDir": True}


class Budget:
    """A PodDisruptionBudget over the `role=db` pods, whose status the test writes (no
    disruption controller runs here)."""

    def __init__(self, kit: Kit) -> None:
        self.kit = kit
        self.generation = 0

    async def create(self) -> None:
        pdb = await self.kit.client.create(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db", "namespace": self.kit.namespace},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"role": "db"}}},
            }
        )
        self.generation = pdb["metadata"]["generation"]
        await self.allow(0)

    async def allow(self, allowed: int, healthy: int = 1) -> None:
        await self.kit.client.patch(
            PDB,
            "db",
            {
                "status": {
                    "observedGeneration": self.generation,
                    "disruptionsAllowed": allowed,
                    "currentHealthy": healthy,
                    "desiredHealthy": 1,
                    "expectedPods": 1,
                }
            },
            namespace=self.kit.namespace,
            subresource="status",
        )


async def _entry(kit: Kit, node: str) -> Object:
    cp = await kit.client.get_live(CLUSTER_POLICY, f"policy-{kit.tag}")
    for entry in ((cp.get("status") or {}).get("upgrade") or {}).get("nodes") or []:
        if entry.get("name") == node:
            return dict(entry)
    return {}


async def _state(kit: Kit, node: str) -> str:
    return (await kit.states())[node]


async def _retries(kit: Kit, node: str) -> int:
    return int(annotations_of(await kit.node(node)).get(RETRIES, "0"))


async def test_a_budget_blocking_the_drain_is_named_in_status_and_in_one_event(kit: Kit) -> None:
    node = await kit.add_node("a")
    await kit.gpu_pod("db", node, labels={"role": "db"}, volumes=SCRATCH)
    budget = Budget(kit)
    await budget.create()
    await kit.cluster_policy({"autoUpgrade": True, "drain": {**DRAIN, "timeoutSeconds": 600}})
    await kit.start_operator(trim_pods=True)
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    named = f"{kit.namespace}/gpu-db (PodDisruptionBudget {kit.namespace}/db allows no disruption)"

    async def explained() -> Object | None:
        entry = await _entry(kit, node)
        return entry if named in str(entry.get("message")) else None

    entry = await eventually(explained, "the status to name the budget")
    assert entry["state"] == S.DRAIN_REQUIRED and entry["since"]
    assert "gives up at" in entry["message"]

    def told(events: list[Object]) -> list[Object]:
        return [e for e in events if named in e["message"]]

    async def event() -> list[Object] | None:
        return told(await kit.events(node)) or None

    await eventually(event, "an Event naming the budget")
    # The budget's status changes (not what blocks): reconciles, but the same reason.
    for healthy in (2, 1, 2):
        await budget.allow(0, healthy)
    await asyncio.sleep(1.0)
    events = told(await kit.events(node))
    assert len(events) == 1 and events[0].get("count", 1) == 1, events
    assert events[0]["message"].startswith("drain-required: waiting for")

    await budget.allow(1)
    await eventually(kit.upgraded, "the drain once the budget allows it")

    async def cleared() -> bool:
        entry = await _entry(kit, node)
        return not entry.get("message")  # a node done is no longer listed

    await eventually(cleared, "the status to stop naming the budget")


async def test_a_drain_timeout_fails_the_node_which_is_retried_with_backoff(kit: Kit) -> None:
    node = await kit.add_node("a")
    await kit.gpu_pod("db", node, labels={"role": "db"}, volumes=SCRATCH)
    budget = Budget(kit)
    await budget.create()
    await kit.cluster_policy({"autoUpgrade": True, "drain": {**DRAIN, "timeoutSeconds": 1}})
    backoff = Backoff(initial=1, cap=2)
    await kit.start_operator(trim_pods=True, retry_backoff=backoff)
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def failed() -> bool:
        return await _state(kit, node) == S.UPGRADE_FAILED

    await eventually(failed, "the drain timing out")
    n = await kit.node(node)
    assert annotations_of(n)[FAILED_STATE] == S.DRAIN_REQUIRED
    message = annotations_of(n)[MESSAGE]
    assert (
        "drain timed out after 1s" in message
        and f"PodDisruptionBudget {kit.namespace}/db" in message
    )
    failure_events = [e for e in await kit.events(node) if e["type"] == "Warning"]
    assert any("-> upgrade-failed: drain timed out" in e["message"] for e in failure_events)

    async def retried_twice() -> bool:
        return await _retries(kit, node) >= 2

    await eventually(retried_twice, "two retries, each back into the drain")
    entry = await _entry(kit, node)
    assert entry["state"] in (S.UPGRADE_FAILED, S.DRAIN_REQUIRED), entry

    # A restart resumes the count from the node, not from 1.
    await kit.kill_operator()
    before = await _retries(kit, node)
    await kit.start_operator(trim_pods=True, retry_backoff=backoff)

    async def counted_on() -> bool:
        return await _retries(kit, node) > before

    await eventually(counted_on, "the next retry after the restart")

    await budget.allow(1)
    await eventually(kit.upgraded, "the upgrade once the budget allows the eviction")
    assert RETRIES not in annotations_of(await kit.node(node))


async def test_a_failed_node_recovers_only_when_its_driver_is_current_and_validated(
    kit: Kit,
) -> None:
    node = await kit.add_node("a")
    bare = await kit.gpu_pod("bare", node, managed=False)  # needs podDeletion.force
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator(retry_backoff=Backoff(initial=1, cap=1))
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def failed() -> bool:
        return await _state(kit, node) == S.UPGRADE_FAILED

    await eventually(failed, "pod deletion failing on the bare pod")
    # The DaemonSet's revisions vanish from view: the old driver pod is ready, its
    # validator newer than it, and nothing says it is outdated; nor that it is current.
    for rev in ("rev1", "rev2"):
        await kit.client.delete(
            CONTROLLER_REVISION, f"{DS_NAME}-{rev}", namespace=kit.namespace, missing_ok=True
        )
    seen: set[str] = set()

    async def retried() -> bool:
        seen.add(await _state(kit, node))
        wrong = bool(seen & {S.UNCORDON_REQUIRED.value, S.UPGRADE_DONE.value})
        return wrong or await _retries(kit, node) >= 2

    await eventually(retried, "retries of the failed pod deletion")
    assert not seen & {S.UNCORDON_REQUIRED.value, S.UPGRADE_DONE.value}, seen
    assert (await kit.node(node))["spec"].get("unschedulable") is True

    # The revision is known again and the bare pod gone: the walk finishes for real.
    await kit.add_revision("rev3")
    await kit.client.delete(POD, bare, namespace=kit.namespace)
    await eventually(kit.upgraded, "the upgrade to the current driver")
