"""Restart-only: a driver pod out of date only in what does not change the install (the
same `DRIVER_CONFIG_DIGEST` on the running pod and the template) is restarted in place: no
cordon, no clearing, no pause of the device plugin; anything else takes the full walk."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.api import UpgradeState
from components.upgrade import (
    RESTART_ONLY,
    UPGRADE_REQUESTED,
    AgentVerdict,
    NodeContext,
    PodView,
    Step,
    cleanup,
    plan_node,
    restart_only,
    transition_patch,
)

from .builders import NOW, driver, gpu_pod, node, policy, validator

pytestmark = pytest.mark.unit
S = UpgradeState
DIGEST = "0123456789abcdef"


def old_driver(digest: str | None = DIGEST, **kw: object) -> PodView:
    return replace(driver("old", **kw), config_digest=digest)  # type: ignore[arg-type]


def ctx(state: S = S.CORDON_REQUIRED, d: PodView | None = None, **kw: object) -> NodeContext:
    annotations = {RESTART_ONLY: "true"} if kw.pop("in_place", False) else {}
    n = node(state=state, since=NOW - 1, **annotations)  # type: ignore[arg-type]
    pods = (gpu_pod("train"),)
    return NodeContext(
        n, old_driver() if d is None else d, "new", pods=pods, target_digest=DIGEST, **kw
    )  # type: ignore[arg-type]


def step(c: NodeContext) -> Step:
    return plan_node(c, policy(), NOW)


def test_the_same_digest_on_pod_and_template_restarts_in_place() -> None:
    assert restart_only(ctx())
    # Anything else walks: a digest missing on either side or different, a driver of the
    # reference operator, an upgrade an admin asked for, a kernel change, a pin to move.
    assert not restart_only(ctx(d=old_driver(None)))
    assert not restart_only(replace(ctx(), target_digest=None))
    assert not restart_only(ctx(d=old_driver("another")))
    assert not restart_only(ctx(replacing=True))
    requested = ctx()
    requested = replace(
        requested, node=replace(requested.node, annotations={UPGRADE_REQUESTED: "true"})
    )
    assert not restart_only(requested)
    assert not restart_only(ctx(d=old_driver(kernel="5.15.0-0-generic")))
    assert not restart_only(ctx(precompiled=True))
    # In sync, or the newest revision not known: nothing to restart.
    assert not restart_only(ctx(d=replace(driver("new"), config_digest=DIGEST)))
    assert not restart_only(replace(ctx(), target_revision=None))


def test_admitted_restart_only_goes_to_the_restart_uncordoned() -> None:
    s = step(ctx())
    assert s.transition is not None
    assert s.transition.to is S.POD_RESTART_REQUIRED
    assert s.transition.unschedulable is None  # never cordoned
    assert s.transition.annotations == {RESTART_ONLY: "true"}
    assert "in place" in s.transition.reason
    # The full walk cordons.
    full = step(ctx(d=old_driver("another")))
    assert full.transition is not None and full.transition.unschedulable is True


def test_the_driver_pod_is_deleted_under_running_gpu_pods_and_clients_stay() -> None:
    c = ctx(S.POD_RESTART_REQUIRED, in_place=True)
    s = step(c)
    assert s.delete == (c.driver,)  # the driver only: the GPU pod stays
    assert s.transition is None  # no pause of the device plugin or validator
    ready = ctx(S.POD_RESTART_REQUIRED, replace(driver("new"), config_digest=DIGEST), in_place=True)
    assert step(ready).transition is not None
    assert step(ready).transition.to is S.VALIDATION_REQUIRED  # type: ignore[union-attr]


def test_an_install_change_during_a_restart_in_place_takes_the_full_walk() -> None:
    c = ctx(S.POD_RESTART_REQUIRED, old_driver("another"), in_place=True)
    t = step(c).transition
    assert t is not None and t.to is S.CORDON_REQUIRED
    assert t.annotations == {RESTART_ONLY: None}
    assert "full walk" in t.reason


def test_validation_keeps_the_gpu_pods_and_ends_done_without_an_uncordon() -> None:
    starting = ctx(S.VALIDATION_REQUIRED, replace(driver("new", ready=False)), in_place=True)
    assert step(starting).transition is None  # waits; no clearing of the GPU pod
    new = replace(driver("new", created=NOW - 50), config_digest=DIGEST)
    fresh = validator(created=NOW - 10)
    passed = replace(ctx(S.VALIDATION_REQUIRED, new, in_place=True), pods=(gpu_pod("train"), fresh))
    t = step(passed).transition
    assert t is not None and t.to is S.UPGRADE_DONE and t.unschedulable is None
    assert "restarted in place" in t.reason
    # The marker goes with the walk's end, in the same patch.
    ops = transition_patch(passed.node, t, NOW)
    assert {
        "op": "remove",
        "path": "/metadata/annotations/" + RESTART_ONLY.replace("/", "~1"),
    } in ops


def test_auto_upgrade_off_never_uncordons_a_node_restarted_in_place() -> None:
    # Cordoned by an admin while its driver restarted in place: not ours to uncordon.
    n = node(state=S.VALIDATION_REQUIRED, unschedulable=True, **{RESTART_ONLY: "true"})
    t = cleanup(n).transition
    assert t is not None and t.unschedulable is None


def test_with_the_node_agent_its_answer_on_the_driver_still_loaded_counts() -> None:
    # The agent validated the driver before the restart; restarted in place, that driver
    # is the one loaded, so its answer need not be newer than the new driver pod.
    new = replace(driver("new", created=NOW - 50), config_digest=DIGEST)
    earlier = AgentVerdict("True", since=NOW - 3600)
    c = replace(ctx(S.VALIDATION_REQUIRED, new, in_place=True), agent=True)
    c = replace(c, node=replace(c.node, validated=earlier))
    t = step(c).transition
    assert t is not None and t.to is S.UPGRADE_DONE
    # After a full walk's restart the same answer is about the old driver: it waits.
    walked = replace(c, node=replace(c.node, annotations={}))
    assert step(walked).transition is None
