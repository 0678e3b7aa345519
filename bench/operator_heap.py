"""Where the operator's memory goes: the whole operator in this process, under tracemalloc,
on a simulated cluster, until every operand DaemonSet is rolled out; then the allocations
still alive, grouped by the line that made them (top 25), beside the process's RSS.

Slower than the operator alone (tracemalloc records every allocation) and meant for finding
what grows with nodes: run it at two sizes and compare the lines.

    .venv/bin/python bench/operator_heap.py [--nodes 1000] [--top 25] [--group lineno|filename]

The last line is one JSON object (also bench/results/operator_heap-<nodes>.json).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml

import scale
from _common import finish
from components.controllers import build_operator
from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from reconciler import connect

FRAMES = 1


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _run(sim: SimulatedCluster, top: int, group: str) -> dict[str, Any]:
    await scale.install(sim)
    connection = await connect(str(sim.kubeconfig))
    async with connection:
        operator = build_operator(connection, namespace=scale.NAMESPACE, bind_address=None)
        task = asyncio.create_task(operator.manager.run())
        async with sim.api_client() as api:
            c, cache = await scale._open(sim, api, policy=True)
            watch = scale.Watch(cache, None)
            began = time.monotonic()
            await c.create(scale.POLICY)
            reached = await watch.until(
                {"rolled_out": watch.all_rolled_out, "allocatable": watch.all_allocatable},
                began,
                7200,
            )
            await cache.stop()
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        operator.manager.stop()
        await asyncio.wait_for(task, 60)
    stats = snapshot.statistics(group)
    total = sum(s.size for s in stats)
    lines = [
        {
            "where": str(s.traceback[0]),
            "mib": round(s.size / 2**20, 2),
            "count": s.count,
        }
        for s in stats[:top]
    ]
    return {
        "seconds_to_rolled_out": max(reached.values()),
        "traced_mib": round(total / 2**20, 1),
        "top": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--group", choices=("lineno", "filename"), default="lineno")
    parser.add_argument("--policy", type=Path, default=scale.SAMPLE_POLICY)
    args = parser.parse_args()
    scale.POLICY.update(yaml.safe_load(args.policy.read_text()))
    config = ClusterConfig(gpu_nodes=args.nodes, cpu_nodes=2, os=parse_os_list("ubuntu22.04"))
    with SimulatedCluster(config, startup_timeout=1800) as sim:
        rss_before = _rss_mib()
        tracemalloc.start(FRAMES)
        figures = asyncio.run(_run(sim, args.top, args.group))
        tracemalloc.stop()
    figures = {"nodes": args.nodes, "rss_mib_before_operator": round(rss_before, 1), **figures}
    print(
        f"{args.nodes} nodes: rolled out in {figures['seconds_to_rolled_out']}s; "
        f"{figures['traced_mib']} MiB traced (the operator, this script's own cache and the "
        f"kubernetes_asyncio client it uses to create the policy)"
    )
    for line in figures["top"]:
        print(f"  {line['mib']:8.2f} MiB {line['count']:>9} blocks  {line['where']}")
    finish(f"operator_heap-{args.nodes}", figures)


if __name__ == "__main__":
    main()
