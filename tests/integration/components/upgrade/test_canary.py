"""Canary first, against a real API server: the canary walks alone, the rest waits out the
soak (on the operator's clock, which the test moves), then walks."""

from __future__ import annotations

import time

from reconciler import Object, labels_of, name_of

from .conftest import CLUSTER_POLICY, NODE, Kit, S, eventually


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_the_canary_walks_first_and_the_rest_waits_out_its_soak(kit: Kit) -> None:
    policy = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 0,
        "maxUnavailable": "100%",
        "canary": {"nodes": 1, "soakSeconds": 600},
    }
    canary, *rest = [await kit.add_node(s) for s in ("a", "b", "c")]
    name = await kit.cluster_policy(policy)
    order: list[tuple[str, str]] = []

    class Recorder:
        def on_add(self, obj: Object) -> None:
            self.on_update(obj, obj)

        def on_update(self, old: Object, new: Object) -> None:
            state = labels_of(new).get("nvidia.com/gpu-driver-upgrade-state", "")
            if not order or order[-1] != (name_of(new), state):
                order.append((name_of(new), state))

        def on_delete(self, obj: Object) -> None:
            pass

    kit.watch_cache.informer_for(NODE).add_handler(Recorder())
    clock = Clock()
    await kit.start_operator(clock=clock)
    await eventually(kit.all_done, "every node to be upgrade-done (in sync from the start)")

    await kit.add_revision("rev2")

    async def canary_done_rest_held() -> Object | None:
        states = await kit.states()
        if states.get(canary) != S.UPGRADE_DONE.value:
            return None
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        listed = {n["name"]: n for n in cp["status"]["upgrade"].get("nodes") or []}
        held = [listed.get(n, {}).get("message", "") for n in rest]
        return cp if all("waiting for the canaries" in m for m in held) else None

    cp = await eventually(canary_done_rest_held, "the canary upgraded, the rest held", seconds=60)
    states = await kit.states()
    assert [states[n] for n in rest] == [S.UPGRADE_REQUIRED.value] * 2, states
    message = {n["name"]: n["message"] for n in cp["status"]["upgrade"]["nodes"]}[rest[0]]
    assert f"{canary} soaking" in message, message

    clock.now += 601  # the soak is over
    await eventually(kit.upgraded, "every node upgraded after the soak", seconds=120)
    # From the rollout's start: no other node left upgrade-required before the canary was
    # done.
    rollout = order[[s for _, s in order].index(S.UPGRADE_REQUIRED.value) :]
    left = [i for i, (n, s) in enumerate(rollout) if n in rest and s != S.UPGRADE_REQUIRED.value]
    canary_done = rollout.index((canary, S.UPGRADE_DONE.value))
    assert left and min(left) > canary_done, rollout
