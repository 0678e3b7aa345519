"""The driver upgrade against a real API server: the walk, the limits, the marks it leaves."""

from __future__ import annotations

import asyncio
from typing import Any

from components.api import UpgradeState
from components.upgrade import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    EVENT_REASON,
    INITIALLY_UNSCHEDULABLE,
    SKIP_LABEL,
    STATE_LABEL,
    STATE_SINCE,
    VALIDATOR_DEPLOY_LABEL,
)
from reconciler import Object, annotations_of, labels_of, name_of

from .conftest import CLUSTER_POLICY, KERNEL, NODE, Kit, S, eventually

FULL_WALK = [
    "",
    S.UPGRADE_DONE,
    S.UPGRADE_REQUIRED,
    # Admitted, cordoned and no jobs to wait for: admission's one write (`_fold`) takes
    # the node on to deleting its GPU pods; a watch never sees cordon-required or
    # wait-for-jobs-required.
    S.POD_DELETION_REQUIRED,
    S.POD_RESTART_REQUIRED,
    S.VALIDATION_REQUIRED,
    # Validated: uncordon-required and the uncordon itself in the same write.
    S.UPGRADE_DONE,
]


def _values(states: list[Any]) -> list[str]:
    return [s.value if isinstance(s, UpgradeState) else s for s in states]


async def test_every_node_walks_the_states_within_max_parallel(kit: Kit) -> None:
    policy = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "100%"}
    nodes = [await kit.add_node(s) for s in ("a", "b", "c")]
    jobs = {n: await kit.gpu_pod(n, n) for n in nodes}
    name = await kit.cluster_policy(policy)
    watcher = kit.watcher(policy)
    controller = await kit.start_operator()
    # Every admission is remembered until the cache shows it (the next admission waits).
    admitted: list[str] = []
    record = controller.admissions.record

    def remember(obj: Object) -> None:
        admitted.append(name_of(obj))
        record(obj)

    controller.admissions.record = remember  # type: ignore[method-assign]
    await eventually(kit.all_done, "every node to be upgrade-done (in sync from the start)")

    await kit.add_revision("rev2")  # the DaemonSet's template changed
    await eventually(kit.upgraded, "every node upgraded", seconds=120)
    drivers = await kit.pods(app="nvidia-driver-daemonset")
    assert {labels_of(p)["controller-revision-hash"] for p in drivers} == {"rev2"}

    assert not watcher.violations, watcher.violations
    assert watcher.peak_in_progress == 1
    assert sorted(admitted) == sorted(nodes)
    for n in nodes:
        # A validator pod already fresh and Ready when the new driver is (the kit's pods
        # start at once) lets validation pass in the write that leaves pod-restart-required.
        walks = (_values(FULL_WALK), _values([s for s in FULL_WALK if s != S.VALIDATION_REQUIRED]))
        assert watcher.history[n] in walks, (n, watcher.history[n])
        node = await kit.node(n)
        assert not node["spec"].get("unschedulable")
        assert STATE_SINCE in annotations_of(node)
        assert INITIALLY_UNSCHEDULABLE not in annotations_of(node)
    # GPU pods were deleted before their node's driver was replaced.
    assert not [p for p in await kit.pods(app="train") if name_of(p) in jobs.values()]
    # Validators were restarted after the new driver, and passed.
    validators = await kit.pods(app="nvidia-operator-validator")
    for d in drivers:
        node_validators = [v for v in validators if v["spec"]["nodeName"] == d["spec"]["nodeName"]]
        assert node_validators
        for v in node_validators:
            assert v["metadata"]["creationTimestamp"] >= d["metadata"]["creationTimestamp"]

    events = await kit.events(nodes[0])
    assert any(e["reason"] == EVENT_REASON and "uncordon" in e["message"] for e in events)
    policy_events = await kit.events(name)
    assert any(nodes[0] in e["message"] for e in policy_events)

    async def summed_up() -> Object | None:
        # The status follows the nodes within a status write's pacing (a fraction of a second).
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        upgrade = cp["status"]["upgrade"]
        counts = (upgrade["managed"], upgrade["done"], upgrade["inProgress"])
        return cp if counts == (3, 3, 0) else None

    cp = await eventually(summed_up, "status.upgrade to count 3 nodes done")
    upgrade = cp["status"]["upgrade"]
    assert upgrade["autoUpgrade"] is True
    assert cp["status"]["state"] == "ready"  # the policy controller's part is untouched

    assert kit.manager is not None
    metrics = {
        m.name: m.samples[0].value
        for m in kit.manager.registry.collect()
        if m.name.startswith("gpu_operator_")
    }
    assert metrics["gpu_operator_nodes_upgrades_done"] == 3
    assert metrics["gpu_operator_nodes_upgrades_in_progress"] == 0
    assert metrics["gpu_operator_driver_auto_upgrade_enabled"] == 1


async def test_max_unavailable_counts_nodes_cordoned_by_someone_else(kit: Kit) -> None:
    policy = {"autoUpgrade": True, "maxParallelUpgrades": 0, "maxUnavailable": 2}
    cordoned = await kit.add_node("a", cordoned=True)
    others = [await kit.add_node(s) for s in ("b", "c", "d")]
    await kit.cluster_policy(policy)
    watcher = kit.watcher(policy)
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")
    await eventually(kit.upgraded, "every node upgraded", seconds=120)

    assert not watcher.violations, watcher.violations
    assert watcher.peak_unavailable <= 2
    # The node cordoned before the upgrade is cordoned after it; the others are not.
    assert (await kit.node(cordoned))["spec"].get("unschedulable") is True
    assert S.UNCORDON_REQUIRED.value not in watcher.history[cordoned]
    for n in others:
        assert not (await kit.node(n))["spec"].get("unschedulable")
    assert INITIALLY_UNSCHEDULABLE not in annotations_of(await kit.node(cordoned))


async def test_skip_label_holds_a_node_and_others_go_on(kit: Kit) -> None:
    held = await kit.add_node("a", **{SKIP_LABEL: "true"})
    free = await kit.add_node("b")
    await kit.cluster_policy({"autoUpgrade": True, "maxParallelUpgrades": 2})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def free_done() -> bool:
        states = await kit.states()
        return states[free] == S.UPGRADE_DONE and states[held] == S.UPGRADE_REQUIRED

    await eventually(free_done, "the free node upgraded while the skipped one waits")
    assert not (await kit.node(held))["spec"].get("unschedulable")
    await kit.client.patch(NODE, held, {"metadata": {"labels": {SKIP_LABEL: None}}})
    await eventually(kit.upgraded, "the held node upgraded once the skip label went")


async def test_auto_upgrade_off_touches_nothing(kit: Kit) -> None:
    nodes = [await kit.add_node(s) for s in ("a", "b")]
    await kit.gpu_pod("a", nodes[0])
    await kit.cluster_policy({"autoUpgrade": False})
    await kit.start_operator()
    await kit.add_revision("rev2")
    before = {n: await kit.node(n) for n in nodes}
    # Give the operator every chance to act: wait for its pool reconcile to have written
    # the policy's status (autoUpgrade false), which happens after the revision is seen.
    name = kit.policies[0][1]

    async def status_written() -> bool:
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        return (cp.get("status") or {}).get("upgrade", {}).get("managed") == 2

    await eventually(status_written, "the upgrade status written")
    for n in nodes:
        after = await kit.node(n)
        assert STATE_LABEL not in labels_of(after)
        assert not after["spec"].get("unschedulable")
        assert after["metadata"]["resourceVersion"] == before[n]["metadata"]["resourceVersion"]
    assert len(await kit.pods(app="train")) == 1
    drivers = await kit.pods(app="nvidia-driver-daemonset")
    assert {labels_of(p)["controller-revision-hash"] for p in drivers} == {"rev1"}


async def test_a_node_labelled_upgrade_done_before_its_driver_runs_is_never_written(
    kit: Kit,
) -> None:
    """The node labeller writes `upgrade-done` with a new node's deploy labels, before the
    driver DaemonSet targets it: the walk keeps that state, neither clearing it while no
    driver is there nor writing it again once the driver runs in sync (one label write per
    node to reach ready)."""
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator(workers=1)
    new = f"{kit.tag}-new"
    labels = {
        "upgrade-test": f"{kit.tag}-later",
        KERNEL: "5.15.0-1",
        "nvidia.com/gpu.deploy.driver": "true",
        STATE_LABEL: "upgrade-done",
    }
    await kit.client.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": new, "labels": labels}}
    )
    # One worker takes the nodes in the order they came: once a later node is done, the new
    # node's reconcile (no driver DaemonSet targets it yet) is over.
    await kit.add_node("later")
    await eventually(kit.all_done, "the later node to be upgrade-done")
    assert labels_of(await kit.node(new))[STATE_LABEL] == S.UPGRADE_DONE

    moved = await kit.client.patch(NODE, new, {"metadata": {"labels": {"upgrade-test": kit.tag}}})
    kit.nodes.append(new)  # the stand-in kubelet starts its driver, at the newest revision

    async def driver_ready() -> bool:
        drivers = [p for p in await kit.pods(app="nvidia-driver-daemonset")
                   if p["spec"]["nodeName"] == new]  # fmt: skip
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for p in drivers
            for c in (p.get("status") or {}).get("conditions") or []
        )

    await eventually(driver_ready, "the new node's driver pod Ready")
    # As above: once a node added after it is done, the reconcile its driver's events asked
    # for is over.
    await kit.add_node("last")
    await eventually(kit.all_done, "the last node to be upgrade-done")
    after = await kit.node(new)
    assert labels_of(after)[STATE_LABEL] == S.UPGRADE_DONE
    assert after["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]


async def test_a_driver_pod_on_a_node_its_daemonset_does_not_select_gets_no_state(
    kit: Kit,
) -> None:
    """What a node looks like when its driver pod's event reached the cache before its own
    (the deploy labels and the first state came in one write; two watches keep no order
    between them): the pod's DaemonSet would not have put it there by the labels cached.
    The walk writes nothing until the node's labels catch up; written at once, that state
    was a second write of each such node."""
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator(workers=1)
    early = f"{kit.tag}-early"
    await kit.client.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": early, "labels": {KERNEL: "5.15.0-1"}},
        }
    )
    await kit.driver_pod(early)
    # One worker takes the nodes in the order they came: once a later node is done, the
    # early node's reconcile is over.
    await kit.add_node("later")
    await eventually(kit.all_done, "the later node to be upgrade-done")
    await asyncio.sleep(1.0)
    assert STATE_LABEL not in labels_of(await kit.node(early))

    # Its labels arrive: now the DaemonSet selects it, and the walk takes it in.
    await kit.client.patch(NODE, early, {"metadata": {"labels": {"upgrade-test": kit.tag}}})

    async def done() -> bool:
        return labels_of(await kit.node(early)).get(STATE_LABEL) == S.UPGRADE_DONE

    await eventually(done, "the early node to be upgrade-done once its labels arrived")


async def test_turning_auto_upgrade_off_mid_walk_clears_the_marks_and_uncordons(kit: Kit) -> None:
    node = await kit.add_node("a", **{DEVICE_PLUGIN_DEPLOY_LABEL: "true"})
    kit.hold_driver_ready.add(node)
    name = await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def restarting() -> bool:
        n = await kit.node(node)
        return (
            labels_of(n).get(STATE_LABEL) == S.POD_RESTART_REQUIRED
            and labels_of(n).get(DEVICE_PLUGIN_DEPLOY_LABEL) == DEVICE_PLUGIN_PAUSED
        )

    await eventually(restarting, "the node waiting for its new driver, device plugin paused")
    assert (await kit.node(node))["spec"].get("unschedulable") is True
    await kit.client.patch(
        CLUSTER_POLICY, name, {"spec": {"driver": {"upgradePolicy": {"autoUpgrade": False}}}}
    )

    async def cleared() -> bool:
        n = await kit.node(node)
        return STATE_LABEL not in labels_of(n) and not n["spec"].get("unschedulable")

    await eventually(cleared, "the upgrade marks removed and the node uncordoned")
    assert STATE_SINCE not in annotations_of(await kit.node(node))
    # The device plugin the walk paused is back.
    assert labels_of(await kit.node(node))[DEVICE_PLUGIN_DEPLOY_LABEL] == "true"


async def test_the_node_stops_offering_gpus_before_its_driver_restarts(kit: Kit) -> None:
    """A pod tolerating every taint gets past the cordon: the driver restarts only once the
    node offers no GPU (device plugin paused), and the plugin comes back after."""
    node = await kit.add_node("a", **{DEVICE_PLUGIN_DEPLOY_LABEL: "true"})
    await _offer_gpus(kit, node, "8")
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    assert labels_of(await kit.node(node))[DEVICE_PLUGIN_DEPLOY_LABEL] == "true"
    await kit.add_revision("rev2")

    async def paused() -> bool:
        labels = labels_of(await kit.node(node))
        return labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) == DEVICE_PLUGIN_PAUSED

    await eventually(paused, "the device plugin paused")
    assert (await kit.states())[node] == S.POD_RESTART_REQUIRED
    await asyncio.sleep(3)  # past the cordon's settling: only the offered GPUs hold it
    drivers = await kit.pods(app="nvidia-driver-daemonset")
    assert [labels_of(d)["controller-revision-hash"] for d in drivers] == ["rev1"]
    assert not drivers[0]["metadata"].get("deletionTimestamp")

    await _offer_gpus(kit, node, "0")  # the device plugin has left the node
    await eventually(kit.upgraded, "the node upgraded", seconds=60)
    assert labels_of(await kit.node(node))[DEVICE_PLUGIN_DEPLOY_LABEL] == "true"


async def test_the_validator_leaves_with_the_device_plugin_and_validates_the_new_driver(
    kit: Kit,
) -> None:
    """The validator is paused with the device plugin, so no old validator is left to
    replace: the one that comes back once the new driver is ready validates it."""
    labels = {DEVICE_PLUGIN_DEPLOY_LABEL: "true", VALIDATOR_DEPLOY_LABEL: "true"}
    node = await kit.add_node("a", **labels)
    kit.hold_driver_ready.add(node)
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def restarting() -> bool:
        n = await kit.node(node)
        return labels_of(n).get(STATE_LABEL) == S.POD_RESTART_REQUIRED and all(
            labels_of(n).get(k) == DEVICE_PLUGIN_PAUSED for k in labels
        )

    await eventually(restarting, "the device plugin and the validator paused")

    async def validator_gone() -> bool:
        return not await kit.pods(app="nvidia-operator-validator")

    await eventually(validator_gone, "the validator off the node while its driver restarts")
    kit.hold_driver_ready.discard(node)
    await eventually(kit.upgraded, "the node upgraded", seconds=60)
    after = labels_of(await kit.node(node))
    assert {k: after.get(k) for k in labels} == labels
    (driver,) = await kit.pods(app="nvidia-driver-daemonset")
    (validator,) = await kit.pods(app="nvidia-operator-validator")
    assert validator["metadata"]["creationTimestamp"] >= driver["metadata"]["creationTimestamp"]
    messages = [e["message"] for e in await kit.events(node)]
    assert any("paused the device plugin and the validator" in m for m in messages), messages
    assert any("resumed the device plugin and the validator" in m for m in messages), messages


async def _offer_gpus(kit: Kit, node: str, count: str) -> None:
    status = {"capacity": {"nvidia.com/gpu": count}, "allocatable": {"nvidia.com/gpu": count}}
    await kit.client.patch(NODE, node, {"status": status}, subresource="status")
