"""New DaemonSets wait for the node labels they select on, for a bounded time."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from components.api import ClusterPolicy
from components.controllers import LabelPolicy, LabelWait, node_label_patch, nodes_awaiting_labels
from components.controllers import _label_wait as label_wait_module
from reconciler import name_of

NFD_GPU = {"feature.node.kubernetes.io/pci-10de.present": "true"}
POLICY = ClusterPolicy.from_dict(
    {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "p"},
        "spec": {},
    }
)


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def labelled(name: str) -> dict[str, Any]:
    """A GPU node carrying every label the label controller writes for POLICY."""
    labels = dict(NFD_GPU)
    patch = node_label_patch(labels, LabelPolicy.of(POLICY))
    labels.update({k: v for k, v in patch.items() if v is not None})
    return node(name, labels)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nodes_awaiting_labels_are_gpu_nodes_the_label_controller_would_write() -> None:
    nodes = [node("fresh", dict(NFD_GPU)), labelled("done"), node("cpu", {})]
    assert nodes_awaiting_labels(nodes, POLICY) == ["fresh"]


def test_new_daemonsets_wait_until_the_last_node_is_labelled() -> None:
    clock = Clock()
    wait = LabelWait(clock)
    nodes = [node("a", dict(NFD_GPU)), node("b", dict(NFD_GPU)), labelled("c")]
    assert wait.remaining(nodes, POLICY) == label_wait_module.LABEL_WAIT_SECONDS
    clock.now += 1
    assert wait.remaining(nodes, POLICY) == label_wait_module.LABEL_WAIT_SECONDS - 1
    # Node events: an unrelated or still unlabelled node is not the last one.
    cache = {name_of(n): n for n in nodes}

    def changed(obj: dict[str, Any]) -> bool:
        cache[name_of(obj)] = obj
        return wait.landed(obj, cache.get)

    assert not changed(labelled("c"))
    assert not changed(node("a", {**NFD_GPU, "other": "x"}))
    assert not changed(labelled("a"))
    assert changed(labelled("b")), "the last awaited node brings its labels"
    assert wait.remaining([labelled("a"), labelled("b"), labelled("c")], POLICY) == 0.0


def test_a_deleted_node_is_not_waited_for() -> None:
    wait = LabelWait(Clock())
    nodes = [node("a", dict(NFD_GPU)), node("b", dict(NFD_GPU))]
    assert wait.remaining(nodes, POLICY) > 0
    cache = {name_of(n): n for n in nodes}
    del cache["a"]
    assert not wait.landed(nodes[0], cache.get)
    del cache["b"]
    assert wait.landed(nodes[1], cache.get)


def test_the_wait_is_bounded_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    wait = LabelWait(clock)
    stuck = [node("refused", dict(NFD_GPU))]
    assert wait.remaining(stuck, POLICY) > 0
    clock.now += label_wait_module.LABEL_WAIT_SECONDS
    with caplog.at_level(logging.WARNING):
        assert wait.remaining(stuck, POLICY) == 0.0
        assert wait.remaining(stuck, POLICY) == 0.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "1 nodes still lack their labels" in warnings[0]
    assert "refused" in warnings[0]
    refused = labelled("refused")
    assert not wait.landed(refused, lambda _: refused), "no longer waited for: no early reconcile"
    # Once every node is labelled, a later wait starts its own clock.
    assert wait.remaining([labelled("refused")], POLICY) == 0.0
    assert wait.remaining([node("new", dict(NFD_GPU))], POLICY) == (
        label_wait_module.LABEL_WAIT_SECONDS
    )
