"""What a new GPUCluster needs before its stack is written (its finalizer, the namespace's
admin-access label) is written at once, not one round trip after another: every GPU node's
kubelet plugin waits for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.api import GPU_CLUSTER_FINALIZER
from components.controllers.gpucluster._controller import ADMIN_ACCESS_LABEL, GPUClusterController
from reconciler import GVK

pytestmark = pytest.mark.unit

NAMESPACE = "gpu-operator"


class Client:
    """Answers the finalizer's write only once the namespace was read: a controller that
    reads the namespace after the finalizer's answer waits forever."""

    def __init__(self) -> None:
        self.namespace_read = asyncio.Event()
        self.writes: list[tuple[str, str, dict[str, Any]]] = []

    async def get_live(self, gvk: GVK, name: str) -> dict[str, Any]:
        assert (gvk.kind, name) == ("Namespace", NAMESPACE)
        self.namespace_read.set()
        return {"metadata": {"name": name, "labels": {}}}

    async def patch(self, gvk: GVK, name: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if gvk.kind == "GPUCluster":
            await self.namespace_read.wait()
        self.writes.append((gvk.kind, name, body))
        return {}


def controller(client: Client) -> GPUClusterController:
    c = GPUClusterController.__new__(GPUClusterController)
    c.client = client  # type: ignore[assignment]
    c.namespace = NAMESPACE
    c._admin_access_seen = False
    return c


async def test_the_finalizer_and_the_namespace_label_are_written_at_once() -> None:
    client = Client()
    cluster = {"metadata": {"name": "gpu-cluster", "resourceVersion": "7"}}
    await asyncio.wait_for(controller(client)._prepare(cluster), 10)
    written = {(kind, name): body["metadata"] for kind, name, body in client.writes}
    assert written[("GPUCluster", "gpu-cluster")]["finalizers"] == [GPU_CLUSTER_FINALIZER]
    assert written[("Namespace", NAMESPACE)]["labels"] == {ADMIN_ACCESS_LABEL: "true"}
