"""`bench/join.py` times each joining node from its own creation, from the watch events
that show each step on it: a pod of another node, a pod no DaemonSet owns, or a second
event for a step already seen must not move a node's figures."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.tools import REPO

DEPLOY = "nvidia.com/gpu.deploy.driver"


@pytest.fixture(scope="module")
def join() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        return importlib.import_module("join")
    finally:
        sys.path.remove(str(REPO / "bench"))


def _node(name: str, *, labelled: bool = False, gpus: str = "0") -> dict[str, Any]:
    labels = {DEPLOY: "true"} if labelled else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": gpus}},
    }


def _pod(node: str, daemonset: str | None, *, ready: bool = False) -> dict[str, Any]:
    owners = [{"kind": "DaemonSet", "name": daemonset}] if daemonset else []
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {
        "metadata": {"name": f"{daemonset}-{node}", "ownerReferences": owners},
        "spec": {"nodeName": node},
        "status": status,
    }


def test_each_step_counts_from_the_nodes_own_creation(
    join: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([10.0, 10.5, 11.0, 11.25, 12.0, 13.0])
    monkeypatch.setattr(join.time, "monotonic", lambda: next(clock))
    timeline = join.Timeline({"a", "b"})
    timeline.created["a"] = 9.0
    timeline.created["b"] = 10.0
    timeline.node_seen(_node("a", labelled=True))  # 10.0
    timeline.pod_seen(_pod("a", "driver"))  # 10.5
    timeline.pod_seen(_pod("elsewhere", "driver"))  # another node's: no clock read
    timeline.pod_seen(_pod("a", None, ready=True))  # owned by no DaemonSet: ignored
    timeline.pod_seen(_pod("a", "driver", ready=True))  # 11.0 (created already seen)
    timeline.node_seen(_node("a", labelled=True, gpus="8"))  # 11.25
    timeline.node_seen(_node("b", labelled=True, gpus="8"))  # 12.0 both at once
    assert timeline.all_allocatable()
    since = timeline.since_creation()
    assert since["a"] == {
        "labelled": 1.0,
        "driver created": 1.5,
        "driver ready": 2.0,
        "allocatable": 2.25,
    }
    assert since["b"] == {"labelled": 2.0, "allocatable": 2.0}
    summary = join.summary(since)
    assert summary["allocatable"] == {"p50": 2.12, "p90": 2.25, "max": 2.25, "nodes": 2}
    assert summary["driver ready"]["nodes"] == 1


def test_a_node_not_yet_allocatable_keeps_the_join_waiting(join: ModuleType) -> None:
    timeline = join.Timeline({"a", "b"})
    timeline.node_seen(_node("a", labelled=True, gpus="8"))
    assert not timeline.all_allocatable()
