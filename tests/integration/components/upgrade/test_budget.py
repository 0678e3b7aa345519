"""A failure budget that halts, against a real API server: one failed node over a budget of
0 stops admission while slots are free; the policy says UpgradeHalted with the node and its
reason, an Event says it too; once the node recovers the walk goes on."""

from __future__ import annotations

from reconciler import Object, labels_of, name_of

from .conftest import CLUSTER_POLICY, NODE, POD, STATE_LABEL, Kit, S, eventually


def _halted(cp: Object) -> Object | None:
    for c in ((cp.get("status") or {}).get("upgrade") or {}).get("conditions") or []:
        if c.get("type") == "UpgradeHalted":
            return dict(c)
    return None


class Recorder:
    """Every state change of the nodes, in the order the watch saw them."""

    def __init__(self) -> None:
        self.order: list[tuple[str, str]] = []
        self.last: dict[str, str] = {}

    def on_add(self, obj: Object) -> None:
        self.on_update(obj, obj)

    def on_update(self, old: Object, new: Object) -> None:
        state = labels_of(new).get(STATE_LABEL, "")
        if self.last.get(name_of(new)) != state:
            self.last[name_of(new)] = state
            self.order.append((name_of(new), state))

    def on_delete(self, obj: Object) -> None:
        pass


async def test_a_failure_over_the_budget_halts_admission_until_it_recovers(kit: Kit) -> None:
    policy = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 2,
        "maxUnavailable": "100%",
        "failureBudget": 0,
    }
    a, *others = [await kit.add_node(s) for s in ("a", "b", "c", "d", "e", "f")]
    # A GPU pod no controller owns: deleting it is refused, so `a` fails once admitted.
    blocker = await kit.gpu_pod("a", a, managed=False)
    name = await kit.cluster_policy(policy)
    recorder = Recorder()
    kit.watch_cache.informer_for(NODE).add_handler(recorder)
    await kit.start_operator()
    await eventually(kit.all_done, "every node to be upgrade-done (in sync from the start)")

    await kit.add_revision("rev2")

    async def halted() -> Object | None:
        states = await kit.states()
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        condition = _halted(cp)
        settled = all(states[n] in (S.UPGRADE_DONE.value, S.UPGRADE_REQUIRED.value) for n in others)
        failed = states[a] == S.UPGRADE_FAILED.value
        return cp if failed and settled and condition and condition["status"] == "True" else None

    cp = await eventually(halted, "a failed, the rest done or held, the walk halted", seconds=60)
    condition = _halted(cp) or {}
    assert condition["reason"] == "FailureBudgetExceeded"
    assert f"{a}: cannot delete" in condition["message"], condition
    assert "budget of 0" in condition["message"]
    held = [n["name"] for n in cp["status"]["upgrade"]["nodes"] if n["state"] == "upgrade-required"]
    assert held, cp["status"]["upgrade"]
    messages = {n["name"]: n["message"] for n in cp["status"]["upgrade"]["nodes"]}
    assert all(messages[n].startswith("upgrade halted:") for n in held), messages
    events = await kit.events(name)
    assert any(e["reason"] == "UpgradeHalted" and a in e["message"] for e in events), events

    await kit.client.delete(POD, blocker, namespace=kit.namespace, grace_period_seconds=0)
    await eventually(kit.upgraded, "every node upgraded once a recovered", seconds=120)

    async def resumed() -> Object | None:
        condition = _halted(await kit.client.get_live(CLUSTER_POLICY, name))
        return condition if condition and condition["status"] == "False" else None

    assert (await eventually(resumed, "UpgradeHalted False"))["reason"] == "WithinFailureBudget"
    # Between a's failure and its recovery no held node left upgrade-required.
    order = recorder.order
    failed_at = order.index((a, S.UPGRADE_FAILED.value))
    recovered_at = next(i for i, (n, _) in enumerate(order) if n == a and i > failed_at)
    started = [
        n for n, s in order[failed_at:recovered_at] if n in held and s != S.UPGRADE_REQUIRED.value
    ]
    assert not started, (started, order)
