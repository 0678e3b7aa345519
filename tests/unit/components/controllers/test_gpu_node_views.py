"""The views of GPU nodes kept between reconciles hold the latest view of each node only:
each view carries a copy of its node's labels, and a rollout changes every node many
times."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from components.controllers._view import GpuNodeViews, gpu_nodes

pytestmark = pytest.mark.unit


def node(name: str, version: int) -> dict[str, Any]:
    labels = {"feature.node.kubernetes.io/pci-10de.present": "true", "v": str(version)}
    return {"metadata": {"name": name, "resourceVersion": str(version), "labels": labels}}


def test_an_unchanged_node_keeps_its_view_and_a_changed_one_gets_a_new_one() -> None:
    views = GpuNodeViews()
    first = gpu_nodes([node("a", 1)], views)[0]
    assert gpu_nodes([node("a", 1)], views)[0] is first
    assert gpu_nodes([node("a", 2)], views)[0].labels["v"] == "2"


def test_superseded_and_deleted_nodes_are_not_kept_alive() -> None:
    views = GpuNodeViews()
    freed = [weakref.ref(view) for view in gpu_nodes([node("a", 1), node("b", 1)], views)]
    gpu_nodes([node("a", 2)], views)  # a changed, b deleted
    gc.collect()
    assert [ref() for ref in freed] == [None, None]
