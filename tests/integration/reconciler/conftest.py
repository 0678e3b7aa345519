"""Helpers for the engine's tests against the real API server."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from reconciler import GVK, Cache, Client
from reconciler.errors import ReconcilerError
from reconciler.lowlevel import RESTMapper, Transport

NAMESPACE = GVK("", "v1", "Namespace")
CONFIGMAP = GVK("", "v1", "ConfigMap")


class Kit:
    """A transport, mapper, cache and client on the test's ApiClient."""

    def __init__(self, api_client: Any) -> None:
        self.transport = Transport(api_client)
        self.mapper = RESTMapper(self.transport)
        self.cache = Cache(self.transport, self.mapper)
        self.client = Client(self.transport, self.mapper, self.cache, field_manager="tests")


@pytest.fixture
async def kit(api_client: Any) -> AsyncIterator[Kit]:
    k = Kit(api_client)
    yield k
    await k.cache.stop()


@pytest.fixture
async def namespace(kit: Kit) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await kit.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    # No namespace controller runs here, so the namespace would stay Terminating; deleting
    # it is enough to keep names from colliding (each test uses a fresh one anyway).
    with contextlib.suppress(ReconcilerError):
        await kit.client.delete(NAMESPACE, name, missing_ok=True)


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


WIDGET = GVK("test.reconciler.dev", "v1", "Widget")


async def ensure_widget_crd(kit: Kit) -> dict[str, Any]:
    """A namespaced CRD with a status subresource, established and served."""
    crd = (await kit.client.apply(WIDGET_CRD)).object
    crd_gvk = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")

    async def established() -> bool:
        live = await kit.client.get_live(crd_gvk, "widgets.test.reconciler.dev")
        conditions = (live.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not await established():
        if loop.time() > deadline:
            raise AssertionError("the Widget CRD never became established")
        await asyncio.sleep(0.1)
    return crd


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.reconciler.dev"},
    "spec": {
        "group": "test.reconciler.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"value": {"type": "integer", "minimum": 0}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {"observed": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}
