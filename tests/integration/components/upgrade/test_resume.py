"""Crash safety, kernel changes, and NVIDIADriver pools, against a real API server."""

from __future__ import annotations

import asyncio
import random

from components.upgrade import DRIVER_KERNEL_ANNOTATION
from reconciler import annotations_of, labels_of

from .conftest import DAEMONSET, KERNEL, NODE, NVIDIA_DRIVER, Kit, S, eventually


async def test_a_new_operator_carries_on_where_a_killed_one_stopped(kit: Kit) -> None:
    node = await kit.add_node("a")
    await kit.gpu_pod("a", node)
    kit.hold_driver_ready.add(node)  # the new driver will take its time
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    drivers_before = kit.created_driver_pods
    await kit.add_revision("rev2")

    async def restarting() -> bool:
        states = await kit.states()
        return states[node] == S.POD_RESTART_REQUIRED and kit.created_driver_pods > drivers_before

    await eventually(restarting, "the node waiting for its new driver")
    await kit.kill_operator()
    kit.hold_driver_ready.discard(node)  # the driver gets ready while no operator runs
    await kit.start_operator()
    await eventually(kit.upgraded, "the walk finished by the second operator")
    # The second operator did not restart the driver again: one new pod, not two.
    assert kit.created_driver_pods == drivers_before + 1
    assert not (await kit.node(node))["spec"].get("unschedulable")


async def test_repeated_kills_never_break_the_limits_and_the_rollout_finishes(kit: Kit) -> None:
    policy = {"autoUpgrade": True, "maxParallelUpgrades": 2, "maxUnavailable": "50%"}
    nodes = [await kit.add_node(s) for s in "abcdef"]
    for n in nodes:
        await kit.gpu_pod(n, n)
    await kit.cluster_policy(policy)
    watcher = kit.watcher(policy)
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    # New drivers wait until the third kill, so the walk cannot finish before the kills
    # this test is about, however fast the machine runs it.
    kit.hold_driver_ready.update(nodes)
    await kit.add_revision("rev2")
    rng = random.Random(7)
    kills = 0
    while not await kit.upgraded():
        await asyncio.sleep(rng.uniform(0.05, 0.6))
        await kit.kill_operator()
        kills += 1
        if kills == 3:
            kit.hold_driver_ready.clear()
        await kit.start_operator()
        if kills > 60:
            break
    await eventually(kit.upgraded, "the rollout finished across restarts", seconds=120)
    assert kills >= 3
    assert not watcher.violations, watcher.violations
    assert watcher.peak_in_progress <= 2
    for n in nodes:
        assert not (await kit.node(n))["spec"].get("unschedulable")
        assert watcher.history[n][-1] == S.UPGRADE_DONE


async def test_a_kernel_change_takes_the_node_through_the_safe_path(kit: Kit) -> None:
    node = await kit.add_node("a", kernel="5.15.0-1")
    job = await kit.gpu_pod("a", node)
    await kit.cluster_policy({"autoUpgrade": True})
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    before = await kit.pods(app="nvidia-driver-daemonset")
    # A driver that merely runs costs no write.
    assert not [d for d in before if DRIVER_KERNEL_ANNOTATION in annotations_of(d)]
    await kit.client.patch(NODE, node, {"metadata": {"labels": {KERNEL: "5.15.0-2"}}})

    async def recorded() -> bool:
        drivers = {d["metadata"]["name"]: d for d in await kit.pods(app="nvidia-driver-daemonset")}
        old = [drivers.get(d["metadata"]["name"]) for d in before]
        # Replaced already, or marked with the kernel it was loaded for.
        return all(d is None or annotations_of(d).get(DRIVER_KERNEL_ANNOTATION) == "5.15.0-1"
                   for d in old)  # fmt: skip

    names = {p["metadata"]["name"] for p in before}

    async def upgraded() -> bool:
        drivers = await kit.pods(app="nvidia-driver-daemonset")
        return (
            await kit.all_done()
            and bool(drivers)
            and all(p["metadata"]["name"] not in names for p in drivers)
        )

    await eventually(recorded, "the old driver pod marked with the kernel it was loaded for")
    await eventually(upgraded, "a new driver pod for the new kernel")
    assert not [p for p in await kit.pods(app="train") if p["metadata"]["name"] == job]
    assert not (await kit.node(node))["spec"].get("unschedulable")
    events = await kit.events(node)
    assert any("serves kernel 5.15.0-1, the node runs 5.15.0-2" in e.get("message", "")
               for e in events), [e.get("message") for e in events]  # fmt: skip


async def test_an_nvidia_driver_governs_its_own_nodes(kit: Kit) -> None:
    await kit.add_node("a")
    name = f"pool-{kit.tag}"
    # The driver DaemonSet belongs to an NVIDIADriver (whose upgrade policy defaults on).
    await kit.client.patch(
        DAEMONSET, "nvidia-driver-daemonset",
        {"metadata": {"labels": {"nvidia.com/gpu-operator.nvidiadriver": name}}},
        namespace=kit.namespace,
    )  # fmt: skip
    await kit.client.create(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": name},
            "spec": {"driverType": "gpu", "upgradePolicy": {"maxParallelUpgrades": 1}},
        }
    )
    kit.policies.append((NVIDIA_DRIVER, name))
    await kit.client.patch(
        NVIDIA_DRIVER, name, {"status": {"state": "ready"}}, subresource="status"
    )
    await kit.start_operator()
    await eventually(kit.all_done, "the first pass")
    await kit.add_revision("rev2")

    async def upgraded() -> bool:
        drivers = await kit.pods(app="nvidia-driver-daemonset")
        return await kit.all_done() and all(
            labels_of(d)["controller-revision-hash"] == "rev2" for d in drivers
        )

    await eventually(upgraded, "the NVIDIADriver's node upgraded")

    async def status() -> bool:
        nvd = await kit.client.get_live(NVIDIA_DRIVER, name)
        upgrade = (nvd.get("status") or {}).get("upgrade") or {}
        return upgrade.get("done") == 1 and upgrade.get("autoUpgrade") is True

    await eventually(status, "the NVIDIADriver's status.upgrade")
