"""A way back, against a real API server: a bad revision halts the rollout over a budget of
1; the admin asks for a rollback with the policy's annotation; the failed nodes (with `all`,
every node the rollout walked) go back to their last good driver through the walk's own
steps and limits, and the rollout stays halted until the spec changes. An operator killed
mid-rollback carries on from what the cluster holds.

No renderer runs here: `_pin_back` stands in for it and for the DaemonSet controller. It
waits for the operator to bind the request (in the policy's status), then pins the
DaemonSet to the image the operator's own rule picks from what the operator recorded on
the nodes (`components.api.rollback_images`, `pinned_image`), and makes that template's
revision the newest again.
"""

from __future__ import annotations

from components.api import (
    LAST_GOOD_IMAGE,
    ROLLBACK_ANNOTATION,
    ROLLBACK_NODE,
    pinned_image,
    rollback_images,
    rollback_request,
)
from reconciler import Object, annotations_of, labels_of, name_of

from .conftest import CLUSTER_POLICY, NODE, Kit, S, eventually

POLICY = {
    "autoUpgrade": True,
    "maxParallelUpgrades": 2,
    "maxUnavailable": "100%",
    "failureBudget": 1,
    "canary": {"nodes": 1, "soakSeconds": 2},
}


def _condition(cp: Object, kind: str) -> Object:
    for c in ((cp.get("status") or {}).get("upgrade") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


async def _halted_on_a_bad_revision(kit: Kit) -> tuple[str, list[str]]:
    """Nodes a-e in sync on rev1; rev2 fails validation on b and c. a, the canary, walks
    first and stays healthy on rev2; then b and c fail (two failures over a budget of 1)
    and the rollout halts, whichever of d and e it had reached by then."""
    nodes = [await kit.add_node(s) for s in "abcde"]
    a, b, c, d, e = nodes
    kit.failing_revisions = {b: {"rev2"}, c: {"rev2"}}
    name = await kit.cluster_policy(POLICY)
    await kit.start_operator(validation_timeout=3.0)
    await eventually(kit.all_done, "every node upgrade-done (in sync from the start)")
    await kit.add_revision("rev2")

    async def halted() -> bool:
        states = await kit.states()
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        settled = (S.UPGRADE_DONE.value, S.UPGRADE_REQUIRED.value)
        return (
            _condition(cp, "UpgradeHalted").get("status") == "True"
            and states[a] == S.UPGRADE_DONE.value
            and states[b] == states[c] == S.UPGRADE_FAILED.value
            and states[d] in settled
            and states[e] in settled
        )

    await eventually(halted, "b and c failed, a done on rev2, the walk halted", seconds=90)
    return name, nodes


async def _request(kit: Kit, name: str, mode: str) -> None:
    patch = {"metadata": {"annotations": {ROLLBACK_ANNOTATION: mode}}}
    await kit.client.patch(CLUSTER_POLICY, name, patch)


async def _bound(kit: Kit, name: str) -> Object:
    async def bound() -> Object | None:
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        return cp if rollback_request(cp).active else None

    return await eventually(bound, "the operator to bind the rollback to the spec")


async def _pin_back(kit: Kit, cp: Object) -> str:
    """As the renderer and the DaemonSet controller: the template goes back to the image
    the operator's records pick, whose revision is the newest again."""
    nodes = await kit.client.list_live(NODE, label_selector=f"upgrade-test={kit.tag}")
    image = pinned_image(
        f"driver:{kit.newest}", [name_of(n) for n in nodes], rollback_images(cp, nodes)
    )
    assert image == "driver:rev1", image
    await kit.restore_revision(image.removeprefix("driver:"))
    return image


async def _driver_revisions(kit: Kit) -> dict[str, str]:
    return {
        p["spec"]["nodeName"]: labels_of(p).get("controller-revision-hash", "")
        for p in await kit.pods(app="nvidia-driver-daemonset")
        if not p["metadata"].get("deletionTimestamp")
    }


async def _rolled_back(kit: Kit, name: str) -> Object | None:
    cp = await kit.client.get_live(CLUSTER_POLICY, name)
    condition = _condition(cp, "RollingBack")
    return cp if condition.get("reason") == "RolledBack" else None


async def test_the_failed_nodes_go_back_and_the_healthy_walked_nodes_stay(kit: Kit) -> None:
    name, (a, b, c, d, e) = await _halted_on_a_bad_revision(kit)
    revisions = await _driver_revisions(kit)
    walked = {n for n in (a, d, e) if revisions[n] == "rev2"}
    held = {d, e} - walked
    assert a in walked, revisions
    watcher = kit.watcher(POLICY)
    await _request(kit, name, "failed")
    cp = await _bound(kit, name)
    marks = {name_of(n): annotations_of(n).get(ROLLBACK_NODE) for n in await _nodes(kit)}
    assert {n for n, m in marks.items() if m == "true"} == {b, c}, marks
    await _pin_back(kit, cp)

    async def back() -> bool:
        states, revisions = await kit.states(), await _driver_revisions(kit)
        return (
            all(states[n] == S.UPGRADE_DONE.value for n in {b, c} | held)
            and all(revisions.get(n) == "rev1" for n in {b, c} | held)
            and await _rolled_back(kit, name) is not None
        )

    await eventually(back, "b and c back on rev1, the held nodes never left it", seconds=90)
    # The nodes that validated rev2 stay on it, held: `failed` does not touch them.
    revisions = await _driver_revisions(kit)
    assert all(revisions[n] == "rev2" for n in walked), revisions
    cp = await kit.client.get_live(CLUSTER_POLICY, name)
    for entry in cp["status"]["upgrade"]["nodes"]:
        if entry["name"] in walked:
            assert entry["message"].startswith("held by the rollback (failed)"), entry
    # b and c walked back through the walk's steps, within maxParallelUpgrades.
    for n in (b, c):
        assert S.POD_RESTART_REQUIRED.value in watcher.history[n], watcher.history[n]
    assert not watcher.violations, watcher.violations
    assert watcher.peak_in_progress <= 2
    halted = _condition(cp, "UpgradeHalted")
    assert (halted["status"], halted["reason"]) == ("True", "RollbackRequested"), halted
    rolled = _condition(cp, "RollingBack")
    assert "driver:rev1" in rolled["message"], rolled
    for n in await _nodes(kit):
        if name_of(n) in {b, c} | held:
            assert annotations_of(n)[LAST_GOOD_IMAGE] == "driver:rev1", n["metadata"]
    reasons = [ev["reason"] for ev in await kit.events(name)]
    assert "RollingBack" in reasons and "RolledBack" in reasons, reasons

    # The spec changes (GitOps): the rollback ends, its marks go, the request is spent.
    await kit.client.patch(CLUSTER_POLICY, name, {"spec": {"driver": {"version": "3"}}})

    async def ended() -> bool:
        cp = await kit.client.get_live(CLUSTER_POLICY, name)
        marked = [n for n in await _nodes(kit) if ROLLBACK_NODE in annotations_of(n)]
        said = _condition(cp, "RollingBack")
        return (
            not marked
            and said.get("reason") == "RollbackEnded"
            and not rollback_images(cp, await _nodes(kit))
        )

    await eventually(ended, "the rollback to end once the spec changed")


async def test_all_walks_every_node_back_across_an_operator_restart(kit: Kit) -> None:
    name, (a, *_) = await _halted_on_a_bad_revision(kit)
    watcher = kit.watcher(POLICY)
    await _request(kit, name, "all")
    cp = await _bound(kit, name)
    await kit.kill_operator()  # kill -9 once the request is bound; the pin lands meanwhile
    await _pin_back(kit, cp)
    await kit.start_operator(validation_timeout=3.0)

    async def back() -> bool:
        return await kit.upgraded() and await _rolled_back(kit, name) is not None

    await eventually(back, "every node back on rev1 (newest again)", seconds=120)
    assert S.POD_RESTART_REQUIRED.value in watcher.history[a], watcher.history[a]
    assert not watcher.violations, watcher.violations
    cp = await kit.client.get_live(CLUSTER_POLICY, name)
    assert _condition(cp, "UpgradeHalted")["status"] == "True"


async def _nodes(kit: Kit) -> list[Object]:
    return await kit.client.list_live(NODE, label_selector=f"upgrade-test={kit.tag}")
