"""Scale: the operator on simulated clusters of 100 and 1,000 GPU nodes (5,000 on request).

For each size: time from ClusterPolicy created to `ready`, the operator process's CPU
seconds and peak RSS, the requests it sent to the apiserver by verb (its own
`rest_client_requests_total`), and the writes it sent during a steady-state window (target 0).

    .venv/bin/python bench/scale.py [--nodes 100,1000] [--steady-seconds 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from _common import finish
from gpusim import ClusterConfig, SimulatedCluster, apply_crds, load_documents, parse_os_list
from reconciler.envtest import free_port

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "gpu-operator"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _requests_by_verb(metrics_url: str) -> dict[str, int]:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "rest_client_requests":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                verb = sample.labels.get("method", "?")
                counts[verb] = counts.get(verb, 0) + int(sample.value)
    return counts


def _writes(counts: dict[str, int]) -> int:
    return sum(counts.get(verb, 0) for verb in WRITE_VERBS)


async def _install(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})


async def _create_policy_and_wait(sim: SimulatedCluster, deadline_s: float) -> float:
    async with sim.api_client() as api:
        custom = client.CustomObjectsApi(api)
        began = time.monotonic()
        await custom.create_cluster_custom_object(
            "nvidia.com",
            "v1",
            "clusterpolicies",
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "cluster-policy"},
                "spec": {},
            },
        )
        while time.monotonic() - began < deadline_s:
            obj = await custom.get_cluster_custom_object(
                "nvidia.com", "v1", "clusterpolicies", "cluster-policy"
            )
            if (obj.get("status") or {}).get("state") == "ready":
                return time.monotonic() - began
            await asyncio.sleep(1)
    raise TimeoutError(f"policy not ready within {deadline_s:.0f}s")


def measure(nodes: int, steady_seconds: float, deadline_s: float) -> dict[str, Any]:
    import subprocess

    config = ClusterConfig(gpu_nodes=nodes, cpu_nodes=2, os=parse_os_list("ubuntu22.04,rhel9.4"))
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=900) as sim:
        sim_up = time.monotonic() - began
        print(f"[{nodes}] simulated cluster up in {sim_up:.1f}s", flush=True)
        asyncio.run(_install(sim))
        metrics_port = free_port()
        log = (sim.workdir / "logs" / "gpu-operator.log").open("ab")
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "components.cli",
                "run",
                f"--kubeconfig={sim.kubeconfig}",
                f"--namespace={NAMESPACE}",
                f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                # Plain HTTP: the bench reads the request counters, and a secure scrape's
                # TokenReview and SubjectAccessReview would be counted among them.
                "--metrics-secure=false",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        try:
            time.sleep(5)  # the operator's caches sync before the policy exists
            to_ready = asyncio.run(_create_policy_and_wait(sim, deadline_s))
            print(f"[{nodes}] policy ready {to_ready:.1f}s after creation", flush=True)
            at_ready = _requests_by_verb(metrics_url)
            cpu_at_ready = _cpu_seconds(operator.pid)
            time.sleep(steady_seconds)
            after = _requests_by_verb(metrics_url)
            figures = {
                "nodes": nodes,
                "sim_up_seconds": round(sim_up, 1),
                "policy_to_ready_seconds": round(to_ready, 1),
                "operator_cpu_seconds_to_ready": round(cpu_at_ready, 2),
                "operator_cpu_seconds_total": round(_cpu_seconds(operator.pid), 2),
                "operator_peak_rss_mib": round(_peak_rss_mib(operator.pid), 1),
                "requests_to_ready_by_verb": at_ready,
                "steady_state_seconds": steady_seconds,
                "steady_state_writes": _writes(after) - _writes(at_ready),
                "steady_state_requests_by_verb": {
                    verb: after.get(verb, 0) - at_ready.get(verb, 0) for verb in after
                },
            }
            print(f"[{nodes}] {figures}", flush=True)
            return figures
        finally:
            operator.terminate()
            operator.wait(30)
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="100,1000", help="comma-separated cluster sizes")
    parser.add_argument("--steady-seconds", type=float, default=300.0)
    parser.add_argument("--deadline-seconds", type=float, default=1800.0)
    args = parser.parse_args()
    runs = [
        measure(int(n), args.steady_seconds, args.deadline_seconds) for n in args.nodes.split(",")
    ]
    finish("scale", {"runs": runs})


if __name__ == "__main__":
    main()
