"""The manager's HTTP servers: probes for the kubelet, metrics for Prometheus.

`/readyz` turns ready only once every cache has synced, so a Service or a rollout never
counts a pod that would reconcile from an empty cache. `/healthz` stays cheap: it reports
that the event loop answers, which is what a liveness probe can usefully check. Probes are
plain HTTP (the kubelet sends no token).

`/metrics` may have an address of its own (`MetricsServing`); served securely it is HTTPS
and only for callers the API server authenticates and authorizes (`_metrics_auth.py`), as
controller-runtime's secure metrics serving does. Without an address of its own it is
served beside the probes, in plain HTTP.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from reconciler._metrics_auth import MetricsAuthorizer

log = logging.getLogger("reconciler.http")


@dataclass(frozen=True)
class MetricsServing:
    """How the manager serves `/metrics` on an address of its own.

    `bind_address` None: not served at all. `secure`: HTTPS with the API server's authn and
    authz; `cert_dir` holds `tls.crt` and `tls.key`, else a self-signed certificate is made
    at start. `auth_cache_ttl`: how long a scraper's verdict is reused."""

    bind_address: str | None
    secure: bool = True
    cert_dir: str | None = None
    auth_cache_ttl: float = 60.0


_Handler = Callable[[web.Request], Awaitable[web.Response]]


class _Server:
    """One aiohttp site serving `registry` among its routes, its port known once started
    (port 0 picks a free one)."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        self.host = host
        self.port = port
        self._registry = registry
        self._runner: web.AppRunner | None = None

    async def _serve(
        self, routes: Mapping[str, _Handler], tls: ssl.SSLContext | None = None
    ) -> None:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=tls)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _metrics_response(self) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


class ProbeServer(_Server):
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        ready: Callable[[], bool],
        healthy: Callable[[], bool] = lambda: True,
        serve_metrics: bool = True,
    ) -> None:
        super().__init__(host, port, registry)
        self._ready = ready
        self._healthy = healthy
        self._serve_metrics = serve_metrics

    async def start(self) -> None:
        routes = {"/healthz": self._healthz, "/readyz": self._readyz}
        if self._serve_metrics:
            routes["/metrics"] = self._metrics
        await self._serve(routes)
        log.debug("serving probes on %s:%d", self.host, self.port)

    async def _healthz(self, _: web.Request) -> web.Response:
        if self._healthy():
            return web.Response(text="ok")
        return web.Response(status=500, text="unhealthy")

    async def _readyz(self, _: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    async def _metrics(self, _: web.Request) -> web.Response:
        return self._metrics_response()


class MetricsServer(_Server):
    """`/metrics` alone; with `tls` and `authorizer`, HTTPS for allowed scrapers only."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        tls: ssl.SSLContext | None = None,
        authorizer: MetricsAuthorizer | None = None,
    ) -> None:
        super().__init__(host, port, registry)
        self._tls = tls
        self._authorizer = authorizer

    async def start(self) -> None:
        await self._serve({"/metrics": self._metrics}, self._tls)
        log.debug(
            "serving /metrics on %s:%d (%s)",
            self.host,
            self.port,
            "https, authenticated" if self._authorizer else "http",
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._authorizer is not None:
            status = await self._authorizer.verdict(
                request.headers.get("Authorization"), request.method, request.path
            )
            if status >= 300:
                return web.Response(status=status, text=status.phrase)
        return self._metrics_response()
