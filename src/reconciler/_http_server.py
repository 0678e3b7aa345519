"""The manager's one HTTP server: probes for the kubelet, metrics for Prometheus.

`/readyz` turns ready only once every cache has synced, so a Service or a rollout never
counts a pod that would reconcile from an empty cache. `/healthz` stays cheap: it reports
that the event loop answers, which is what a liveness probe can usefully check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("reconciler.http")


class ProbeServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        ready: Callable[[], bool],
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        self.host = host
        self.port = port
        self._registry = registry
        self._ready = ready
        self._healthy = healthy
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])
        log.debug("serving /healthz /readyz /metrics on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, _: web.Request) -> web.Response:
        if self._healthy():
            return web.Response(text="ok")
        return web.Response(status=500, text="unhealthy")

    async def _readyz(self, _: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
