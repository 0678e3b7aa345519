"""`gpu-operator run`: its command line. The operator process is `components.run`,
imported when it runs."""

from __future__ import annotations

import argparse
import os
import re

from components.commands import DEFAULT_NAMESPACE, add_cluster_flags, deferred

__all__ = [
    "DEFAULT_NAMESPACE",
    "DISABLED",
    "check_address",
    "check_boolean",
    "check_duration",
    "register",
    "run_operator",
]

DISABLED = "0"


def check_address(address: str) -> str:
    """argparse type: `host:port`, `:port`, or `0` (off)."""
    if address == DISABLED:
        return address
    # Imported here: building the parser must stay light, and only `run` parses addresses.
    from reconciler import split_address

    try:
        _, port = split_address(address)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{address!r} is not an address; write host:port or :port (0 turns it off)"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range")
    return address


def check_boolean(value: str) -> bool:
    """argparse type: `true`/`false` (also 1/0, yes/no), as Go's flags take them."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "t"):
        return True
    if lowered in ("false", "0", "no", "f"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not true or false")


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def check_duration(value: str) -> float:
    """argparse type: a Go duration (`15s`, `1m30s`, `500ms`) or plain seconds, in seconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not text or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a duration; write for example 15s, 500ms or 1m30s"
            ) from None
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be longer than zero")
    return seconds


run_operator = deferred("components.run", "run_operator")


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
    add_cluster_flags(parser)
    parser.add_argument(
        "--metrics-bind-address",
        default=":8080",
        type=check_address,
        metavar="ADDR",
        help="where /metrics is served (default :8080; 0 turns it off)",
    )
    parser.add_argument(
        "--metrics-secure",
        nargs="?",
        const=True,
        default=True,
        type=check_boolean,
        metavar="BOOL",
        help="serve /metrics over HTTPS, only to callers the API server authenticates and "
        "allows to get the non-resource URL /metrics (default true; =false: plain HTTP)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        metavar="DIR",
        help="folder with tls.crt and tls.key for secure metrics (e.g. a mounted "
        "kubernetes.io/tls Secret); default: a self-signed certificate made at start",
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
        "--leader-elect-lease-duration",
        default=15.0,
        type=check_duration,
        metavar="DURATION",
        help="how long standbys wait after the leader's last renewal before taking over "
        "(default 15s)",
    )
    parser.add_argument(
        "--leader-elect-renew-deadline",
        default=10.0,
        type=check_duration,
        metavar="DURATION",
        help="how long the leader keeps trying to renew before it stops acting; shorter "
        "than the lease duration (default 10s)",
    )
    parser.add_argument(
        "--leader-elect-retry-period",
        default=2.0,
        type=check_duration,
        metavar="DURATION",
        help="how often the leader renews and standbys try to acquire; shorter than the "
        "renew deadline (default 2s)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="log level (default info: one line per change made)",
    )
    parser.add_argument(
        "--log-format",
        default=os.environ.get("LOG_FORMAT", "text"),
        choices=["json", "text"],
        help="json: one object a line (UTC time, level, logger, message, the object being "
        "reconciled), for log pipelines; text (default, or $LOG_FORMAT): for people",
    )
    parser.set_defaults(handler=run_operator)
