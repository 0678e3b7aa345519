"""Which events reach the queue, and as which requests."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import (
    GVK,
    AnnotationsChanged,
    Funcs,
    GenerationChanged,
    LabelsChanged,
    Matching,
    Or,
    Request,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
)
from reconciler.lowlevel import Queue, WatchHandler

pytestmark = pytest.mark.unit


def obj(
    name: str = "x", gen: int = 1, labels: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": "gpu",
            "generation": gen,
            "labels": labels or {},
            **meta,
        },
    }


def test_generation_changed_ignores_status_only_updates() -> None:
    p = GenerationChanged()
    assert p.create(obj()) and p.delete(obj())
    assert not p.update(obj(gen=1), obj(gen=1))
    assert p.update(obj(gen=1), obj(gen=2))


def test_labels_and_annotations_changed() -> None:
    assert LabelsChanged().update(obj(labels={"a": "1"}), obj(labels={"a": "2"}))
    assert not LabelsChanged().update(obj(labels={"a": "1"}), obj(labels={"a": "1"}))
    assert AnnotationsChanged().update(obj(annotations={"x": "1"}), obj())


def test_or_combines() -> None:
    p = Or(GenerationChanged(), LabelsChanged())
    assert p.update(obj(gen=1), obj(gen=1, labels={"a": "b"}))
    assert not p.update(obj(), obj())


def test_funcs_and_matching() -> None:
    p = Funcs(update=lambda old, new: False)
    assert p.create(obj()) and not p.update(obj(), obj())
    m = Matching(lambda o: o["metadata"]["labels"].get("gpu") == "true")
    assert m.update(obj(labels={"gpu": "true"}), obj())  # it left: still of interest
    assert not m.create(obj())


def test_owner_mapping_follows_controller_refs_of_the_right_kind() -> None:
    policy = GVK("nvidia.com", "v1", "ClusterPolicy")
    refs = [
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "cp", "controller": True},
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "other"},
        {"apiVersion": "example.com/v1", "kind": "ClusterPolicy", "name": "x", "controller": True},
    ]
    to_owner = enqueue_owner(policy, namespaced=False)
    assert list(to_owner(obj(ownerReferences=refs))) == [Request("", "cp")]
    all_owners = enqueue_owner(policy, namespaced=False, only_controller=False)
    assert list(all_owners(obj(ownerReferences=refs))) == [Request("", "cp"), Request("", "other")]
    namespaced = enqueue_owner(GVK("apps", "v1", "DaemonSet"), namespaced=True)
    ds_ref = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}]
    assert list(namespaced(obj(ownerReferences=ds_ref))) == [Request("gpu", "ds")]


def test_handler_applies_predicates_and_maps_both_sides_of_an_update() -> None:
    q: Queue[Request] = Queue()
    by_label = enqueue_mapped(lambda o: [Request("", v) for v in o["metadata"]["labels"].values()])
    handler = WatchHandler(q, by_label, [LabelsChanged()])
    handler.on_update(obj(labels={"k": "old"}), obj(labels={"k": "new"}))
    assert sorted(q.get_nowait().name for _ in range(2)) == ["new", "old"]
    handler.on_update(obj(labels={"k": "same"}), obj(labels={"k": "same"}))
    assert len(q) == 0


def test_a_handler_told_not_to_map_the_old_object_maps_each_update_once() -> None:
    """A mapping whose answer no change can move (a constant, the object's name) is run
    once per update, not twice: at 1,000 nodes several such mappings list every node."""
    q: Queue[Request] = Queue()
    calls: list[str] = []

    def every_policy(o: dict[str, Any]) -> list[Request]:
        calls.append(o["metadata"]["labels"]["k"])
        return [Request("", "cluster-policy")]

    handler = WatchHandler(q, enqueue_mapped(every_policy), map_old=False)
    handler.on_update(obj(labels={"k": "old"}), obj(labels={"k": "new"}))
    assert calls == ["new"]
    assert q.get_nowait() == Request("", "cluster-policy")
    assert len(q) == 0


def test_default_mapping_is_the_object_itself() -> None:
    q: Queue[Request] = Queue()
    WatchHandler(q, enqueue_object).on_add(obj("ds1"))
    assert q.get_nowait() == Request("gpu", "ds1")
