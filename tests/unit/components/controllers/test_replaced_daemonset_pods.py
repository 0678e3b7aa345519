"""Pods a replaced DaemonSet left behind: which are deleted, when the sweep is asked for,
and when the operator stops looking. The informer's events are replayed by hand; the API
server is a dict."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers._orphans import ReplacedDaemonSetPods
from reconciler import Request

pytestmark = pytest.mark.unit

NS = "gpu-operator"
NAME = "nvidia-device-plugin-daemonset"
SELECTOR = {"app": NAME}


def daemonset(uid: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "uid": uid},
        "spec": {"selector": {"matchLabels": SELECTOR}},
    }


def pod(name: str, owner: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"pod-{name}",
        "labels": {**SELECTOR, "nvidia.com/gpu-operator.component": "state-device-plugin"},
        "ownerReferences": [{"kind": "DaemonSet", "name": NAME, "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta}


class FakeClient:
    """The cache holds `cached` (DaemonSets); the server holds `pods`."""

    def __init__(self) -> None:
        self.cached: dict[str, Any] = {}
        self.pods: dict[str, Any] = {}
        self.deleted: list[tuple[str, str | None]] = []
        self.lists = 0

    def get(self, gvk: Any, name: str, namespace: str = "") -> Any:
        return self.cached.get(name)

    async def list_live(
        self, gvk: Any, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Any]:
        self.lists += 1
        assert label_selector == f"app={NAME}"
        return list(self.pods.values())

    async def delete(self, gvk: Any, name: str, **kwargs: Any) -> None:
        self.deleted.append((name, kwargs.get("uid")))
        self.pods.pop(name, None)

    def list(self, gvk: Any, **kwargs: Any) -> list[Any]:
        return []  # no ClusterPolicy


class FakeController:
    def __init__(self) -> None:
        self.enqueued: list[Request] = []

    def enqueue(self, request: Request) -> None:
        self.enqueued.append(request)


class FakeManager:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.made = FakeController()

    def controller(self, name: str, reconciler: Any) -> FakeController:
        return self.made


class FakeInformer:
    def add_handler(self, handler: Any) -> None:
        pass


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], reason, message))


def sweep(client: FakeClient, recorder: FakeRecorder | None = None) -> ReplacedDaemonSetPods:
    replaced = ReplacedDaemonSetPods(
        FakeManager(client),  # type: ignore[arg-type]
        NS,
        recorder or FakeRecorder(),  # type: ignore[arg-type]
    )
    replaced.setup(FakeInformer())  # type: ignore[arg-type]
    return replaced


def enqueued(replaced: ReplacedDaemonSetPods) -> list[Request]:
    return replaced.controller.enqueued  # type: ignore[union-attr]


async def test_a_deleted_then_recreated_daemonset_leaves_no_pod_of_its_old_self() -> None:
    client = FakeClient()
    replaced = sweep(client)
    replaced.on_delete(daemonset("old"))
    client.cached[NAME] = daemonset("new")
    client.pods = {
        "stale": pod("stale", "old"),
        "going": pod("going", "old", deleting=True),
        "fresh": pod("fresh", "new"),
    }
    changes = await replaced.delete(NAME)
    assert client.deleted == [("stale", "pod-stale")]
    assert [c.verb for c in changes] == ["deleted"]
    assert "stale" in changes[0].what and changes[0].component == "state-device-plugin"
    # None left to delete (the other old pod was already going): the old uid is forgotten.
    lists = client.lists
    assert await replaced.delete(NAME) == []
    assert client.lists == lists, "a forgotten DaemonSet is listed again"


async def test_the_sweep_is_asked_for_when_a_daemonset_is_back_under_a_name_that_went() -> None:
    client = FakeClient()
    recorder = FakeRecorder()
    replaced = sweep(client, recorder)
    replaced.on_add(daemonset("first"))
    assert enqueued(replaced) == [], "a DaemonSet seen for the first time asks for nothing"
    replaced.on_delete(daemonset("first"))
    assert enqueued(replaced) == []
    client.cached[NAME] = daemonset("new")
    client.pods = {"stale": pod("stale", "first")}
    replaced.on_add(daemonset("new"))
    assert enqueued(replaced) == [Request(NS, NAME)]
    await replaced.reconcile(Request(NS, NAME))
    assert client.deleted == [("stale", "pod-stale")]
    assert recorder.events == [
        (
            NAME,
            "Deleted",
            f"deleted Pod {NS}/stale (of the replaced DaemonSet {NAME}) (state-device-plugin)",
        )
    ]


async def test_a_replacement_read_as_an_update_counts_as_well() -> None:
    """A relist after a watch gap hands the informer the new object under the old key."""
    client = FakeClient()
    replaced = sweep(client)
    replaced.on_update(daemonset("old"), daemonset("new"))
    assert enqueued(replaced) == [Request(NS, NAME)]
    client.cached[NAME] = daemonset("new")
    client.pods = {"stale": pod("stale", "old")}
    await replaced.delete(NAME)
    assert client.deleted == [("stale", "pod-stale")]


async def test_a_daemonset_gone_and_not_back_is_left_to_the_garbage_collector() -> None:
    client = FakeClient()
    replaced = sweep(client)
    replaced.on_delete(daemonset("old"))
    client.pods = {"stale": pod("stale", "old")}
    assert await replaced.delete(NAME) == []
    assert client.deleted == [] and client.lists == 0
    replaced.on_update(daemonset("same"), daemonset("same"))  # a plain update: nothing
    replaced.on_delete(daemonset("elsewhere", namespace="other"))
    client.cached[NAME] = daemonset("new")
    await replaced.delete(NAME)
    assert client.deleted == [("stale", "pod-stale")]
