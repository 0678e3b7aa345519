"""A manager across an API server outage: it says so, turns not-ready, and acts on return.

Tried as a user would: a controller's write fails because the API server is gone, the
server stays away long enough for a per-key backoff to grow (seconds), and comes back. The
operator must act on that work promptly after the return, not after its grown backoff,
say at WARNING (once, not per retry) why it is idle, and report not-ready meanwhile while
staying live.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from reconciler import Manager, Request, enqueue_object
from reconciler.envtest import ControlPlane
from reconciler.errors import NotFound
from tests.polling import eventually

from .conftest import CONFIGMAP, Kit, configmap

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 15.0
"""Long enough for every backoff in play to have grown to several seconds."""


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class Mirror:
    """Keeps `<name>-mirror` beside each source ConfigMap; deletes it when the source goes.

    `hold` lets the test start the delete's write exactly when the server is gone."""

    def __init__(self, mgr: Manager, namespace: str) -> None:
        self.mgr = mgr
        self.namespace = namespace
        self.hold = asyncio.Event()
        self.hold.set()
        self.waiting = asyncio.Event()
        self.mirror_deleted_at = 0.0
        self.mirrored_at: dict[str, float] = {}

    async def reconcile(self, request: Request) -> None:
        if request.name.endswith("-mirror"):
            return
        mirror = f"{request.name}-mirror"
        if self.mgr.cache.get(CONFIGMAP, request.name, request.namespace) is not None:
            await self.mgr.client.apply(configmap(mirror, request.namespace, of=request.name))
            self.mirrored_at.setdefault(request.name, time.monotonic())
            return
        self.waiting.set()
        await self.hold.wait()
        await self.mgr.client.delete(
            CONFIGMAP, mirror, namespace=request.namespace, missing_ok=True
        )
        self.mirror_deleted_at = time.monotonic()


async def test_work_that_failed_during_an_outage_runs_promptly_after_it(
    api_client: Any,
    kit: Kit,
    namespace: str,
    control_plane: ControlPlane,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mgr = Manager(
        api_client,
        field_manager="tests",
        bind_address="127.0.0.1:0",
        unready_after_outage=2.0,
    )
    mirror = Mirror(mgr, namespace)
    informer = mgr.informer(CONFIGMAP, namespace=namespace)
    mgr.controller("mirror", mirror).watch(informer, enqueue_object)
    run = asyncio.create_task(mgr.run())
    try:
        await kit.client.apply(configmap("source", namespace))
        await eventually(
            lambda: mgr.cache.get(CONFIGMAP, "source-mirror", namespace) is not None,
            "the mirror is written",
            30,
        )
        port = mgr.http_port
        assert port is not None
        assert await asyncio.to_thread(probe, port, "/readyz") == 200

        # The source goes just before the outage; the mirror's delete meets the outage.
        mirror.hold.clear()
        await kit.client.delete(CONFIGMAP, "source", namespace=namespace)
        await asyncio.wait_for(mirror.waiting.wait(), 30)
        caplog.clear()
        caplog.set_level(logging.DEBUG, logger="reconciler")
        await asyncio.to_thread(control_plane.stop_apiserver)
        mirror.hold.set()

        went = time.monotonic()
        readyz_during: set[int] = set()
        healthz_during: set[int] = set()
        while time.monotonic() - went < OUTAGE_SECONDS:
            readyz_during.add(await asyncio.to_thread(probe, port, "/readyz"))
            healthz_during.add(await asyncio.to_thread(probe, port, "/healthz"))
            await asyncio.sleep(0.5)
        # Started on this thread (it dies with the thread that started it), waited for on
        # another, so the manager's loop keeps turning while the server comes up.
        control_plane.start_apiserver(wait=False)
        await asyncio.to_thread(control_plane.wait_apiserver_ready)
        back = time.monotonic()
        # Someone else's change right after the return: seen only through a new watch.
        await kit.client.apply(configmap("after", namespace))

        await eventually(lambda: mirror.mirror_deleted_at > 0, "the delete is handled", 60)
        await eventually(lambda: "after" in mirror.mirrored_at, "a new change is handled", 60)
        print(
            f"\nafter the API server was ready again: the failed delete ran after "
            f"{max(0.0, mirror.mirror_deleted_at - back):.2f}s, a new change was handled "
            f"after {mirror.mirrored_at['after'] - back:.2f}s"
        )

        async def ready_again() -> bool:
            return await asyncio.to_thread(probe, port, "/readyz") == 200

        await eventually(ready_again, "ready again after the outage", 30)
    finally:
        mgr.stop()
        await asyncio.wait_for(run, 30)

    assert 503 in readyz_during, "not ready while the API server was gone"
    assert healthz_during == {200}, "liveness must not restart a pod for an API outage"
    with pytest.raises(NotFound):
        await kit.client.get_live(CONFIGMAP, "source-mirror", namespace)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    said = [r.getMessage() for r in warnings if r.name == "reconciler.connectivity"]
    assert said and "unreachable" in said[0], [r.getMessage() for r in warnings]
    assert len(warnings) <= 5, [r.getMessage() for r in warnings]
    assert any(
        "reachable again" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records
    )
