"""GPU remediation: from an XID on one GPU to the node's GPUs offered again, step by step,
on a simulated cluster of 100 GPU nodes, and whether any other node was touched.

A simulated cluster (real control plane, kwok nodes, simulated GPUs and node agents) runs
`gpu-operator run` as a process, as in its pod, with `nodeAgent` and `remediation` on at
their default waits. Once every node is validated, the benchmark makes GPU 1 of one node
raise XID 79 (`gpusim.inject_gpu_error`, what `gpu-operator sim gpu-error` does) and
watches the nodes: when the agent reports the GPU unhealthy, when the node enters each
remediation step (taint, drain, reset, validate, done), and when its allocatable offers
every GPU again. Any other node that gets a remediation label, annotation or our taint
counts as touched.

    .venv/bin/python bench/remediation.py [--nodes 100] [--gpus-per-node 2]

Prints figures as it goes; the last line is one JSON object (also
bench/results/remediation.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish
from components.api import REMEDIATION_STATE_LABEL, REMEDIATION_TAINT
from gpusim import (
    ClusterConfig,
    SimulatedCluster,
    apply_crds,
    inject_gpu_error,
    load_documents,
    parse_os_list,
)
from reconciler import GVK, Cache, Client, Object, labels_of, name_of
from reconciler.envtest import free_port
from reconciler.lowlevel import RESTMapper, Transport

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "gpu-operator"
NODE = GVK("", "v1", "Node")
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
STEPS = ("taint", "drain", "reset", "validate", "done")


def _condition(node: Object, kind: str) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return str(c.get("status"))
    return None


def _offered(node: Object) -> int:
    return int(((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))


def _ours(node: Object) -> bool:
    """Whether remediation wrote anything on the node."""
    meta = node.get("metadata") or {}
    notes = meta.get("annotations") or {}
    taints = (node.get("spec") or {}).get("taints") or ()
    return (
        REMEDIATION_STATE_LABEL in (meta.get("labels") or {})
        or any(k.startswith(REMEDIATION_TAINT + ".") for k in notes)
        or any(t.get("key") == REMEDIATION_TAINT for t in taints)
    )


class Watch:
    """Times (monotonic) of what happens to the sick node; the other nodes touched."""

    def __init__(self, target: str, gpus: int) -> None:
        self.target = target
        self.gpus = gpus
        self.times: dict[str, float] = {}
        self.touched: set[str] = set()
        self.armed = False

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        pass

    def _seen(self, node: Object) -> None:
        if not self.armed:
            return
        now = time.monotonic()
        name = name_of(node)
        if name != self.target:
            if _ours(node):
                self.touched.add(name)
            return
        if _condition(node, "GPUHealthy") == "False":
            self.times.setdefault("unhealthy", now)
        if _offered(node) < self.gpus:
            self.times.setdefault("withdrawn", now)
        state = labels_of(node).get(REMEDIATION_STATE_LABEL)
        if state in STEPS:
            self.times.setdefault(state, now)
        if "done" in self.times and _offered(node) == self.gpus:
            self.times.setdefault("offered", now)


async def _wait(check: Any, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {seconds:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)


def _start_operator(sim: SimulatedCluster, log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "components.cli",
            "run",
            f"--kubeconfig={sim.kubeconfig}",
            f"--namespace={NAMESPACE}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            "--log-level=warning",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def bench(nodes: int, gpus: int, limit: float) -> dict[str, Any]:
    config = ClusterConfig(
        gpu_nodes=nodes, cpu_nodes=0, gpus_per_node=gpus, os=parse_os_list("ubuntu22.04")
    )
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=600) as sim:
        print(f"simulated cluster: {nodes} GPU nodes in {time.monotonic() - began:.1f}s")
        log = (sim.workdir / "logs" / "gpu-operator.log").open("ab")
        operator = _start_operator(sim, log)
        try:
            async with sim.api_client() as api:
                transport = Transport(api)
                mapper = RESTMapper(transport)
                cache = Cache(transport, mapper)
                c = Client(transport, mapper, cache, field_manager="bench")
                await apply_crds(api, load_documents(sorted((REPO / "config/crd").glob("*.yaml"))))
                with contextlib.suppress(Exception):
                    await c.create(
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
                    )
                target = sim.gpu_nodes[0]
                watch = Watch(target, gpus)
                cache.informer(NODE).add_handler(watch)
                await cache.start()
                await cache.wait_for_sync(120)
                await c.create(
                    {
                        "apiVersion": "nvidia.com/v1",
                        "kind": "ClusterPolicy",
                        "metadata": {"name": "cluster-policy"},
                        "spec": {"nodeAgent": {"enabled": True}, "remediation": {"enabled": True}},
                    }
                )
                t0 = time.monotonic()
                names = set(sim.gpu_nodes)

                def validated() -> bool:
                    found = [n for n in cache.list(NODE) if name_of(n) in names]
                    return len(found) == len(names) and all(
                        _condition(n, "GPUValidated") == "True" for n in found
                    )

                await _wait(validated, "every node validated", limit)
                print(f"rolled out and validated on {nodes} nodes in {time.monotonic() - t0:.1f}s")
                watch.armed = True
                start = time.monotonic()
                await inject_gpu_error(c, target, 1, xid=79)
                await _wait(lambda: "offered" in watch.times, "the GPUs offered again", limit)
                total = watch.times["offered"] - start
                await asyncio.sleep(2)  # anything late on another node would show by now
                await cache.stop()
        finally:
            operator.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                operator.wait(30)
    marks = ["unhealthy", "withdrawn", *STEPS, "offered"]
    at = {m: round(watch.times[m] - start, 2) for m in marks if m in watch.times}
    steps: dict[str, float] = {}
    previous = 0.0
    for m in ["unhealthy", *STEPS, "offered"]:
        if m in at:
            steps[m] = round(at[m] - previous, 2)
            previous = at[m]
    figures = {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "xid_to_offered_seconds": round(total, 2),
        "seconds_since_xid": at,
        "step_seconds": steps,
        "other_nodes_touched": sorted(watch.touched),
    }
    print(f"XID 79 to GPUs offered again: {total:.1f}s; per step: {steps}")
    print(f"other nodes touched: {len(watch.touched)}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0, help="per wait, seconds")
    args = parser.parse_args()
    finish("remediation", asyncio.run(bench(args.nodes, args.gpus_per_node, args.timeout)))


if __name__ == "__main__":
    main()
