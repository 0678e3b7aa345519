"""Informers against a real kube-apiserver: restarts, 410 relists, any kind, indices."""

from __future__ import annotations

import asyncio

import pytest

from reconciler import GVK, Object, ObjectKey
from reconciler.envtest import ControlPlane
from tests.polling import eventually

from .conftest import CONFIGMAP, WIDGET, Kit, configmap, ensure_widget_crd

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: Object) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: Object, new: Object) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: Object) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


async def restart_apiserver(control_plane: ControlPlane) -> None:
    # Stopping runs in a thread so informers meet the outage while it happens. Starting
    # runs on this thread: the apiserver dies with the thread that started it
    # (PR_SET_PDEATHSIG), and executor threads end with the test's event loop.
    await asyncio.to_thread(control_plane.stop_apiserver)
    await asyncio.sleep(0.5)
    control_plane.start_apiserver()


def names(kit: Kit, namespace: str) -> set[str]:
    return {o["metadata"]["name"] for o in kit.cache.list(CONFIGMAP, namespace=namespace)}


async def test_watch_survives_an_apiserver_restart(
    kit: Kit, namespace: str, control_plane: ControlPlane
) -> None:
    informer = kit.cache.informer(CONFIGMAP, namespace=namespace)
    await kit.client.apply(configmap("before", namespace))
    await kit.cache.start()
    await kit.cache.wait_for_sync(60)
    await eventually(lambda: names(kit, namespace) == {"before"}, "first object cached")
    watches = informer.reflector.watches

    await restart_apiserver(control_plane)

    await kit.client.apply(configmap("after", namespace))
    await kit.client.apply(configmap("before", namespace, changed="yes"))
    await eventually(
        lambda: names(kit, namespace) == {"before", "after"}, "object created after restart"
    )
    await eventually(
        lambda: (
            (kit.cache.get(CONFIGMAP, "before", namespace) or {}).get("data") == {"changed": "yes"}
        ),
        "update after restart",
    )
    assert informer.reflector.watches > watches, "the informer watched again"
    assert informer.running


async def test_relist_after_410_delivers_changes_and_deletes(
    kit: Kit, namespace: str, control_plane: ControlPlane
) -> None:
    informer = kit.cache.informer(CONFIGMAP, namespace=namespace)
    rec = Recorder()
    informer.add_handler(rec)
    for name in ("keep", "change", "remove"):
        await kit.client.apply(configmap(name, namespace))
    await kit.cache.start()
    await kit.cache.wait_for_sync(60)
    await eventually(lambda: len(names(kit, namespace)) == 3, "initial objects cached")

    # A partition outlasting the server's history: stop watching, change things, then
    # make the old resourceVersion unservable (compact etcd, and restart the apiserver
    # so its watch cache forgets too).
    await informer.stop()
    lists = informer.reflector.lists
    rec.events.clear()
    await kit.client.apply(configmap("change", namespace, v="2"))
    await kit.client.delete(CONFIGMAP, "remove", namespace=namespace)
    await kit.client.apply(configmap("new", namespace))
    control_plane.compact_etcd()
    await restart_apiserver(control_plane)

    informer.start()
    await eventually(lambda: informer.reflector.lists > lists, "relist after 410")
    await eventually(lambda: len(rec.events) >= 3, "events from the relist")
    assert sorted(rec.events) == [("add", "new"), ("delete", "remove"), ("update", "change")]
    assert names(kit, namespace) == {"keep", "change", "new"}


async def test_custom_resource_informer_with_indices(kit: Kit, namespace: str) -> None:
    crd = await ensure_widget_crd(kit)
    widget = GVK("test.reconciler.dev", "v1", "Widget")
    informer = kit.cache.informer(widget, namespace=namespace, index_labels=["tier"])
    await kit.cache.start()
    owner = (await kit.client.apply(configmap("owner", namespace))).object
    for i, tier in enumerate(["gpu", "gpu", "cpu"]):
        await kit.client.apply(
            {
                "apiVersion": "test.reconciler.dev/v1",
                "kind": "Widget",
                "metadata": {
                    "name": f"w{i}",
                    "namespace": namespace,
                    "labels": {"tier": tier},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "name": "owner",
                            "uid": owner["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {"value": i},
            }
        )
    await kit.cache.wait_for_sync(60)
    await eventually(lambda: len(informer.store) == 3, "widgets cached")
    gpu = kit.cache.list(widget, labels={"tier": "gpu"})
    assert sorted(o["metadata"]["name"] for o in gpu) == ["w0", "w1"]
    owned = kit.cache.list(widget, index=("owner", owner["metadata"]["uid"]))
    assert len(owned) == 3
    cached = kit.cache.get(widget, "w2", namespace)
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
    assert cached["kind"] == "Widget" and cached["spec"] == {"value": 2}
    assert crd["metadata"]["name"] == "widgets.test.reconciler.dev"
    assert informer.store.get(ObjectKey(namespace, "w0")) is not None


async def test_a_quiet_watch_is_not_taken_for_an_outage(kit: Kit) -> None:
    """Nobody writes widgets here: their watch hears nothing but the server's bookmarks,
    and for a custom resource the first comes about two minutes after the watch opens.
    The informer must wait for it, not call the server unreachable (a WARNING, and a
    re-watch) every two minutes for each quiet kind, as an inactivity limit of 120 s
    did for NVIDIADrivers on every cluster without one."""
    await ensure_widget_crd(kit)
    informer = kit.cache.informer(WIDGET)
    await kit.cache.start()
    await kit.cache.wait_for_sync(60)
    await eventually(lambda: informer.reflector.watches == 1, "the watch open")

    await asyncio.sleep(135)  # past the first bookmark (~121 s after the watch opened)

    assert kit.cache.connectivity.outages == 0
    assert informer.reflector.watches == 1, "the quiet watch was dropped and reopened"
