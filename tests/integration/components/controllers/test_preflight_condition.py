"""Pre-flight's `PreflightFailed` in the running operator: said with autoUpgrade off too
(nothing is walked, but an admin who deletes a driver pod by hand should know first), and
written through the policy's own status writer, so the policy's later status writes keep
it, with its time, and pre-flight never says it again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from components.upgrade import template_digest
from tests.integration.components.controllers.conftest import Cluster
from tests.integration.components.controllers.test_plan import driver_pod
from tests.polling import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def empty_registry() -> AsyncIterator[str]:
    """An OCI registry on loopback that has no image at all."""

    async def manifest(request: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("*", "/v2/{name:.+}/manifests/{ref}", manifest)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_missing_image_is_said_with_auto_upgrade_off_and_kept_by_the_policy_writes(
    cluster: Cluster, empty_registry: str
) -> None:
    await cluster.add_node("gpu-1")
    name = cluster.name("cp")
    await cluster.create_policy("cp", {"driver": {"repository": f"{empty_registry}/nvidia"}})

    async def driver_daemonset() -> Any:
        found = [d for n, d in (await cluster.daemonsets()).items() if "driver" in n]
        return found[0] if found else None

    # No kubelet here: the driver pod the DaemonSet would run on the node, made by hand.
    ds = await eventually(driver_daemonset, "the driver DaemonSet")
    await cluster.client.create(driver_pod(ds, cluster.nodes[0], template_digest(ds)))

    async def failed() -> Any:
        cond = await cluster.condition(name, "PreflightFailed")
        return cond if cond is not None and cond["status"] == "True" else None

    first = await eventually(failed, "PreflightFailed=True with autoUpgrade off")
    assert (
        first["reason"] == "ImageMissing" and f"{empty_registry}/nvidia/driver" in first["message"]
    )
    await cluster.settle(delayed_counts=False)

    # An edit of the policy: its own status (observedGeneration, an operand disabled) is
    # written again, from the policy writer's copy.
    await cluster.patch_policy(name, {"dcgmExporter": {"enabled": False}})

    async def rewritten() -> bool:
        return (await cluster.status(name)).get("observedGeneration") == 2

    await eventually(rewritten, "the policy's status written for generation 2")
    await cluster.settle(delayed_counts=False)
    cond = await cluster.condition(name, "PreflightFailed")
    assert cond is not None and cond["status"] == "True"
    assert cond["lastTransitionTime"] == first["lastTransitionTime"]
    said = [e for e in await cluster.events(name) if e["reason"] == "PreflightFailed"]
    assert len(said) == 1 and int(said[0].get("count") or 1) <= 2
