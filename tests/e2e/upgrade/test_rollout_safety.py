"""Rollouts that stop themselves, end to end: canary nodes walked first and soaked, and a
bad driver version (one the simulated nodes fail to validate: the simulator's
`failing-driver-versions` marker) halted by the failure budget.

One cluster (the package's 20 simulated GPU nodes) and one operator process, its
validation timeout cut to seconds so that a node whose validation never passes fails in a
test's time; both shared with `test_rollback.py`, which runs first and leaves every node
on the good driver. Tests run in file order, each from where the one before left the nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from components.api import WEEKDAYS, UpgradeState
from components.upgrade import STATE_LABEL
from gpusim import SimulatedCluster
from reconciler import GVK, Object, PatchType, labels_of, name_of, uid_of
from reconciler.errors import NotFound
from tests.e2e.operator._harness import OperatorProcess
from tests.polling import eventually

from .conftest import IN_PROGRESS_VALUES, VALIDATION_SECONDS, Watch, pod_ready

S = UpgradeState
POLICY = "cluster-policy"
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
GOOD = "595.91.07"
NEXT = "595.100.01"
LATER = "595.100.02"
BAD = "600.10.01"
ROLLOUT_SECONDS = 600.0
IN_WALK = IN_PROGRESS_VALUES - {S.UPGRADE_FAILED.value}
"""Nodes admitted and not yet done or failed."""


@pytest.fixture(scope="module")
def upgrade_cluster(validating_cluster: SimulatedCluster) -> SimulatedCluster:
    return validating_cluster


@pytest.fixture(scope="module")
def operator(validating_operator: OperatorProcess) -> OperatorProcess:
    return validating_operator


async def _set_policy(watch: Watch, version: str, upgrade: dict[str, Any]) -> None:
    try:
        await watch.client.get_live(CLUSTER_POLICY, POLICY)
    except NotFound:
        spec = {"driver": {"version": version, "upgradePolicy": upgrade}}
        await watch.client.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": POLICY},
                "spec": spec,
            }
        )
        return
    # One write that replaces the whole upgradePolicy (a merge patch would keep old keys).
    ops = [
        {"op": "add", "path": "/spec/driver/version", "value": version},
        {"op": "add", "path": "/spec/driver/upgradePolicy", "value": upgrade},
    ]
    await watch.client.patch(CLUSTER_POLICY, POLICY, ops, patch_type=PatchType.JSON)


def _on_version(watch: Watch, version: str) -> set[str]:
    """The nodes whose one live driver pod runs `version` and is Ready."""
    out = set()
    for pod in watch.drivers():
        if version in pod["spec"]["containers"][0]["image"] and pod_ready(pod):
            out.add(pod["spec"].get("nodeName"))
    return out


async def _rollout_done(watch: Watch, version: str) -> None:
    def done() -> bool:
        nodes = {name_of(n) for n in watch.gpu_nodes()}
        states = watch.states().values()
        return _on_version(watch, version) == nodes and all(s == S.UPGRADE_DONE for s in states)

    await eventually(done, f"every GPU node upgraded to {version}", ROLLOUT_SECONDS)


@dataclass
class Walked:
    """Every node state change the watch saw, in order, from the moment it is attached."""

    order: list[tuple[str, str]] = field(default_factory=list)
    last: dict[str, str] = field(default_factory=dict)

    def on_add(self, obj: Object) -> None:
        self.on_update(obj, obj)

    def on_update(self, old: Object, new: Object) -> None:
        if labels_of(new).get("feature.node.kubernetes.io/pci-10de.present") != "true":
            return
        state = labels_of(new).get(STATE_LABEL, "")
        if self.last.get(name_of(new)) != state:
            self.last[name_of(new)] = state
            self.order.append((name_of(new), state))

    def on_delete(self, obj: Object) -> None:
        pass

    def left_service(self) -> set[str]:
        """Nodes seen in the walk (admitted: cordoned and on) or failed."""
        return {n for n, s in self.order if s in IN_PROGRESS_VALUES or s == S.UPGRADE_FAILED}

    def first(self, node: str, states: set[str]) -> int | None:
        return next((i for i, (n, s) in enumerate(self.order) if n == node and s in states), None)


@contextlib.asynccontextmanager
async def walked(watch: Watch) -> AsyncIterator[Walked]:
    recorder = Walked()
    for node in watch.gpu_nodes():
        recorder.last[name_of(node)] = labels_of(node).get(STATE_LABEL, "")
    watch.nodes.add_handler(recorder)
    try:
        yield recorder
    finally:
        watch.nodes.remove_handler(recorder)


async def _upgrade_status(watch: Watch) -> Object:
    cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
    return dict((cp.get("status") or {}).get("upgrade") or {})


def _condition(upgrade: Object, kind: str) -> Object | None:
    return next((dict(c) for c in upgrade.get("conditions") or [] if c.get("type") == kind), None)


async def test_canary_nodes_are_walked_first_and_soaked_before_any_other(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    upgrade: dict[str, Any] = {"autoUpgrade": True, "maxParallelUpgrades": 4}
    upgrade["maxUnavailable"] = "100%"
    await _set_policy(watch, GOOD, upgrade)
    await _rollout_done(watch, GOOD)  # the first install: every node in sync
    names = [name_of(n) for n in watch.gpu_nodes()]
    canaries = set(names[:2])  # `canary.nodes: 2`: the first two by name
    messages: set[str] = set()

    async def listen() -> None:
        """What the policy status tells the admin about the nodes held back."""
        while True:
            for node in (await _upgrade_status(watch)).get("nodes") or []:
                if node.get("name") not in canaries and node.get("message"):
                    messages.add(str(node["message"]))
            await asyncio.sleep(0.5)

    async with walked(watch) as seen:
        listening = asyncio.create_task(listen())
        try:
            canary = {"nodes": 2, "soakSeconds": 10}
            await _set_policy(watch, NEXT, {**upgrade, "canary": canary})
            await _rollout_done(watch, NEXT)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening

    started = {S.CORDON_REQUIRED.value, *IN_PROGRESS_VALUES}
    # Both canaries done before any other node left upgrade-required.
    canaries_done = max(seen.first(c, {S.UPGRADE_DONE.value}) or 0 for c in canaries)
    others = {n: seen.first(n, started) for n in names if n not in canaries}
    early = {n: i for n, i in others.items() if i is None or i < canaries_done}
    assert not early, (early, canaries_done, seen.order[: canaries_done + 1])
    # ... and while they soaked the rest were told why they waited.
    assert any("soaking" in m and "waiting for the canaries" in m for m in messages), messages


async def test_no_node_is_admitted_outside_the_maintenance_windows(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    # A window on a day at least two days away (UTC): the whole test runs outside it.
    day = WEEKDAYS[(datetime.now(UTC).weekday() + 3) % 7]
    windows = [{"days": [day], "start": "00:00", "end": "24:00", "timeZone": "UTC"}]
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 4, "maxUnavailable": "100%"}
    nodes = {name_of(n) for n in watch.gpu_nodes()}
    async with walked(watch) as seen:
        await _set_policy(watch, LATER, {**upgrade, "maintenanceWindows": windows})

        async def held() -> Object | None:
            status = await _upgrade_status(watch)
            condition = _condition(status, "UpgradeWaitingForWindow")
            waiting = {n for n, s in watch.states().items() if s == S.UPGRADE_REQUIRED}
            # The status catches up with the last node found outdated.
            told = f"{len(nodes)} nodes wait" in (condition or {}).get("message", "")
            if waiting == nodes and condition and condition["status"] == "True" and told:
                return condition
            return None

        condition = await eventually(held, "every node outdated and held for the window", 120)
        # Admission looks again on every node event and policy change: none may start.
        await asyncio.sleep(5)
    assert condition["reason"] == "OutsideMaintenanceWindows"
    assert "T00:00+00:00 (UTC)" in condition["message"], condition
    assert not seen.left_service(), seen.order
    assert _on_version(watch, NEXT) == nodes  # every node still runs the last good driver


async def test_a_bad_version_halts_within_the_failure_budget_and_names_the_nodes(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    budget, parallel = 2, 3
    before = {p["spec"]["nodeName"]: uid_of(p) for p in watch.drivers()}
    # Every node fails the new version's validation: the driver installs, the validator
    # never turns Ready, the node agent (where it runs) never says GPUValidated.
    await upgrade_cluster.set_failing_driver_versions([BAD])
    upgrade = {
        "autoUpgrade": True,
        "maxParallelUpgrades": parallel,
        # No unavailability limit: only the budget stops the bad version spreading.
        "maxUnavailable": "100%",
        "failureBudget": budget,
    }
    async with walked(watch) as seen:
        await _set_policy(watch, BAD, upgrade)

        async def halted() -> Object | None:
            status = await _upgrade_status(watch)
            condition = _condition(status, "UpgradeHalted")
            states = watch.states().values()
            settled = not any(s in IN_WALK for s in states)
            if condition and condition["status"] == "True" and settled:
                return status
            return None

        status = await eventually(halted, "the walk halted, no node left in it", 300)
        # Admission looks again often while nodes wait: a halt that leaked would show now.
        await asyncio.sleep(5)

    failed = {n for n, s in watch.states().items() if s == S.UPGRADE_FAILED}
    assert budget < len(failed) <= budget + parallel, watch.states()
    assert seen.left_service() == failed, (seen.left_service(), failed)
    condition = _condition(await _upgrade_status(watch), "UpgradeHalted") or {}
    assert condition["reason"] == "FailureBudgetExceeded"
    message = condition["message"]
    assert f"driver {BAD}" in message and f"budget of {budget}" in message, message
    for node in failed:  # each failing node named with its reason
        assert f"{node}: validation did not pass within {VALIDATION_SECONDS}s" in message
    assert "validator pod" in message, message
    events = await watch.client.request("GET", "/api/v1/events")
    assert any(
        e.get("reason") == "UpgradeHalted" and f"driver {BAD}" in e.get("message", "")
        for e in events.get("items") or []
    )
    # The nodes the halt kept out are as they were: the good driver pod, Ready, schedulable.
    held = set(before) - failed
    drivers = {p["spec"]["nodeName"]: p for p in watch.drivers()}
    for node in held:
        assert uid_of(drivers[node]) == before[node] and pod_ready(drivers[node]), node
    nodes = {name_of(n): n for n in watch.gpu_nodes()}
    assert not any(nodes[n]["spec"].get("unschedulable") for n in held)
    listed = {n["name"]: n.get("message", "") for n in status.get("nodes") or []}
    assert all(listed[n].startswith("upgrade halted:") for n in held), listed
