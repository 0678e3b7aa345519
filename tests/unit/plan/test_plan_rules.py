"""The plan's own rules: the fields a person reads, the admission's rounds, the text."""

from __future__ import annotations

import pytest

from components.plan import NodePlan, ObjectChange, PolicyPlan
from components.plan._fields import changed_fields, comparable
from components.plan._nodes import _rounds
from components.plan._output import text

pytestmark = pytest.mark.unit


def test_named_items_are_compared_by_name_and_server_fields_left_out() -> None:
    before = {
        "metadata": {"name": "ds", "resourceVersion": "1", "generation": 1},
        "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y"}]},
        "status": {"numberReady": 1},
    }
    after = {
        "metadata": {"name": "ds", "resourceVersion": "9", "generation": 2},
        "spec": {"containers": [{"name": "a", "image": "x:2"}, {"name": "b", "image": "y"}]},
        "status": {"numberReady": 0},
    }
    assert changed_fields(comparable(before), comparable(after)) == ["spec.containers[a].image"]
    assert changed_fields({}, {"labels": {"team": "ml"}}, "spec") == ["spec.labels.team"]


def test_rounds_follow_the_limits_and_unavailable_nodes_go_first() -> None:
    nodes = {"c": {"spec": {"unschedulable": True}}}
    assert _rounds(["a", "b", "c", "d"], nodes, 0, 2) == (("c", "a", "b"), ("d",))
    assert _rounds(["a", "b", "c"], {}, 1, 3) == (("a",), ("b",), ("c",))
    assert _rounds(["a", "b"], {}, 0, 0) == ()  # maxUnavailable 0: nothing starts


def test_text_names_objects_fields_rounds_and_holds() -> None:
    plan = PolicyPlan(
        "cp",
        (ObjectChange("changed", "DaemonSet", "drv", "ns", "state-driver", ("spec.x",)),),
        NodePlan(
            restart=("a",),
            walk=("b",),
            held=("c",),
            rounds=(("a",), ("b",)),
            preflight="image i is missing, needed by node c",
            limits={"maxParallelUpgrades": 1, "maxUnavailable": 1},
        ),
    )
    assert list(text(plan)) == [
        "ClusterPolicy cp: 0 to create, 1 to change, 0 to delete",
        "  change  DaemonSet ns/drv (state-driver)",
        "            spec.x",
        "Driver restarted in place (no cordon, no drain): a",
        "Driver walked (cordon, drain, restart): b",
        "In 2 rounds (maxParallelUpgrades 1, maxUnavailable 1):",
        "  round 1: a",
        "  round 2: b",
        "Held by pre-flight: c: image i is missing, needed by node c",
    ]
    assert list(text(PolicyPlan("cp", (), NodePlan())))[-1] == "Nothing would change."
