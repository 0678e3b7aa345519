"""Join: how soon GPU nodes that register at once get their GPUs, once the stack is up.

Cluster autoscalers add GPU nodes in bursts; every second between a node registering and
`nvidia.com/gpu` being allocatable on it is paid for and idle. For each run, a fresh
simulated cluster of `--nodes` GPU nodes has the stack rolled out first (untimed: the
rollout is `scale.py`'s figure), then `--join` more GPU nodes register at once, created as
the simulator registers a kubelet's node, and each is timed from its creation on:

* **floor**: the operand DaemonSets already there (created by the benchmark, as in
  `scale.py`'s floor) and the joining nodes arriving with the deploy labels: what the
  control plane itself needs to put the stack on a node and start it;
* **reference** (`--reference`): NVIDIA's GPU Operator, built by hack/build-reference.sh;
* **ours**: `gpu-operator run`.

Per node, seconds from its creation until: `labelled` (the driver's deploy label is on
it), each operand pod `created` on it and `ready`, and `allocatable`. Printed as p50 / p90
/ max per run; the per-DaemonSet medians say where a run waits that the floor does not.

    .venv/bin/python bench/join.py [--nodes 100] [--join 50] [--reference] [--repeats 1]
        [--os ubuntu22.04] [--policy FILE] [--deadline-seconds 900]

Writes bench/results/join-<nodes>+<join>.json (the last line printed); our operator's log
of the last run is kept as bench/results/join-operator.log.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml

import scale
from _common import finish, percentile
from components.api import DRIVER_DEPLOY_LABEL, ClusterPolicy
from components.controllers import LabelPolicy, node_label_patch
from gpusim import ClusterConfig, SimulatedCluster, build_reference, parse_os_list
from gpusim._nodes import ANNOTATION_INDEX, node_manifest
from reconciler import Cache, Object, annotations_of, labels_of, name_of
from reconciler.envtest import free_port
from reconciler.lowlevel import RESTMapper, Transport

RUNS = ("floor", "reference", "ours")
CREATE_CONCURRENCY = 20
"""As many node creates in flight as the simulator's own registration keeps."""


class Timeline:
    """Seconds from each joining node's creation to each milestone on it, from the watch
    events that show them (no polling): an informer handler for nodes and one for pods."""

    def __init__(self, joining: set[str]) -> None:
        self.joining = joining
        self.created: dict[str, float] = {}
        self.seen: dict[str, dict[str, float]] = {name: {} for name in joining}

    def _mark(self, node: str, reached: dict[str, bool]) -> None:
        """One event's milestones, all at the moment it arrived."""
        marks = self.seen[node]
        now = time.monotonic()
        for milestone, held in reached.items():
            if held and milestone not in marks:
                marks[milestone] = now

    def node_seen(self, node: Object) -> None:
        name = name_of(node)
        if name in self.seen:
            reached = {
                "labelled": DRIVER_DEPLOY_LABEL in labels_of(node),
                "allocatable": scale._allocatable(node),
            }
            self._mark(name, reached)

    def pod_seen(self, pod: Object) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in self.joining:
            return
        owners = pod["metadata"].get("ownerReferences") or []
        daemonset = next((o["name"] for o in owners if o.get("kind") == "DaemonSet"), None)
        if daemonset is None:
            return
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        self._mark(node, {f"{daemonset} created": True, f"{daemonset} ready": ready})

    def all_allocatable(self) -> bool:
        return all("allocatable" in marks for marks in self.seen.values())

    def since_creation(self) -> dict[str, dict[str, float]]:
        """Per node and milestone: seconds after the node's create returned."""
        return {
            node: {m: round(at - self.created[node], 2) for m, at in marks.items()}
            for node, marks in self.seen.items()
            if node in self.created
        }


class _Handler:
    def __init__(self, seen: Callable[[Object], None]) -> None:
        self.on_add = seen
        self.on_update: Callable[[Object, Object], None] = lambda _old, new: seen(new)
        self.on_delete: Callable[[Object], None] = lambda _obj: None


def summary(since: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per milestone over the nodes that reached it: p50, p90, max and how many."""
    by_milestone: dict[str, list[float]] = {}
    for marks in since.values():
        for milestone, seconds in marks.items():
            by_milestone.setdefault(milestone, []).append(seconds)
    return {
        m: {
            "p50": round(statistics.median(v), 2),
            "p90": round(percentile(v, 90), 2),
            "max": round(max(v), 2),
            "nodes": len(v),
        }
        for m, v in sorted(by_milestone.items(), key=lambda kv: statistics.median(kv[1]))
    }


async def join(
    sim: SimulatedCluster,
    count: int,
    deadline_s: float,
    *,
    labels: dict[str, str],
    operator_pid: int | None = None,
) -> dict[str, Any]:
    """Register `count` GPU nodes at once (with `labels` added, for the floor) and time each
    until its GPUs are allocatable; with `operator_pid`, the CPU that process spent on it."""
    async with sim.api_client() as api:
        transport = Transport(api)
        cache = Cache(transport, RESTMapper(transport))
        listed = await transport.request("GET", "/api/v1/nodes")
        first = 1 + max(
            (int(annotations_of(n).get(ANNOTATION_INDEX, "-1")) for n in listed["items"]),
            default=-1,
        )
        specs = [sim.gpu_node_spec(f"gpu-join-{i:04d}") for i in range(count)]
        timeline = Timeline({spec.name for spec in specs})
        drop = [("status", "images"), ("status", "conditions")]
        cache.informer(scale.NODE, drop=drop).add_handler(_Handler(timeline.node_seen))
        pod_drop = [("spec", "containers"), ("spec", "volumes"), ("spec", "affinity")]
        cache.informer(scale.POD, namespace=scale.NAMESPACE, drop=pod_drop).add_handler(
            _Handler(timeline.pod_seen)
        )
        await cache.start()
        await cache.wait_for_sync(300)
        settled = await scale.quiet()
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create(index: int) -> None:
            manifest = node_manifest(specs[index], first + index)
            manifest["metadata"]["labels"].update(labels)
            async with gate:
                await transport.request("POST", "/api/v1/nodes", body=manifest)
                timeline.created[specs[index].name] = time.monotonic()

        cpu_before = scale._cpu_seconds(operator_pid) if operator_pid else 0.0
        began = time.monotonic()
        await asyncio.gather(*(create(i) for i in range(count)))
        while not timeline.all_allocatable():
            if time.monotonic() - began > deadline_s:
                waiting = sorted(n for n, m in timeline.seen.items() if "allocatable" not in m)
                raise TimeoutError(f"{len(waiting)} joining nodes not allocatable: {waiting[:5]}")
            await asyncio.sleep(0.1)
        cpu = scale._cpu_seconds(operator_pid) - cpu_before if operator_pid else None
        await cache.stop()
        await transport.close()
    since = timeline.since_creation()
    return {
        "quiet_after_seconds": settled,
        **({"operator_cpu_seconds": round(cpu, 2)} if cpu is not None else {}),
        "milestones": summary(since),
        "nodes": since,
    }


def _floor_labels(sim: SimulatedCluster) -> dict[str, str]:
    """The labels ours would give a joining GPU node: the floor's nodes arrive with them."""
    wanted = LabelPolicy.of(ClusterPolicy.from_dict(scale.POLICY))
    spec = sim.gpu_node_spec("gpu-join-probe")
    patch = node_label_patch(labels_of(node_manifest(spec, 0)), wanted)
    return {k: v for k, v in patch.items() if v is not None}


def run_once(
    kind: str, config: ClusterConfig, joining: int, deadline_s: float, reference: Path | None
) -> dict[str, Any]:
    """One fresh cluster: the stack rolled out by `kind`, then `joining` nodes timed."""
    with scale.SimulatedCluster(config, startup_timeout=900, crds=scale.crds()) as sim:
        if kind == "floor":
            rollout = asyncio.run(scale._floor(sim, deadline_s, pods=False))
            return {"rollout_seconds": rollout["seconds"], **_join(sim, joining, deadline_s, True)}
        asyncio.run(scale.install(sim))
        port = free_port()
        if kind == "ours":
            process = scale._start_operator(sim, port, None)
        else:
            assert reference is not None
            process = scale.start_reference(
                sim, reference, namespace=scale.NAMESPACE, metrics_port=port
            )
        try:
            rollout = asyncio.run(
                scale._operator(
                    sim,
                    f"http://127.0.0.1:{port}/metrics",
                    process.pid,
                    0.0,
                    deadline_s,
                    pods=False,
                    reference=kind == "reference",
                )
            )
            joined = _join(sim, joining, deadline_s, False, process.pid)
            return {"rollout_seconds": rollout["seconds"], **joined}
        finally:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(120)
            if kind == "ours":
                log = sim.workdir / "logs" / "gpu-operator.log"
                shutil.copyfile(log, scale.RESULTS / "join-operator.log")


def _join(
    sim: SimulatedCluster, joining: int, deadline_s: float, floor: bool, pid: int | None = None
) -> dict[str, Any]:
    labels = _floor_labels(sim) if floor else {}
    return asyncio.run(join(sim, joining, deadline_s, labels=labels, operator_pid=pid))


def _line(kind: str, figures: dict[str, Any]) -> str:
    a = figures["milestones"]["allocatable"]
    cpu = figures.get("operator_cpu_seconds")
    spent = f", operator CPU {cpu}s" if cpu is not None else ""
    return f"{kind:>9}: allocatable p50 {a['p50']}s  p90 {a['p90']}s  max {a['max']}s{spent}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=100, help="GPU nodes before the join")
    parser.add_argument("--join", type=int, default=50, help="GPU nodes that register at once")
    parser.add_argument("--reference", action="store_true", help="NVIDIA's operator too")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the runs")
    parser.add_argument("--os", default="ubuntu22.04", help="the GPU nodes' OS (one)")
    parser.add_argument("--policy", type=Path, default=scale.SAMPLE_POLICY)
    parser.add_argument("--deadline-seconds", type=float, default=900.0)
    parser.add_argument("--runs", default=",".join(RUNS), help=f"which of {','.join(RUNS)}")
    args = parser.parse_args()
    if len(set(parse_os_list(args.os))) > 1:
        parser.error("--os takes one OS: NVIDIA's operator renders one driver DaemonSet")
    scale.POLICY.update(yaml.safe_load(args.policy.read_text()))
    kinds = [k for k in args.runs.split(",") if k != "reference" or args.reference]
    reference = build_reference() if "reference" in kinds else None
    config = ClusterConfig(gpu_nodes=args.nodes, cpu_nodes=2, os=parse_os_list(args.os))
    rounds: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        figures: dict[str, Any] = {}
        for kind in kinds if repeat % 2 == 0 else reversed(kinds):
            figures[kind] = run_once(kind, config, args.join, args.deadline_seconds, reference)
            print(f"[{args.nodes}+{args.join} #{repeat + 1}] {_line(kind, figures[kind])}")
            slowest = list(figures[kind]["milestones"].items())[-6:]
            print("    " + ", ".join(f"{m} {s['p50']}s" for m, s in slowest), flush=True)
        rounds.append(figures)
    finish(
        f"join-{args.nodes}+{args.join}",
        {"nodes": args.nodes, "join": args.join, "os": args.os, "rounds": rounds},
    )


if __name__ == "__main__":
    main()
