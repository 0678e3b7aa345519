"""A way back: the request as the policy's annotations say it, which image a pinned-back
DaemonSet runs, which nodes a rollback marks and holds, and how a marked failed node and a
validated one are planned."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from components.api import (
    LAST_GOOD_IMAGE,
    ROLLBACK_ANNOTATION,
    ROLLBACK_NODE,
    RollbackMode,
    UpgradeState,
    pinned_image,
    rollback_images,
    rollback_request,
)
from components.upgrade import FAILED_STATE, NodeContext, plan_node
from components.upgrade._rollback import rollback_plan, rolling_back_message

from .builders import NOW, driver, node, policy

pytestmark = pytest.mark.unit
S = UpgradeState
GOOD, BAD = "driver:580-ubuntu22.04", "driver:590-ubuntu22.04"


def cp(generation: int = 3, *, bound: int | None = None, reason: str = "RollingBack",
       **annotations: str) -> dict[str, Any]:  # fmt: skip
    """A policy with these annotations, its rollback bound to generation `bound` (a
    `RollingBack` condition with that observedGeneration) where given."""
    meta = {"name": "cluster-policy", "generation": generation, "annotations": annotations}
    if bound is None:
        return {"metadata": meta}
    condition = {
        "type": "RollingBack",
        "status": "True",
        "reason": reason,
        "observedGeneration": bound,
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    return {"metadata": meta, "status": {"upgrade": {"conditions": [condition]}}}


def test_the_request_is_read_and_a_bad_value_is_refused_by_name() -> None:
    assert rollback_request(cp()).mode is None
    assert rollback_request(cp(**{ROLLBACK_ANNOTATION: "failed"})).mode is RollbackMode.FAILED
    assert rollback_request(cp(**{ROLLBACK_ANNOTATION: "all"})).mode is RollbackMode.ALL
    bad = rollback_request(cp(**{ROLLBACK_ANNOTATION: "yes"}))
    assert bad.mode is None
    assert bad.problem == f"annotation {ROLLBACK_ANNOTATION}: 'yes' is not one of: failed, all"


def test_a_request_holds_for_the_spec_it_was_bound_to_and_ends_when_it_changes() -> None:
    new = rollback_request(cp(**{ROLLBACK_ANNOTATION: "failed"}))
    assert new.to_bind and not new.active and not new.ended
    bound = rollback_request(cp(3, bound=3, **{ROLLBACK_ANNOTATION: "failed"}))
    assert bound.active and not bound.to_bind
    changed = rollback_request(cp(4, bound=3, **{ROLLBACK_ANNOTATION: "failed"}))
    assert changed.ended and not changed.active
    assert rollback_request(cp(3, bound=3)).ended  # withdrawn
    # Once ended, the request is spent: it does not bind again to the new spec.
    spent = rollback_request(cp(4, bound=3, reason="RollbackEnded", **{ROLLBACK_ANNOTATION: "all"}))
    assert spent.spent and not spent.to_bind and not spent.active and not spent.ended


def test_the_renderer_sees_last_good_images_only_while_the_rollback_holds() -> None:
    nodes = [{"metadata": {"name": "a", "annotations": {LAST_GOOD_IMAGE: GOOD}}}]
    assert rollback_images(cp(**{ROLLBACK_ANNOTATION: "failed"}), nodes) == {}
    held = cp(3, bound=3, **{ROLLBACK_ANNOTATION: "failed"})
    assert rollback_images(held, nodes) == {"a": GOOD}
    assert rollback_images(cp(4, bound=3, **{ROLLBACK_ANNOTATION: "all"}), nodes) == {}


def test_a_daemonset_is_pinned_to_the_last_good_image_most_of_its_nodes_had() -> None:
    # c validated the new image (its last good is the spec's own): it does not vote.
    last_good = {"a": GOOD, "b": GOOD, "c": BAD, "x": "driver:1-rhel9"}
    assert pinned_image(BAD, ["a", "b", "c"], last_good) == GOOD
    assert pinned_image(BAD, ["c"], last_good) == BAD  # nothing to go back to
    assert pinned_image(BAD, ["a", "b"], {}) == BAD  # no rollback
    # A tie goes to the first by name, the same on every render.
    assert pinned_image(BAD, ["a", "b"], {"a": "driver:2", "b": "driver:1"}) == "driver:1"


def pool() -> list[Any]:
    return [
        node("a", S.UPGRADE_DONE, **{LAST_GOOD_IMAGE: BAD}),  # walked, healthy
        node("b", S.UPGRADE_FAILED, unschedulable=True, **{LAST_GOOD_IMAGE: GOOD}),
        node("c", S.VALIDATION_REQUIRED, unschedulable=True, **{LAST_GOOD_IMAGE: GOOD}),
        node("d", S.UPGRADE_REQUIRED, **{LAST_GOOD_IMAGE: GOOD}),  # held by the halt
    ]


def request(mode: str, *, bound: bool = False) -> Any:
    return rollback_request(cp(3, bound=3 if bound else None, **{ROLLBACK_ANNOTATION: mode}))


def test_failed_marks_the_failing_nodes_before_binding_and_holds_every_unmarked_waiting_node() -> (
    None
):
    plan = rollback_plan(request("failed"), pool(), ["b"], images=frozenset({BAD}))
    assert plan.mark == ("b",) and not plan.bind  # bound once the cache shows the mark
    assert plan.hold == {"d"}
    marked = [replace(n, annotations={**n.annotations, ROLLBACK_NODE: "true"}) if n.name == "b"
              else n for n in pool()]  # fmt: skip
    assert rollback_plan(request("failed"), marked, ["b"], images=frozenset({BAD})).bind


def test_all_marks_every_node_the_rollout_walked_or_is_walking() -> None:
    plan = rollback_plan(request("all"), pool(), ["b"], images=frozenset({BAD}))
    assert plan.mark == ("a", "b", "c")  # d never left the good image
    assert plan.hold == {"d"}  # until the pin makes it in sync again


def test_once_bound_a_node_that_fails_is_marked_and_a_node_validated_again_is_back() -> None:
    nodes = [
        node("a", S.UPGRADE_DONE, **{ROLLBACK_NODE: "true"}),
        node("b", S.UPGRADE_DONE, **{ROLLBACK_NODE: "back"}),
        node("c", S.UPGRADE_FAILED, unschedulable=True),
    ]
    plan = rollback_plan(request("all", bound=True), nodes, ["c"], images=frozenset({GOOD}))
    assert plan.mark == ("c",) and not plan.bind
    assert plan.remaining == (("a", "upgrade-done"), ("c", "upgrade-failed"))
    assert plan.done == ("b",)
    rolling, reason, message = rolling_back_message(plan, "590")
    assert rolling and reason == "RollingBack"
    assert message.startswith(
        f"rollback (all) of driver 590: 2 nodes going back to their last good driver ({GOOD})"
    )
    done = rollback_plan(request("all", bound=True), nodes[1:2], [])
    assert rolling_back_message(done, "590")[:2] == (False, "RolledBack")


def test_an_ended_rollback_clears_every_mark() -> None:
    nodes = [node("a", S.UPGRADE_DONE, **{ROLLBACK_NODE: "true"}), node("b", S.UPGRADE_DONE)]
    ended = rollback_request(cp(4, bound=3, **{ROLLBACK_ANNOTATION: "failed"}))
    plan = rollback_plan(ended, nodes, [])
    assert plan.clear == ("a",) and not plan.hold and not plan.mark


def failed(**annotations: str) -> Any:
    return node(
        "n1",
        S.UPGRADE_FAILED,
        unschedulable=True,
        **{FAILED_STATE: S.VALIDATION_REQUIRED.value, **annotations},
    )


def test_a_marked_failed_node_walks_back_once_its_driver_is_pinned_back() -> None:
    pinned = NodeContext(failed(**{ROLLBACK_NODE: "true"}), driver("bad", ready=False), "good")
    s = plan_node(pinned, policy(), NOW)
    assert s.transition is not None and s.transition.to is S.WAIT_FOR_JOBS_REQUIRED
    assert s.transition.reason.startswith("rolling back: driver pod")
    # Not marked (no rollback asked for it): it waits as any failed node does.
    unmarked = NodeContext(failed(), driver("bad", ready=False), "good")
    assert plan_node(unmarked, policy(), NOW).transition is None
    # Marked, but the pin has not landed yet: nothing to walk back to.
    early = NodeContext(failed(**{ROLLBACK_NODE: "true"}), driver("bad", ready=False), "bad")
    assert plan_node(early, policy(), NOW).transition is None


def test_the_image_a_node_ran_healthy_is_recorded_with_a_transition_written_anyway() -> None:
    good, bad = replace(driver("old"), image=GOOD), replace(driver("new"), image=BAD)
    first = plan_node(NodeContext(node(), good, "old"), policy(), NOW)
    assert first.transition is not None and first.transition.to is S.UPGRADE_DONE
    assert first.transition.annotations[LAST_GOOD_IMAGE] == GOOD
    # Done on it, then outdated: the record goes with upgrade-required (no write of its
    # own: a node the node labeller made upgrade-done is written once, as before).
    assert plan_node(NodeContext(node(state=S.UPGRADE_DONE), good, "old"), policy(), NOW).empty
    s = plan_node(NodeContext(node(state=S.UPGRADE_DONE), good, "new"), policy(), NOW)
    assert s.transition is not None and s.transition.to is S.UPGRADE_REQUIRED
    assert s.transition.annotations[LAST_GOOD_IMAGE] == GOOD
    # A node that failed the new driver never records it.
    gone = plan_node(NodeContext(failed(), replace(bad, ready=False), "new"), policy(), NOW)
    assert gone.transition is None


def test_the_validator_refuses_a_bad_rollback_request_by_name() -> None:
    from components.offline import validate_text

    text = """
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata:
  name: gpu-driver
  annotations: {nvidia.com/driver-rollback: everything}
spec: {}
"""
    problems = [p for _, p in validate_text(text, "nvd.yaml").problems]
    assert [p.path for p in problems] == [f"metadata.annotations.{ROLLBACK_ANNOTATION}"]
    assert "'everything' is not one of: failed, all" in problems[0].message
    good = text.replace("everything", "failed")
    assert validate_text(good, "nvd.yaml").problems == []
