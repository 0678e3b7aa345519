"""The test control plane is a real apiserver: objects round-trip, watches see changes,
and it always cleans up after itself."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from reconciler import envtest
from reconciler.envtest import ControlPlane, ControlPlaneError

pytestmark = pytest.mark.integration

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.test"},
    "spec": {
        "group": "example.test",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_reports_the_built_kubernetes_version(control_plane: ControlPlane) -> None:
    version = control_plane.version()
    print(f"integration tests run against kube-apiserver {version}", file=sys.stderr)
    assert version == envtest.KUBERNETES_VERSION


async def test_core_object_create_read_update_watch_delete(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "crud-core"}})
    body = {"metadata": {"name": "settings"}, "data": {"mode": "a"}}
    created = await core.create_namespaced_config_map("crud-core", body)

    changes: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue()

    async def follow() -> None:
        stream = watch.Watch()
        async with stream.stream(
            core.list_namespaced_config_map,
            "crud-core",
            resource_version=created.metadata.resource_version,
            timeout_seconds=30,
        ) as events:
            async for event in events:
                await changes.put((event["type"], event["object"].data or {}))

    watcher = asyncio.create_task(follow())
    try:
        await core.patch_namespaced_config_map("settings", "crud-core", {"data": {"mode": "b"}})
        read = await core.read_namespaced_config_map("settings", "crud-core")
        assert read.data == {"mode": "b"}
        assert await asyncio.wait_for(changes.get(), 20) == ("MODIFIED", {"mode": "b"})
        await core.delete_namespaced_config_map("settings", "crud-core")
        kind, _ = await asyncio.wait_for(changes.get(), 20)
        assert kind == "DELETED"
    finally:
        watcher.cancel()
    with pytest.raises(client.ApiException) as missing:
        await core.read_namespaced_config_map("settings", "crud-core")
    assert missing.value.status == 404


async def _wait_established(ext: client.ApiextensionsV1Api, name: str) -> None:
    for _ in range(100):
        crd = await ext.read_custom_resource_definition(name)
        conditions = crd.status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"CRD {name} never became Established")


async def test_custom_resource_round_trip_and_schema(api_client: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    await ext.create_custom_resource_definition(WIDGET_CRD)
    await _wait_established(ext, "widgets.example.test")
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "crud-custom"}})
    custom = client.CustomObjectsApi(api_client)
    args = ("example.test", "v1", "crud-custom", "widgets")
    await custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
        },
    )
    merge = {"_content_type": "application/merge-patch+json"}
    await custom.patch_namespaced_custom_object(*args, "w", {"spec": {"size": 3}}, **merge)
    read = await custom.get_namespaced_custom_object(*args, "w")
    assert read["spec"] == {"size": 3}

    # The schema is enforced by the real apiserver, naming the field.
    with pytest.raises(client.ApiException) as invalid:
        await custom.patch_namespaced_custom_object(*args, "w", {"spec": {"size": 0}}, **merge)
    assert invalid.value.status == 422
    assert "spec.size" in invalid.value.body

    listed = await custom.list_namespaced_custom_object(*args)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["w"]
    await custom.delete_namespaced_custom_object(*args, "w")
    assert (await custom.list_namespaced_custom_object(*args))["items"] == []


def _occupied_port() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_taken_port_is_skipped_and_nothing_is_left_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocker, taken = _occupied_port()
    ports = iter([taken])
    real_free_port = envtest.free_port

    def first_taken() -> int:
        return next(ports, None) or real_free_port()

    monkeypatch.setattr("reconciler.envtest._controlplane.free_port", first_taken)
    try:
        with ControlPlane() as plane:
            assert plane.etcd_port != taken
            assert plane.version() == envtest.KUBERNETES_VERSION
            pids = [p.pid for p in (plane.etcd, plane.apiserver) if p is not None]
            workdir = plane.workdir
    finally:
        blocker.close()
    assert not workdir.exists()
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_not_ready_in_time_fails_with_the_log_tail(tmp_path: Path) -> None:
    plane = ControlPlane(startup_timeout=0.01)
    with pytest.raises(ControlPlaneError) as caught:
        plane.start()
    message = str(caught.value)
    assert "was not ready within" in message or "exited" in message
    assert "etcd.log" in message
    assert not plane.workdir.exists()
