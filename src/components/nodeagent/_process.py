"""`gpu-operator node-agent` as a process: the agent's loop on real NVML.

Each turn takes one step, then waits for XID events up to the interval, so an XID shows
on the node within a step's time. The node is read from a watch of that one node, so a
quiet node costs the API server nothing between changes. The API server unreachable is a
WARNING and the next turn tries again; the GPU without a driver is a condition, not an
error: the agent keeps looking until one loads.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from prometheus_client import start_http_server

from components.errors import CommandError
from components.nodeagent._agent import NodeAgent, WatchedNodeApi
from components.nodeagent._host import HostRoot
from components.nodeagent._metrics import AgentMetrics
from components.nodeagent._nvml import open_nvml
from components.nodeagent._remediation import NvidiaSmiReset
from components.run import api_client, plain_client
from reconciler import configure_logging
from reconciler.errors import ApiError, ApiUnreachable
from reconciler.lowlevel import as_connection, request_observer

log = logging.getLogger("components.nodeagent")
FIELD_MANAGER = "gpu-operator-node-agent"


def driver_roots(host: HostRoot) -> list[str]:
    """Where the driver's libraries are: the driver container's root on the host, then the
    host's own (a host-installed driver)."""
    return [str(host.driver_root), str(host.root)]


async def serve(args: argparse.Namespace) -> None:
    node = args.node_name or os.environ.get("NODE_NAME", "")
    if not node:
        raise CommandError("the node's name is unknown: pass --node-name or set NODE_NAME")
    metrics = AgentMetrics()
    if args.metrics_port:
        start_http_server(args.metrics_port, registry=metrics.registry)
    host = HostRoot(args.host_root, args.driver_root)
    async with await api_client(args.kubeconfig) as api:
        observe = request_observer(metrics.registry, as_connection(api).host)
        node_api = WatchedNodeApi(plain_client(api, FIELD_MANAGER, observe), node)
        await node_api.start()
        agent = NodeAgent(
            node,
            nvml_opener=lambda: open_nvml(driver_roots(host)),
            host=host,
            api=node_api,
            metrics=metrics,
            resetter=NvidiaSmiReset(host.root, host.driver_root),
        )
        log.info(
            "node agent for %s: host root %s, every %.0fs", node, args.host_root, args.interval
        )
        try:
            while True:
                try:
                    await agent.step()
                except (ApiError, ApiUnreachable) as exc:
                    log.warning("%s: could not publish: %s", node, exc)
                nvml = agent.nvml
                if nvml is None:
                    await asyncio.sleep(args.interval)
                    continue
                try:
                    agent.record_xids(await asyncio.to_thread(nvml.wait_xids, args.interval))
                except Exception as exc:  # the driver went away while waiting
                    log.debug("%s: waiting for XIDs failed: %s", node, exc)
                    agent.release()
        finally:
            agent.release()
            await node_api.stop()


def run_node_agent(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 130
    return 0
