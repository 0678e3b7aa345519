"""Pods a replaced DaemonSet left behind: which are deleted, and when the operator stops
looking. The informer's events are replayed by hand; the API server is a dict."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers.clusterpolicy._orphans import ReplacedDaemonSetPods

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


def sweep(client: FakeClient) -> ReplacedDaemonSetPods:
    return ReplacedDaemonSetPods(client, NS)  # type: ignore[arg-type]


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
    changes = await replaced.delete()
    assert client.deleted == [("stale", "pod-stale")]
    assert [c.verb for c in changes] == ["deleted"]
    assert "stale" in changes[0].what and changes[0].component == "state-device-plugin"
    # The next list finds only a pod already going: the old uid is forgotten.
    assert await replaced.delete() == []
    lists = client.lists
    await replaced.delete()
    assert client.lists == lists, "a forgotten DaemonSet is listed again"


async def test_a_replacement_read_as_an_update_counts_as_well() -> None:
    """A relist after a watch gap hands the informer the new object under the old key."""
    client = FakeClient()
    replaced = sweep(client)
    replaced.on_update(daemonset("old"), daemonset("new"))
    client.cached[NAME] = daemonset("new")
    client.pods = {"stale": pod("stale", "old")}
    await replaced.delete()
    assert client.deleted == [("stale", "pod-stale")]


async def test_a_daemonset_gone_and_not_back_is_left_to_the_garbage_collector() -> None:
    client = FakeClient()
    replaced = sweep(client)
    replaced.on_delete(daemonset("old"))
    client.pods = {"stale": pod("stale", "old")}
    assert await replaced.delete() == []
    assert client.deleted == [] and client.lists == 0
    replaced.on_update(daemonset("same"), daemonset("same"))  # a plain update: nothing
    replaced.on_delete(daemonset("elsewhere", namespace="other"))
    client.cached[NAME] = daemonset("new")
    await replaced.delete()
    assert client.deleted == [("stale", "pod-stale")]
