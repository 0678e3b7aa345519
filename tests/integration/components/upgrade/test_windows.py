"""Maintenance windows, against a real API server: on the operator's clock (which the test
moves), a node admitted inside the window finishes its walk after the window closed, no
other node is admitted until the next window opens, the policy's status says when that is
and an Event says it once; the next window walks the rest."""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

from reconciler import Object

from .conftest import CLUSTER_POLICY, Kit, S, eventually

BERLIN = ZoneInfo("Europe/Berlin")


def berlin(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _waiting(cp: Object) -> Object | None:
    for c in ((cp.get("status") or {}).get("upgrade") or {}).get("conditions") or []:
        if c.get("type") == "UpgradeWaitingForWindow":
            return dict(c)
    return None


async def test_outside_the_window_no_node_is_admitted_and_the_walk_in_progress_finishes(
    kit: Kit,
) -> None:
    policy = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 1,
        "maxUnavailable": "100%",
        "maintenanceWindows": [
            {"days": ["Sat"], "start": "02:00", "end": "06:00", "timeZone": "Europe/Berlin"}
        ],
    }
    a, b, c = [await kit.add_node(s) for s in ("a", "b", "c")]
    name = await kit.cluster_policy(policy)
    clock = Clock(berlin("2026-12-12T03:00"))  # a Saturday, inside the window
    await kit.start_operator(clock=clock)
    await eventually(kit.all_done, "every node to be upgrade-done (in sync from the start)")

    kit.hold_validator_ready.update((a, b, c))  # the admitted node stays in its walk
    # creationTimestamp has whole seconds, and a validator pod made in the same second as
    # the new driver pod counts as fresh (`>=`): on an idle machine the walk recreated the
    # driver within the validators' second, the old Ready validator passed the node at once
    # and the test never saw it validating. A second apart, the old one is stale.
    await asyncio.sleep(1.1)
    await kit.add_revision("rev2")

    async def validating() -> str | None:
        states = await kit.states()
        return next((n for n, s in states.items() if s == S.VALIDATION_REQUIRED.value), None)

    first = await eventually(validating, "a node admitted inside the window, validating")
    rest = sorted({a, b, c} - {first})
    clock.now = berlin("2026-12-12T07:00")  # the window closed while it is in its walk
    kit.hold_validator_ready.clear()

    async def first_done_rest_held() -> Object | None:
        states = await kit.states()
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        condition = _waiting(cp)
        if states[first] != S.UPGRADE_DONE.value or not condition:
            return None
        return cp if condition["status"] == "True" else None

    cp = await eventually(
        first_done_rest_held, "it finished, the rest held for the window", seconds=60
    )
    states = await kit.states()
    assert [states[n] for n in rest] == [S.UPGRADE_REQUIRED.value] * 2, states
    condition = _waiting(cp) or {}
    assert condition["reason"] == "OutsideMaintenanceWindows"
    assert "2 nodes wait" in condition["message"]
    assert "2026-12-19T02:00+01:00 (Europe/Berlin)" in condition["message"], condition
    listed = {n["name"]: n.get("message", "") for n in cp["status"]["upgrade"]["nodes"]}
    for node in rest:
        assert "waiting for the maintenance window that opens at 2026-12-19T02:00" in listed[node]

    # The pool looks again (a policy change wakes it; on a real clock the next opening or a
    # minute's recheck does): still outside, still held, and the Event is not repeated.
    await kit.client.patch(CLUSTER_POLICY, name, {"metadata": {"annotations": {"poke": "1"}}})
    await kit.client.patch(CLUSTER_POLICY, name, {"metadata": {"annotations": {"poke": "2"}}})

    async def one_event() -> list[Object] | None:
        events = [e for e in await kit.events(name) if e["reason"] == "UpgradeWaitingForWindow"]
        return events or None

    events = await eventually(one_event, "an UpgradeWaitingForWindow Event")
    assert len(events) == 1 and events[0].get("count", 1) == 1, events
    assert "2026-12-19T02:00+01:00" in events[0]["message"]
    states = await kit.states()
    assert [states[n] for n in rest] == [S.UPGRADE_REQUIRED.value] * 2, states

    clock.now = berlin("2026-12-19T02:30")  # the next Saturday's window
    await kit.client.patch(CLUSTER_POLICY, name, {"metadata": {"annotations": {"poke": "3"}}})
    await eventually(kit.upgraded, "every node upgraded in the next window", seconds=120)

    async def inside() -> Object | None:
        condition = _waiting(await kit.client.get_live(CLUSTER_POLICY, name))
        return condition if condition and condition["reason"] == "InsideMaintenanceWindow" else None

    condition = await eventually(inside, "the condition says the window is open")
    assert condition["status"] == "False"
    assert "until 2026-12-19T06:00+01:00" in condition["message"]
