"""`gpu-operator run`: the operator process.

One Manager with every controller (`components.controllers.build_operator`), the
reference's flags and defaults (metrics on :8080, HTTPS for scrapers the API server
allows unless `--metrics-secure=false`, probes on :8081, leader election on the
reference's Lease when `--leader-elect`), and a clean exit on SIGTERM: in-flight
reconciles finish, the lease is released, the process exits 0. Losing the lease exits 1,
so the pod restarts as a standby.

The flags and their help are in `components.commands.run`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
from typing import Any

import uvloop
from prometheus_client import CollectorRegistry, ProcessCollector, disable_created_metrics

from components import reachability
from components.commands.run import DISABLED
from components.controllers import LEASE_NAME, build_operator
from components.errors import CommandError
from components.kinds import GPU_CLUSTER, RESOURCE_CLAIM
from reconciler import (
    Cache,
    Client,
    KubeconfigError,
    LeaderElectionConfig,
    MetricsServing,
    configure_logging,
    connect,
    tune_collector,
)
from reconciler.errors import (
    ApiError,
    ApiUnreachable,
    CacheSyncTimeout,
    LeaderElectionLost,
    UnknownKind,
)
from reconciler.lowlevel import RequestObserver, RESTMapper, Transport

log = logging.getLogger("components.run")

UNREADY_AFTER_OUTAGE_ENV = "GPU_OPERATOR_UNREADY_AFTER_OUTAGE"
"""Seconds without the API server before /readyz says not ready (default 10): a test knob,
so outage tests need not keep the API server away for ten seconds each time."""
VALIDATION_TIMEOUT_ENV = "GPU_OPERATOR_UPGRADE_VALIDATION_TIMEOUT"
"""Seconds a node may spend in `validation-required` before it is `upgrade-failed` (default
600, the reference's constant): a test knob, so a driver that fails validation fails its
node in seconds on a simulated cluster."""


def operator_registry() -> CollectorRegistry:
    """The registry /metrics serves, shaped as the reference's: the process's own
    `process_*` series beside the controllers', and no `*_created` series (Go's client has
    none, so dashboards written for the reference never see them)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


async def api_client(kubeconfig: str | None) -> Any:
    """How to reach the API server: `kubeconfig`, else in-cluster, else the default
    kubeconfig ($KUBECONFIG or ~/.kube/config). A bad kubeconfig is a `CommandError`
    naming the file and the field."""
    try:
        return await connect(kubeconfig)
    except KubeconfigError as exc:
        raise CommandError(str(exc)) from None


def plain_client(api: Any, field_manager: str, observe: RequestObserver | None = None) -> Client:
    """A client with an empty cache, for a process that reads the few objects it needs
    from the server (the Helm hooks, the node agent) rather than watching kinds.
    `observe` counts its requests (`reconciler.lowlevel.request_observer`)."""
    transport = Transport(api, observe=observe)
    mapper = RESTMapper(transport)
    return Client(transport, mapper, Cache(transport, mapper), field_manager=field_manager)


async def gpu_cluster_served(api: Any, *, retry_seconds: float = 2.0) -> bool:
    """Whether the operator can serve GPUClusters: their CRD is installed and the API
    server serves ResourceClaims (`resource.k8s.io/v1`, Kubernetes 1.34 and later).
    Asked once at start (discovery, which needs no RBAC), until the API server answers
    (`reachability` says meanwhile why it does not); without either kind the operator runs
    the ClusterPolicy and NVIDIADriver controllers alone."""
    mapper = RESTMapper(Transport(api))
    for gvk in (GPU_CLUSTER, RESOURCE_CLAIM):
        while True:
            try:
                await mapper.resource_for(gvk)
                break
            except UnknownKind:
                log.info("not serving GPUCluster: the API server does not serve %s", gvk)
                return False
            except (ApiUnreachable, ApiError):
                await asyncio.sleep(retry_seconds)
    return True


def metrics_serving(args: argparse.Namespace) -> MetricsServing | None:
    """How /metrics is served: on its own address, HTTPS for scrapers the API server
    allows (`--metrics-secure`, the default), else plain HTTP; None: beside the probes, in
    plain HTTP, which only an insecure setup may share."""
    address = args.metrics_bind_address
    if address == DISABLED:
        return MetricsServing(bind_address=None)
    if address == args.health_probe_bind_address:
        if args.metrics_secure:
            raise CommandError(
                "secure metrics need an address of their own: give --metrics-bind-address "
                "and --health-probe-bind-address different ports (or --metrics-secure=false)"
            )
        return None
    return MetricsServing(
        bind_address=address, secure=args.metrics_secure, cert_dir=args.metrics_cert_dir
    )


def leader_election(args: argparse.Namespace) -> LeaderElectionConfig | None:
    """The lease settings from `--leader-elect*`, or None without `--leader-elect`."""
    if not args.leader_elect:
        return None
    lease = args.leader_elect_lease_duration
    renew = args.leader_elect_renew_deadline
    retry = args.leader_elect_retry_period
    if not lease > renew > retry:
        raise CommandError(
            f"--leader-elect-lease-duration ({lease:g}s) must be longer than "
            f"--leader-elect-renew-deadline ({renew:g}s), and that longer than "
            f"--leader-elect-retry-period ({retry:g}s)"
        )
    return LeaderElectionConfig(
        name=LEASE_NAME,
        namespace=args.namespace,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
    )


async def run(args: argparse.Namespace) -> None:
    serving = metrics_serving(args)
    api = await api_client(args.kubeconfig)
    async with api:
        election = leader_election(args)
        probes = args.health_probe_bind_address
        probe = asyncio.create_task(reachability.watch(api), name="api-reachability")
        try:
            operator = build_operator(
                api,
                namespace=args.namespace,
                bind_address=None if probes == DISABLED else probes,
                leader_election=election,
                registry=operator_registry(),
                handle_signals=True,
                metrics_serving=serving,
                freeze_heap_after_sync=True,
                gpu_cluster=await gpu_cluster_served(api),
            )
            if unready_after := os.environ.get(UNREADY_AFTER_OUTAGE_ENV):
                operator.manager.unready_after_outage = float(unready_after)
            timeout = os.environ.get(VALIDATION_TIMEOUT_ENV)
            if timeout and operator.upgrade is not None:
                operator.upgrade.nodes.validation_timeout = float(timeout)
            log.info(
                "gpu-operator starting in namespace %s (leader election %s)",
                args.namespace,
                "on" if election else "off",
            )
            await operator.manager.run()
        finally:
            probe.cancel()
    log.info("gpu-operator stopped")


def run_operator(args: argparse.Namespace) -> int:
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise CommandError(f"cannot read the kubeconfig {args.kubeconfig}: no such file")
    leader_election(args)  # a bad combination fails here, before anything starts
    configure_logging(args.log_level, args.log_format)
    tune_collector()
    try:
        # uvloop: the watch stream's TLS reads and dispatch cost less CPU on it (see
        # pyproject.toml); the operator's code is the same on either loop.
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args))
    except LeaderElectionLost as exc:
        raise CommandError(f"stopped leading ({exc}); a standby takes over") from exc
    except FileNotFoundError as exc:
        raise CommandError(f"cannot read {exc.filename}: no such file") from exc
    except CacheSyncTimeout as exc:
        raise CommandError(f"could not read the cluster's state in time: {exc}") from exc
    except (ApiUnreachable, ApiError) as exc:
        raise CommandError(f"the API server refused or could not be reached: {exc}") from exc
    except ssl.SSLError as exc:
        raise CommandError(f"cannot load the metrics certificate: {exc}") from exc
    except OSError as exc:
        raise CommandError(f"cannot serve metrics or probes: {exc.strerror or exc}") from exc
    return 0
