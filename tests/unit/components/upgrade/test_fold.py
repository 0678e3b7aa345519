"""Transitions with nothing to do between them go in one write, and only those."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from components.api import UpgradeState
from components.upgrade import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    STATE_LABEL,
    NodeContext,
    NodeView,
    Step,
    Transition,
    fold,
    node_view,
    patched,
    plan_node,
)

from .builders import NOW, driver, gpu_pod, node_object, policy

S = UpgradeState


def _admitted() -> dict[str, Any]:
    return node_object("n1", S.CORDON_REQUIRED.value, **{DEVICE_PLUGIN_DEPLOY_LABEL: "true"})


def _planner(ctx: NodeContext, **fields: Any) -> Callable[[NodeView], Step]:
    def plan(view: NodeView) -> Step:
        return plan_node(replace(ctx, node=view), policy(**fields), NOW)

    return plan


def test_an_admitted_node_with_nothing_on_it_goes_to_the_driver_restart_in_one_patch() -> None:
    obj = _admitted()
    view = node_view(obj)
    ctx = NodeContext(node=view, driver=driver("old"), target_revision="new", pods=[driver("old")])
    first = plan_node(ctx, policy(), NOW)
    assert first.transition is not None

    f = fold(obj, view, first.transition, _planner(ctx), NOW)

    # Cordoned, no jobs to wait for, no GPU pods to delete, then the device plugin paused.
    assert [(t.to, t.clients) for _, t in f.steps] == [
        (S.WAIT_FOR_JOBS_REQUIRED, None),
        (S.POD_DELETION_REQUIRED, None),
        (S.POD_RESTART_REQUIRED, None),
        (S.POD_RESTART_REQUIRED, False),
    ]
    after = patched(obj, f.ops)
    assert after is not None
    labels = after["metadata"]["labels"]
    assert labels[STATE_LABEL] == S.POD_RESTART_REQUIRED.value
    assert labels[DEVICE_PLUGIN_DEPLOY_LABEL] == DEVICE_PLUGIN_PAUSED
    assert after["spec"]["unschedulable"] is True
    # Guarded by the state the node was read in: a node that moved meanwhile refuses it all.
    assert f.ops[0] == {
        "op": "test",
        "path": "/metadata/labels/nvidia.com~1gpu-driver-upgrade-state",
        "value": "cordon-required",
    }
    moved = node_object("n1", S.UPGRADE_FAILED.value, **{DEVICE_PLUGIN_DEPLOY_LABEL: "true"})
    assert patched(moved, f.ops) is None


def test_the_fold_stops_where_pods_must_go_first() -> None:
    # A GPU pod on the node: the cordon is written, and only then the pod deleted.
    obj = _admitted()
    view = node_view(obj)
    pods = [driver("old"), gpu_pod()]
    ctx = NodeContext(node=view, driver=driver("old"), target_revision="new", pods=pods)
    first = plan_node(ctx, policy(), NOW)
    assert first.transition is not None

    f = fold(obj, view, first.transition, _planner(ctx), NOW)

    assert [t.to for _, t in f.steps] == [S.WAIT_FOR_JOBS_REQUIRED, S.POD_DELETION_REQUIRED]
    after = patched(obj, f.ops)
    assert after is not None
    assert node_view(after).unschedulable
    assert plan_node(replace(ctx, node=node_view(after)), policy(), NOW).delete


def test_the_fold_stops_where_the_walk_waits() -> None:
    # Jobs to wait for: the node stays in wait-for-jobs-required.
    obj = _admitted()
    view = node_view(obj)
    job = gpu_pod(labels={"kind": "batch"})
    ctx = NodeContext(node=view, driver=driver("old"), target_revision="new", pods=[job])
    fields = {"waitForCompletion": {"podSelector": "kind=batch"}}
    first = plan_node(ctx, policy(**fields), NOW)
    assert first.transition is not None

    f = fold(obj, view, first.transition, _planner(ctx, **fields), NOW)

    assert [t.to for _, t in f.steps] == [S.WAIT_FOR_JOBS_REQUIRED]


def test_patched_applies_like_the_server_or_not_at_all() -> None:
    obj = node_object("n1", "a")
    path = "/metadata/labels/nvidia.com~1gpu-driver-upgrade-state"
    ops = [
        {"op": "test", "path": path, "value": "a"},
        {"op": "add", "path": path, "value": "b"},
        {"op": "test", "path": path, "value": "b"},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
    ]
    after = patched(obj, ops)
    assert after is not None and after["metadata"]["labels"][STATE_LABEL] == "b"
    assert obj["metadata"]["labels"][STATE_LABEL] == "a"  # the cached object is untouched
    assert patched(obj, [*ops, {"op": "remove", "path": "/metadata/annotations/x"}]) is None
    assert patched(obj, [{"op": "test", "path": path, "value": "b"}]) is None


def test_a_single_transition_is_its_own_patch() -> None:
    obj = node_object("n1", S.UNCORDON_REQUIRED.value)
    view = node_view(obj)
    t = Transition(S.UPGRADE_DONE, "uncordoned the node", unschedulable=False)
    f = fold(obj, view, t, lambda v: Step(), NOW)
    assert [t.to for _, t in f.steps] == [S.UPGRADE_DONE]
