"""The pod tally judges a DaemonSet exactly as a look at all its pods would, after any
sequence of pods coming, changing and going (the informer's events, replayed)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.controllers._readiness import DaemonSetPodTally, tally_on
from components.operands import daemonset_ready
from components.operands.readiness import daemonset_pods_ready

pytestmark = pytest.mark.unit

NS = "gpu-operator"
UID = "driver-uid"
OTHER = "toolkit-uid"


def ds(strategy: str, desired: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "nvidia-driver-daemonset", "uid": UID, "generation": 2},
        "spec": {"updateStrategy": {"type": strategy}},
        "status": {
            "observedGeneration": 2,
            "desiredNumberScheduled": desired,
            "numberUnavailable": 0,
            "updatedNumberScheduled": desired,
            "numberAvailable": desired,
        },
    }


REVISIONS = [
    {
        "metadata": {
            "name": f"nvidia-driver-daemonset-{h}",
            "labels": {"controller-revision-hash": h},
            "ownerReferences": [{"kind": "DaemonSet", "uid": UID}],
        },
        "revision": n,
    }
    for h, n in (("old", 1), ("new", 2))
]


def pod(
    name: str,
    *,
    node: str = "n0",
    ready: bool = True,
    revision: str | None = "new",
    owner: str = UID,
    namespace: str = NS,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "ownerReferences": [{"kind": "DaemonSet", "uid": owner, "controller": True}],
    }
    if revision is not None:
        meta["labels"] = {"controller-revision-hash": revision}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": ready}]},
    }


def judged(tally: DaemonSetPodTally, strategy: str, desired: int) -> tuple[bool, list[str]]:
    return daemonset_pods_ready(ds(strategy, desired), tally.pods_of(UID), REVISIONS)


def test_a_pod_not_ready_names_its_node_until_it_is_ready_or_gone() -> None:
    tally = DaemonSetPodTally(NS)
    tally.on_add(pod("a", node="n0"))
    tally.on_add(pod("b", node="n1", ready=False))
    assert judged(tally, "OnDelete", 2) == (False, ["n1"])
    tally.on_update(pod("b", node="n1", ready=False), pod("b", node="n1"))
    assert judged(tally, "OnDelete", 2) == (True, [])
    tally.on_delete(pod("b", node="n1"))
    assert judged(tally, "OnDelete", 2) == (False, [])


def test_an_old_revision_holds_the_driver_back_on_its_node() -> None:
    tally = DaemonSetPodTally(NS)
    tally.on_add(pod("a", node="n0"))
    tally.on_add(pod("b", node="n1", revision="old"))
    assert judged(tally, "OnDelete", 2) == (False, ["n1"])


def test_pods_of_other_daemonsets_and_namespaces_are_not_counted() -> None:
    tally = DaemonSetPodTally(NS)
    tally.on_add(pod("a", node="n0"))
    tally.on_add(pod("b", node="n1", ready=False, owner=OTHER))
    tally.on_add(pod("c", node="n2", ready=False, namespace="default"))
    assert judged(tally, "RollingUpdate", 1) == (True, [])
    assert tally.pods_of(OTHER).unready_nodes() == {"n1"}


POD = st.builds(
    pod,
    st.sampled_from(["p0", "p1", "p2", "p3", "p4"]),
    node=st.sampled_from(["n0", "n1", "n2", ""]),
    ready=st.booleans(),
    revision=st.sampled_from(["new", "old", None]),
    owner=st.sampled_from([UID, UID, OTHER]),
    namespace=st.sampled_from([NS, NS, NS, "default"]),
    deleting=st.booleans(),
)
EVENT = st.tuples(st.sampled_from(["put", "put", "delete"]), POD)


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=25))
def test_the_tally_agrees_with_a_look_at_every_pod(events: list[tuple[str, Any]]) -> None:
    tally = DaemonSetPodTally(NS)
    cached: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, obj in events:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        old = cached.get(key)
        if kind == "delete":
            if old is not None:
                tally.on_delete(cached.pop(key))
        elif old is None:
            cached[key] = obj
            tally.on_add(obj)
        else:
            cached[key] = obj
            tally.on_update(old, obj)
        ours = [
            p
            for p in cached.values()
            if p["metadata"]["namespace"] == NS
            and p["metadata"]["ownerReferences"][0]["uid"] == UID
        ]
        for strategy in ("OnDelete", "RollingUpdate"):
            for desired in (1, 2, 3):
                assert judged(tally, strategy, desired) == daemonset_ready(
                    ds(strategy, desired), ours, REVISIONS
                )


class CachedPods:
    """Stands in for the pods informer: a late subscriber is told every cached pod."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.handlers: list[Any] = []

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)
        for p in self.pods:
            handler.on_add(p)


def test_every_controller_reads_one_tally_that_starts_from_the_cache() -> None:
    informer = CachedPods([pod("a", node="n0", ready=False)])
    first = tally_on(cast(Any, informer), NS)
    assert tally_on(cast(Any, informer), NS) is first
    assert len(informer.handlers) == 1
    assert judged(first, "OnDelete", 1) == (False, ["n0"])
