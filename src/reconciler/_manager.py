"""The manager: one process's informers, controllers, leader election and HTTP server.

Start order matters. Informers start at once on every replica, so a standby's cache is warm
when it takes over; `/readyz` turns ready when they have synced. Controllers start only on
the leader and only after the caches synced, so no reconcile ever reads an empty cache and
concludes that everything must be created.

Stopping comes in two kinds. `stop()` (SIGTERM) is graceful: in-flight reconciles get up to
`shutdown_timeout` to finish, then the lease is released so a standby takes over at once.
Losing the lease is not graceful: controllers are cancelled immediately, because another
replica may already be leading, and `run()` raises `LeaderElectionLost` so the process
exits. Cancelling `run()` is the same as the process dying: nothing is drained or released.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from typing import Any, Unpack

import anyio
from prometheus_client import CollectorRegistry

from reconciler._address import split_address
from reconciler._cache import Cache
from reconciler._client import Client
from reconciler._connection import as_connection
from reconciler._controller import Controller, ControllerOptions, ReconcileFunc, Reconciler
from reconciler._events import EventRecorder
from reconciler._exceptions import LeaderElectionLost
from reconciler._heap import freeze_long_lived
from reconciler._http_server import MetricsServer, MetricsServing, ProbeServer
from reconciler._informer import Informer
from reconciler._leader_election import LeaderElectionConfig, LeaderElector
from reconciler._metrics import metrics_for, request_observer
from reconciler._metrics_auth import MetricsAuthorizer
from reconciler._objects import GVK
from reconciler._restmapper import RESTMapper
from reconciler._transport import Transport

log = logging.getLogger("reconciler.manager")


class Manager:
    def __init__(
        self,
        api_client: Any,
        *,
        field_manager: str,
        leader_election: LeaderElectionConfig | None = None,
        bind_address: str | None = "0.0.0.0:8081",
        registry: CollectorRegistry | None = None,
        shutdown_timeout: float = 30.0,
        cache_sync_timeout: float = 120.0,
        hash_annotation: str | None = None,
        handle_signals: bool = False,
        unready_after_outage: float = 10.0,
        metrics: MetricsServing | None = None,
        freeze_heap_after_sync: bool = False,
    ) -> None:
        """`api_client` is an `ApiConnection` (`reconciler.connect`) or a kubernetes_asyncio
        ApiClient.

        `bind_address` ("host:port", port 0 for any) serves /healthz, /readyz and /metrics;
        None serves nothing. `registry` receives the metrics; a private one by default.
        `/readyz` says not ready while the informers have lost the API server for longer
        than `unready_after_outage` seconds (a stale cache is not serving), and ready again
        when they are back; `/healthz` stays ok: restarting the pod would not bring the
        API server back. `metrics` gives /metrics an address of its own (see
        `MetricsServing`: HTTPS for scrapers the API server allows, by default); the probes
        then serve no /metrics. `freeze_heap_after_sync` hides what is alive once the
        caches have synced from the garbage collector (`reconciler._heap`); it is
        process-wide, for an operator's own process and not for a test's.
        """
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = metrics_for(self.registry)
        observe = request_observer(self.registry, as_connection(api_client).host)
        # Replicas share the field manager (their writes must merge as one owner's); the
        # user agent names the replica, so the API server's audit log tells them apart.
        self.transport = Transport(
            api_client,
            user_agent=(
                f"{field_manager} ({leader_election.identity})"
                if leader_election
                else field_manager
            ),
            observe=observe,
        )
        self.mapper = RESTMapper(self.transport)
        self.cache = Cache(self.transport, self.mapper)
        self.client = Client(
            self.transport,
            self.mapper,
            self.cache,
            field_manager=field_manager,
            hash_annotation=hash_annotation,
        )
        self.leader_election = leader_election
        self.elector = (
            LeaderElector(self.transport, leader_election, self.metrics)
            if leader_election
            else None
        )
        if self.elector is not None:
            # A paused leader's workers may wake before its renew loop: every write asks.
            self.client.may_write = self.elector.may_write
        self.shutdown_timeout = shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.handle_signals = handle_signals
        self.unready_after_outage = unready_after_outage
        self.freeze_heap_after_sync = freeze_heap_after_sync
        self.controllers: list[Controller] = []
        self._server = (
            ProbeServer(
                *split_address(bind_address),
                self.registry,
                ready=self._is_ready,
                serve_metrics=metrics is None,
            )
            if bind_address is not None
            else None
        )
        self._metrics_serving = metrics
        self._metrics_server: MetricsServer | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = False
        self._synced = False
        self._leading = asyncio.Event()

    # -- wiring --------------------------------------------------------------------------

    def informer(self, gvk: GVK, **kwargs: Any) -> Informer:
        """The cache's informer for `gvk` (see `Cache.informer` for the options)."""
        return self.cache.informer(gvk, **kwargs)

    def controller(
        self, name: str, reconcile: ReconcileFunc | Reconciler, **options: Unpack[ControllerOptions]
    ) -> Controller:
        """A controller on this manager's cache and metrics (`Controller` says what the
        pacing options do)."""
        if any(c.name == name for c in self.controllers):
            raise ValueError(f"a controller named {name!r} already exists")
        controller = Controller(
            name,
            reconcile,
            metrics=self.metrics,
            connectivity=self.cache.connectivity,
            **options,
        )
        self.controllers.append(controller)
        return controller

    def event_recorder(self, component: str) -> EventRecorder:
        return EventRecorder(self.client, component)

    # -- state ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._is_ready()

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def stopping(self) -> bool:
        """`stop()` was called (or a signal received); reconciles in flight are finishing."""
        return self._stop_requested

    @property
    def http_port(self) -> int | None:
        return self._server.port if self._server is not None else None

    @property
    def metrics_port(self) -> int | None:
        """The port of /metrics's own server, once `run()` started it."""
        return self._metrics_server.port if self._metrics_server is not None else None

    def _metrics_server_for(self, serving: MetricsServing) -> MetricsServer | None:
        if serving.bind_address is None:
            return None
        host, port = split_address(serving.bind_address)
        if not serving.secure:
            return MetricsServer(host, port, self.registry)
        # Imported here: only secure serving needs cryptography.
        from reconciler._tls import serving_context

        return MetricsServer(
            host,
            port,
            self.registry,
            tls=serving_context(serving.cert_dir),
            authorizer=MetricsAuthorizer(self.transport, ttl=serving.auth_cache_ttl),
        )

    def _is_ready(self) -> bool:
        return (
            self._synced
            and self.cache.synced
            and self.cache.connectivity.down_for <= self.unready_after_outage
        )

    async def wait_leading(self) -> None:
        await self._leading.wait()

    # -- running -------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run()` to finish gracefully. Safe to call from a signal handler, or twice."""
        self._stop_requested = True
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> None:
        """Run until `stop()` (returns) or until leadership is lost (raises)."""
        self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        loop = asyncio.get_running_loop()
        previous: dict[signal.Signals, Any] = {}
        if self.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.getsignal(sig)
                loop.add_signal_handler(sig, self.stop)
        hold: asyncio.Task[None] | None = None
        lost = False
        graceful = False
        try:
            if self._server is not None:
                await self._server.start()
            if self._metrics_serving is not None:
                self._metrics_server = self._metrics_server_for(self._metrics_serving)
                if self._metrics_server is not None:
                    await self._metrics_server.start()
            await self.cache.start()
            if not await self._until_stopped(self._sync()):
                graceful = True
                return
            if self.elector is not None:
                if not await self._until_stopped(self.elector.acquire()):
                    graceful = True
                    return
                hold = asyncio.create_task(self.elector.hold(), name="lease renewal")
            self._leading.set()
            for controller in self.controllers:
                controller.start()
            log.info(
                "manager started %d controllers%s",
                len(self.controllers),
                f" as leader {self.elector.config.identity}" if self.elector else "",
            )
            stop_wait = asyncio.create_task(self._stop.wait())
            waits: set[asyncio.Task[Any]] = {stop_wait} | ({hold} if hold else set())
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            if hold is not None and hold.done():
                lost = True
                await self._stop_controllers(grace=0)
            else:
                graceful = True
                await self._stop_controllers(grace=self.shutdown_timeout)
        finally:
            self._leading.clear()
            if hold is not None:
                hold.cancel()
            await asyncio.gather(*([hold] if hold else []), return_exceptions=True)
            if not graceful:
                # Cancelled or lost: nothing may keep running, but drain nothing either.
                await self._stop_controllers(grace=0)
            elif self.elector is not None:
                await self.elector.release()
            await self.cache.stop()
            await self.transport.close()
            if self._server is not None:
                await self._server.stop()
            if self._metrics_server is not None:
                await self._metrics_server.stop()
            for sig, handler in previous.items():
                # remove_signal_handler resets to the default; put back what was there.
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)
            log.debug("manager stopped")
        if lost:
            raise LeaderElectionLost(
                f"lost lease {self.leader_election.namespace}/{self.leader_election.name}"
                if self.leader_election
                else "lost leadership"
            )

    async def _sync(self) -> None:
        await self.cache.wait_for_sync(self.cache_sync_timeout)
        self._synced = True
        log.debug("caches synced: %d informers", len(self.cache.informers))
        if self.freeze_heap_after_sync:
            freeze_long_lived()

    async def _until_stopped(self, work: Awaitable[None]) -> bool:
        """Run `work` unless `stop()` comes first; True if it finished.

        A task group scopes the two: whichever ends first cancels the other, and an error
        from `work` (e.g. CacheSyncTimeout) is raised as itself."""
        assert self._stop is not None
        stop = self._stop
        finished = False
        error: Exception | None = None
        async with anyio.create_task_group() as race:

            async def cancel_on_stop() -> None:
                await stop.wait()
                race.cancel_scope.cancel()

            race.start_soon(cancel_on_stop)
            try:
                await work
                finished = True
            except Exception as exc:
                error = exc
            finally:
                race.cancel_scope.cancel()
        if error is not None:
            raise error
        return finished

    async def _stop_controllers(self, grace: float) -> None:
        async with anyio.create_task_group() as stopping:
            for controller in self.controllers:
                stopping.start_soon(controller.stop, grace)
