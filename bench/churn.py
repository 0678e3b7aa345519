"""Churn: the operator on a large simulated cluster whose nodes keep changing.

After the ClusterPolicy is ready on N GPU nodes (default 5,000), every minute for M minutes
(default 10) the benchmark changes a label on 10% of the GPU nodes (a different tenth each
minute, as an admin's or another controller's relabelling would), and samples the
operator every few seconds: the depth of each work queue, the seconds of work in flight,
its resident memory and CPU. An operator that keeps up shows a depth that returns to zero
after each batch, no growth from one minute to the next, and flat memory.

The label is one the operator does not act on (`churn.example.com/round`): what it costs is
the operator noticing that, for 10% of the fleet each minute. Every node update still reaches
the informers and the event filters; what each controller does with it is what is measured.

    .venv/bin/python bench/churn.py [--nodes 5000] [--minutes 10] [--fraction 0.1]
        [--sample-seconds 5] [--policy FILE]

Also prints the time to ready, CPU and peak RSS at that size (the operator part of
`bench/scale.py`, without the floor). The last line is one JSON object (also
bench/results/churn-<nodes>.json).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from prometheus_client.parser import text_string_to_metric_families

import scale
from _common import finish
from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from reconciler import labels_of, name_of
from reconciler.envtest import free_port

CHURN_LABEL = "churn.example.com/round"


def _rss_mib(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+)", text, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else float("nan")


def _queues(metrics_url: str) -> dict[str, dict[str, float]]:
    """Per work queue: depth and the seconds of work started but not done."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in ("workqueue_depth", "workqueue_unfinished_work_seconds"):
            continue
        for sample in family.samples:
            queue = out.setdefault(sample.labels.get("name", "?"), {})
            queue[family.name.removeprefix("workqueue_")] = sample.value
    return out


class Sampler:
    """Samples the operator process and its queues until stopped."""

    def __init__(self, pid: int, metrics_url: str, every: float) -> None:
        self.pid = pid
        self.metrics_url = metrics_url
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self.began = time.monotonic()

    def sample(self, minute: int) -> dict[str, Any]:
        queues = _queues(self.metrics_url)
        one = {
            "t": round(time.monotonic() - self.began, 1),
            "minute": minute,
            "depth": sum(q.get("depth", 0) for q in queues.values()),
            "max_queue_depth": max((q.get("depth", 0) for q in queues.values()), default=0),
            "unfinished_seconds": round(
                sum(q.get("unfinished_work_seconds", 0) for q in queues.values()), 2
            ),
            "rss_mib": round(_rss_mib(self.pid), 1),
            "cpu_seconds": round(scale._cpu_seconds(self.pid), 2),
        }
        self.samples.append(one)
        return one


async def _churn(
    sim: SimulatedCluster,
    pid: int,
    metrics_url: str,
    minutes: int,
    fraction: float,
    sample_seconds: float,
) -> dict[str, Any]:
    async with sim.api_client() as api:
        c, cache = await scale._open(sim, api, policy=True)
        nodes = sorted(name_of(n) for n in cache.list(scale.NODE) if _gpu(n))
        per_minute = max(1, int(len(nodes) * fraction))
        sampler = Sampler(pid, metrics_url, sample_seconds)
        writes_before = scale._writes(scale._operator_requests(metrics_url)["by_verb"])
        drained_after: list[float | None] = []
        for minute in range(minutes):
            start = time.monotonic()
            first = (minute * per_minute) % len(nodes)
            batch = [nodes[(first + i) % len(nodes)] for i in range(per_minute)]
            await scale._gather(
                c.patch(scale.NODE, name, {"metadata": {"labels": {CHURN_LABEL: str(minute)}}})
                for name in batch
            )
            drained: float | None = None
            while time.monotonic() - start < 60:
                one = sampler.sample(minute)
                if drained is None and one["depth"] == 0 and one["unfinished_seconds"] == 0:
                    drained = round(time.monotonic() - start, 1)
                # Often until the batch is worked off (to see its peak), then every few s.
                await asyncio.sleep(sample_seconds if drained is not None else 0.5)
            drained_after.append(drained)
            last = sampler.samples[-1]
            print(
                f"minute {minute + 1}/{minutes}: {per_minute} nodes relabelled, queues empty "
                f"after {drained if drained is not None else '>60'}s, depth now "
                f"{last['depth']:.0f}, RSS {last['rss_mib']} MiB, CPU {last['cpu_seconds']}s",
                flush=True,
            )
        writes = scale._writes(scale._operator_requests(metrics_url)["by_verb"]) - writes_before
        await cache.stop()
    samples = sampler.samples
    first_minute = [s for s in samples if s["minute"] == 0]
    last_minute = [s for s in samples if s["minute"] == minutes - 1]
    return {
        "nodes_relabelled_per_minute": per_minute,
        "max_depth": max(s["depth"] for s in samples),
        "depth_at_each_minute_end": [
            [s for s in samples if s["minute"] == m][-1]["depth"] for m in range(minutes)
        ],
        "queues_empty_after_seconds": drained_after,
        "rss_mib_first_minute_max": max(s["rss_mib"] for s in first_minute),
        "rss_mib_last_minute_max": max(s["rss_mib"] for s in last_minute),
        "cpu_seconds_per_minute": round(
            (samples[-1]["cpu_seconds"] - samples[0]["cpu_seconds"])
            / max(1e-9, (samples[-1]["t"] - samples[0]["t"]) / 60),
            2,
        ),
        "operator_writes_during_churn": writes,
        "samples": samples,
    }


def _gpu(node: dict[str, Any]) -> bool:
    return labels_of(node).get(scale.GPU_LABEL) == "true"


def run(nodes: int, minutes: int, fraction: float, sample_seconds: float) -> dict[str, Any]:
    config = ClusterConfig(gpu_nodes=nodes, cpu_nodes=2, os=parse_os_list("ubuntu22.04"))
    figures: dict[str, Any] = {"nodes": nodes, "minutes": minutes, "fraction": fraction}
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=1800) as sim:
        figures["sim_up_seconds"] = round(time.monotonic() - began, 1)
        print(f"simulated cluster of {nodes} GPU nodes up in {figures['sim_up_seconds']}s")

        asyncio.run(scale.install(sim))
        port = free_port()
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        process = scale._start_operator(sim, port, None)
        pid = process.pid
        try:
            ready = asyncio.run(scale._operator(sim, metrics_url, pid, 0, 3600))
            figures["to_ready"] = {
                k: ready[k]
                for k in (
                    "seconds",
                    "to_policy_ready_seconds",
                    "operator_cpu_seconds_to_ready",
                    "operator_peak_rss_mib",
                    "operator_requests_by_verb",
                )
            }
            print(
                f"ready: {ready['seconds']}s (policy {ready['to_policy_ready_seconds']}s), "
                f"CPU {ready['operator_cpu_seconds_to_ready']}s, "
                f"peak RSS {ready['operator_peak_rss_mib']} MiB",
                flush=True,
            )
            figures["churn"] = asyncio.run(
                _churn(sim, pid, metrics_url, minutes, fraction, sample_seconds)
            )
            figures["peak_rss_mib"] = round(scale._peak_rss_mib(pid), 1)
        finally:
            os.kill(pid, signal.SIGTERM)
            process.wait(120)
    ch = figures["churn"]
    print(
        f"churn: max depth {ch['max_depth']:.0f}, depth at each minute's end "
        f"{ch['depth_at_each_minute_end']}, RSS {ch['rss_mib_first_minute_max']} -> "
        f"{ch['rss_mib_last_minute_max']} MiB, {ch['cpu_seconds_per_minute']} CPU s/minute, "
        f"{ch['operator_writes_during_churn']} writes",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--policy", type=Path, default=scale.SAMPLE_POLICY)
    args = parser.parse_args()
    scale.POLICY.update(yaml.safe_load(args.policy.read_text()))
    figures = run(args.nodes, args.minutes, args.fraction, args.sample_seconds)
    finish(f"churn-{args.nodes}", figures)


if __name__ == "__main__":
    main()
