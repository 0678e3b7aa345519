"""`gpu-operator node-agent`: its command line (the agent is `components.nodeagent`)."""

from __future__ import annotations

import argparse

from components.commands import deferred

run_node_agent = deferred("components.nodeagent._process", "run_node_agent")

DEFAULT_METRICS_PORT = 8010


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `node-agent` to the `gpu-operator` command line."""
    agent = sub.add_parser(
        "node-agent",
        help="read this node's GPUs through NVML and publish conditions and metrics",
        description=(
            "Run on a GPU node (the operator deploys it with nodeAgent.enabled): read the GPUs "
            "through NVML, write the node's GPUDriverReady, GPUHealthy and GPUValidated "
            "conditions and its GPU processes, and serve gpu_operator_node_* metrics."
        ),
    )
    agent.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster)")
    agent.add_argument("--node-name", metavar="NAME", help="this node (default: $NODE_NAME)")
    agent.add_argument(
        "--host-root",
        default="/host",
        metavar="DIR",
        help="where the host's root filesystem is mounted (default /host)",
    )
    agent.add_argument(
        "--driver-root",
        default="/run/nvidia/driver",
        metavar="DIR",
        help="where the driver container publishes its root on the host (default "
        "/run/nvidia/driver, the policy's hostPaths.driverInstallDir)",
    )
    agent.add_argument(
        "--interval",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="look at the GPUs at least this often (default 15; an XID is published at once)",
    )
    agent.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        metavar="PORT",
        help=f"serve /metrics on this port, 0 for none (default {DEFAULT_METRICS_PORT})",
    )
    agent.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    agent.add_argument("--log-format", default="json", choices=["json", "text"])
    agent.set_defaults(handler=run_node_agent)
