"""`gpu-operator run`: the operator process.

One Manager with every controller (`components.controllers.build_operator`), the
reference's flags and defaults (metrics on :8080, probes on :8081, leader election on the
reference's Lease when `--leader-elect`), and a clean exit on SIGTERM: in-flight
reconciles finish, the lease is released, the process exits 0. Losing the lease exits 1,
so the pod restarts as a standby.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client, config
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from components.controllers import DEFAULT_NAMESPACE, LEASE_NAME, build_operator
from reconciler import (
    ApiError,
    ApiUnreachable,
    CacheSyncTimeout,
    LeaderElectionConfig,
    LeaderElectionLost,
)

log = logging.getLogger("components.run")

DISABLED = "0"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "0.0.0.0", int(port)


def check_address(address: str) -> str:
    """argparse type: `host:port`, `:port`, or `0` (off)."""
    if address == DISABLED:
        return address
    try:
        _, port = _split(address)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{address!r} is not an address; write host:port or :port (0 turns it off)"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range")
    return address


class MetricsServer:
    """`/metrics` on its own address (the manager also serves it beside the probes)."""

    def __init__(self, address: str, registry: CollectorRegistry) -> None:
        self.host, self.port = _split(address)
        self._registry = registry
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )


async def api_client(kubeconfig: str | None) -> Any:
    """A kubernetes_asyncio ApiClient: `kubeconfig`, else in-cluster, else the default
    kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    configuration = client.Configuration()
    if kubeconfig:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await config.load_kube_config(client_configuration=configuration)
    return client.ApiClient(configuration)


async def run(args: argparse.Namespace) -> None:
    api = await api_client(args.kubeconfig)
    async with api:
        election = (
            LeaderElectionConfig(name=LEASE_NAME, namespace=args.namespace)
            if args.leader_elect
            else None
        )
        probes = args.health_probe_bind_address
        operator = build_operator(
            api,
            namespace=args.namespace,
            bind_address=None if probes == DISABLED else probes,
            leader_election=election,
            handle_signals=True,
        )
        metrics = (
            MetricsServer(args.metrics_bind_address, operator.manager.registry)
            if args.metrics_bind_address not in (DISABLED, probes)
            else None
        )
        if metrics is not None:
            await metrics.start()
        log.info(
            "gpu-operator starting in namespace %s (leader election %s)",
            args.namespace,
            "on" if election else "off",
        )
        try:
            await operator.manager.run()
        finally:
            if metrics is not None:
                await metrics.stop()
    log.info("gpu-operator stopped")


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run_operator(args: argparse.Namespace) -> int:
    from components.cli import CommandError  # the CLI imports this module

    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise CommandError(f"cannot read the kubeconfig {args.kubeconfig}: no such file")
    _configure_logging(args.log_level)
    try:
        asyncio.run(run(args))
    except LeaderElectionLost as exc:
        raise CommandError(f"stopped leading ({exc}); a standby takes over") from exc
    except config.ConfigException as exc:
        raise CommandError(f"cannot load the cluster configuration: {exc}") from exc
    except FileNotFoundError as exc:
        raise CommandError(f"cannot read {exc.filename}: no such file") from exc
    except CacheSyncTimeout as exc:
        raise CommandError(f"could not read the cluster's state in time: {exc}") from exc
    except (ApiUnreachable, ApiError) as exc:
        raise CommandError(f"the API server refused or could not be reached: {exc}") from exc
    except OSError as exc:
        raise CommandError(f"cannot serve metrics or probes: {exc.strerror or exc}") from exc
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `run` to the `gpu-operator` command line."""
    parser = sub.add_parser(
        "run",
        help="run the operator (the controllers, probes and metrics)",
        description=(
            "Run the operator: label GPU nodes, deploy the GPU stack from the oldest "
            "ClusterPolicy (and NVIDIADrivers), keep it and report its status."
        ),
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster, else $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("OPERATOR_NAMESPACE") or DEFAULT_NAMESPACE,
        help="namespace the operands run in (default: $OPERATOR_NAMESPACE or gpu-operator)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        default=":8080",
        type=check_address,
        metavar="ADDR",
        help="where /metrics is served (default :8080; 0 turns it off)",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=":8081",
        type=check_address,
        metavar="ADDR",
        help="where /healthz and /readyz are served (default :8081; 0 turns it off)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="run as one of several replicas: only the holder of the lease acts",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="log level (default info: one line per change made)",
    )
    parser.set_defaults(handler=run_operator)
