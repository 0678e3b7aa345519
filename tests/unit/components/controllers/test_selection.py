"""A stale driver DaemonSet goes only when no node depends on it alone."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers._selection import nodes_only_served_by, selects

pytestmark = pytest.mark.unit


def ds(selector: dict[str, str], expressions: list[dict[str, Any]] | None = None) -> Any:
    spec: dict[str, Any] = {"nodeSelector": selector}
    if expressions is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        }
    return {"spec": {"template": {"spec": spec}}}


def node(name: str, **labels: str) -> Any:
    return {"metadata": {"name": name, "labels": labels}}


def test_node_selector_and_affinity() -> None:
    d = ds({"os": "ubuntu"}, [{"key": "pool", "operator": "NotIn", "values": ["a"]}])
    assert selects(d, node("n", os="ubuntu"))
    assert not selects(d, node("n", os="ubuntu", pool="a"))
    assert not selects(d, node("n", os="rhel"))
    exists = ds({}, [{"key": "gpu", "operator": "Exists"}])
    assert selects(exists, node("n", gpu="x")) and not selects(exists, node("n"))


def test_precompiled_switch_frees_the_old_daemonset() -> None:
    nodes = [node("a", os="u", kernel="k1"), node("b", os="u", kernel="k2")]
    old = ds({"os": "u"})
    new = [ds({"os": "u", "kernel": "k1"}), ds({"os": "u", "kernel": "k2"})]
    assert nodes_only_served_by(old, new, nodes) == set()


def test_a_node_no_new_daemonset_serves_keeps_the_old_one() -> None:
    nodes = [node("a", os="u", kernel="k1"), node("b", os="u")]  # b has no kernel label
    old = ds({"os": "u"})
    new = [ds({"os": "u", "kernel": "k1"})]
    assert nodes_only_served_by(old, new, nodes) == {"b"}


def test_a_daemonset_no_node_selects_goes() -> None:
    assert nodes_only_served_by(ds({"os": "rhel"}), [], [node("a", os="u")]) == set()
