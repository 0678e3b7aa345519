"""Scale: the operator on simulated clusters of 100 and 1,000 GPU nodes (5,000 on request),
against the floor of the same cluster shape.

For each size, two fresh simulated clusters of the same shape, one after the other:

* **floor**: the GPU nodes pre-labelled the way the operator labels them, then the
  operator's own objects (every enabled operand of the policy, rendered by our renderers:
  DaemonSets and their prerequisites) created directly by the benchmark; timed from the
  first create until every DaemonSet is fully rolled out and every GPU node advertises
  `nvidia.com/gpu`. No operator runs: this is what the control plane itself needs.
* **operator**: `gpu-operator run` as a process; timed from the ClusterPolicy's creation
  until the same two facts hold and the policy says `ready`.

Figures: both times and their ratio; the operator's CPU seconds (utime + stime of its
process) and peak RSS at that moment; the requests it sent by verb and by resource (its own
client's counts); the requests the API server served by verb and resource in each run (all
clients: the difference is the operator's doing); the CPU seconds of every process of each
run (control plane, simulated nodes, operator, this benchmark) and how busy the machine was:
on a saturated machine every CPU second the operator or its requests cost is taken from the
control plane; and the writes it sent during a steady-state window (target 0).

    .venv/bin/python bench/scale.py [--nodes 100,1000] [--steady-seconds 300]
        [--profile]       run the operator under a sampler of its own CPU time
                          (`_cpu_profile.py`) and print the top of the profile (written to
                          bench/results/)
        [--no-floor]      the operator only (profiling runs)
        [--apiserver-profile S] take S seconds of kube-apiserver's own CPU profile (Go's
                          pprof) from the operator's policy creation on: its label writes
                          and first DaemonSets, as the API server pays for them (written to
                          bench/results/apiserver-profile-<nodes>.pb.gz; read it with
                          `go tool pprof -top -cum FILE`)
        [--repeats N]     measure each size N times, floor and operator in turn (every
                          other pair the operator first), and print the median ratio (at
                          100 nodes one run's floor alone varies by 20%)
        [--labelled-floor] a third run: the floor with the nodes labelled inside its clock
        [--burn-share F]  with it, a process spending F of a core during that run
        [--watchers]      with it, the operator's informers alone during that run
                          (`_watchers.py`: its watches, no controller, no write)
        [--policy FILE]   the ClusterPolicy (default: config/samples/..._full.yaml)
        [--os LIST]       the GPU nodes' OS mix (default ubuntu22.04,rhel9.4)
        [--reference]     a run of NVIDIA's GPU Operator too, on a cluster of the same
                          shape (one OS: pass --os ubuntu22.04), built by
                          hack/build-reference.sh

The operator's log of the last run is kept as bench/results/scale-operator.log. Prints
figures as it goes; the last line is one JSON object (also bench/results/scale.json,
or scale-<nodes>.json for one size).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from prometheus_client.parser import text_string_to_metric_families

from _common import RESULTS, finish
from _dra_floor import dra_floor
from _dra_operator import gpu_cluster_run, prepare
from _dra_timeline import describe
from _watchers import SYNCED
from components.api import DRIVER_DEPLOY_LABEL, GPU_PRESENT_LABEL, ClusterPolicy
from components.controllers import LabelPolicy, node_label_patch
from components.controllers._labels import LabelPatch
from components.controllers._node_labels import LABEL_WORKERS
from components.controllers._view import gpu_nodes
from components.operands import OPERANDS, ClusterView
from gpusim import (
    ClusterConfig,
    SimulatedCluster,
    build_reference,
    load_documents,
    parse_os_list,
    reference_policy,
    start_reference,
)
from reconciler import GVK, Cache, Client, Object, labels_of, name_of
from reconciler.envtest import free_port
from reconciler.lowlevel import RESTMapper, Transport

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
PROFILE_INTERVAL = 0.004
"""CPU seconds between two samples of the operator's stack (`--profile`)."""
NAMESPACE = "gpu-operator"
OPERATOR_LOG = "scale-operator.log"
DRA_OPERATOR_LOG = "scale-dra-operator.log"
NODE = GVK("", "v1", "Node")
DAEMONSET = GVK("apps", "v1", "DaemonSet")
POD = GVK("", "v1", "Pod")
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
SAMPLE_POLICY = REPO / "config" / "samples" / "nvidia_v1_clusterpolicy_full.yaml"
POLICY: dict[str, Any] = {}
"""The ClusterPolicy both runs use (`--policy`; the full sample: autoUpgrade on, as the
reference's sample and Helm chart have it)."""
APISERVER_PROFILE_SECONDS: list[float] = [0.0]
"""`--apiserver-profile` (set once by `main`, like `POLICY`)."""
GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
GPU_RESOURCE = "nvidia.com/gpu"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
DEFAULT_OS = "ubuntu22.04,rhel9.4"
_TICKS = os.sysconf("SC_CLK_TCK")


# -- the operator process ----------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


PROBE = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[2])})
def unit():
    total = 0
    for i in range(30000):
        total += i * i
    return total
with open(sys.argv[1], "a", buffering=1) as out:
    while True:
        began = time.thread_time()
        unit()
        out.write(f"{time.time():.3f} {time.thread_time() - began:.6f}\\n")
        time.sleep(0.25)
"""


class SpeedProbe:
    """How fast this machine's CPUs are, run by run: on each CPU, a process pinned to it
    times the same small piece of work (about 1 ms of CPU, in cache) four times a second,
    in its own CPU time, so that waiting for a core does not count. On this VM the answer
    jumps between two levels even when the machine is idle: ~1.1 ms and ~1.9 ms, the slow
    one close to half the time, the host's doing (steal time stays under 2%); and each CPU
    jumps on its own (the two CPUs' per-second figures correlated at 0.26 over 90 idle
    seconds), so one probe that the scheduler moves between them measured whichever it
    happened to be on. A run on a slow spell takes longer and its processes count more CPU
    seconds for the same work; `probe_unit_ms` says how slow its machine was: the unit's
    cost at the mean speed of every CPU over the run (a harmonic mean of all samples, since
    a saturated machine's throughput is the sum of its CPUs' speeds)."""

    def __init__(self) -> None:
        self.paths: list[Path] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        for cpu in sorted(os.sched_getaffinity(0)):
            fd, name = tempfile.mkstemp(prefix=f"scale-probe-{cpu}-", suffix=".txt")
            os.close(fd)
            self.paths.append(Path(name))
            command = [sys.executable, "-c", PROBE, name, str(cpu)]
            self.processes.append(subprocess.Popen(command))

    def mean_ms(self, since: float, until: float) -> float | None:
        speeds = []
        for path in self.paths:
            for line in path.read_text().splitlines():
                at, cost = (float(v) for v in line.split())
                if since <= at <= until and cost > 0:
                    speeds.append(1.0 / cost)
        return round(1000 / statistics.fmean(speeds), 3) if speeds else None

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
        for path in self.paths:
            path.unlink(missing_ok=True)


PROBES: list[SpeedProbe] = []
"""The running probe, if any (`main` starts one for the whole benchmark)."""


class CpuTally:
    """The CPU seconds each process of a run spent from `start` to `stop`, and how busy the
    whole machine was meanwhile: whether what the operator adds came out of idle time or out
    of the control plane's; and how fast the machine was (`SpeedProbe`)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if Path(f"/proc/{pid}").exists()}
        self._before: dict[str, float] = {}
        self._machine: tuple[int, int, int] = (0, 0, 0)
        self._wall = 0.0

    def start(self) -> None:
        self._before = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}
        self._machine = _machine_ticks()
        self._wall = time.time()

    def stop(self) -> dict[str, Any]:
        spent = {
            name: round(_cpu_seconds(pid) - self._before[name], 1)
            for name, pid in self.pids.items()
            if Path(f"/proc/{pid}").exists()
        }
        busy, steal = _shares(_machine_ticks(), self._machine)
        return {
            "process_cpu_seconds": _descending(spent),
            "machine_busy_share": busy,
            # Time the hypervisor gave to others: a run with more of it was on a slower
            # machine, and its ratio says less.
            "machine_steal_share": steal,
            **({"probe_unit_ms": PROBES[0].mean_ms(self._wall, time.time())} if PROBES else {}),
        }


def _machine_ticks() -> tuple[int, int, int]:
    """(busy, total, stolen) jiffies of every CPU, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    steal = fields[7] if len(fields) > 7 else 0
    return sum(fields) - idle, sum(fields), steal


def _shares(
    now: tuple[int, int, int], then: tuple[int, int, int]
) -> tuple[float | None, float | None]:
    """The busy and stolen shares of the machine between two `_machine_ticks`."""
    busy, total, steal = (a - b for a, b in zip(now, then, strict=True))
    return (round(busy / total, 3), round(steal / total, 3)) if total else (None, None)


def _descending(values: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(values.items(), key=lambda kv: -kv[1]))


QUIET_SHARE = 0.3
QUIET_SECONDS = 3.0
QUIET_TIMEOUT = 300.0
QUIET_STEP = 0.5


async def quiet(
    share: float = QUIET_SHARE, seconds: float = QUIET_SECONDS, at_most: float = QUIET_TIMEOUT
) -> float:
    """Until the machine has been less than `share` busy for `seconds` in a row; returns how
    long that took. Each clock starts on a quiet machine: the floor's pre-labelling leaves
    every watcher of nodes with 1,000 updates to work through after its last write returns,
    and the operator's start its own lists and labels. An idle 1,000-node cluster measured
    15-40% busy in 2 s windows (its leases renewed every 10 s). Past `at_most` it goes on
    anyway: a machine never quiet shows in its busy share."""
    began = time.monotonic()
    calm = 0.0
    then = _machine_ticks()
    while calm < seconds and time.monotonic() - began < at_most:
        await asyncio.sleep(QUIET_STEP)
        now = _machine_ticks()
        busy, _ = _shares(now, then)
        then = now
        calm = calm + QUIET_STEP if busy is not None and busy < share else 0.0
    return round(time.monotonic() - began, 1)


def _cpu_line(nodes: int, run: str, figures: dict[str, Any]) -> str:
    spent = figures.get("process_cpu_seconds") or {}
    each = ", ".join(f"{name} {seconds}" for name, seconds in spent.items())
    share = figures.get("machine_busy_share")
    busy = f"{share:.0%}" if share is not None else "-"
    stolen = figures.get("machine_steal_share")
    steal = f"{stolen:.1%}" if stolen is not None else "-"
    total = sum(spent.values())
    probe = figures.get("probe_unit_ms")
    speed = f", probe {probe} ms" if probe is not None else ""
    return (
        f"[{nodes}] {run} CPU s: {each}; total {total:.1f}, machine busy {busy}, "
        f"stolen {steal}{speed}"
    )


def _operator_requests(metrics_url: str) -> dict[str, dict[str, Any]]:
    """The operator's own counts: {"by_verb": ..., "by_resource": {"PATCH nodes": n},
    "by_code": {"PATCH 409": n}} (a retried or refused request counts once per attempt),
    and per controller its reconciles and their seconds (wall time, awaits included)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    by_verb: Counter[str] = Counter()
    by_resource: Counter[str] = Counter()
    by_code: Counter[str] = Counter()
    reconciles: Counter[str] = Counter()
    reconcile_seconds: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "controller_runtime_reconcile_time_seconds_sum":
                reconcile_seconds[sample.labels.get("controller", "?")] += sample.value
            elif sample.name == "controller_runtime_reconcile_total":
                reconciles[sample.labels.get("controller", "?")] += int(sample.value)
            if not sample.name.endswith("_total"):
                continue
            if family.name == "rest_client_requests":
                by_verb[sample.labels.get("method", "?")] += int(sample.value)
                key = f"{sample.labels.get('method', '?')} {sample.labels.get('code', '?')}"
                by_code[key] += int(sample.value)
            elif family.name == "rest_client_requests_by_resource":
                key = f"{sample.labels.get('method')} {sample.labels.get('resource')}"
                by_resource[key] += int(sample.value)
    return {
        "by_verb": dict(by_verb),
        "by_resource": dict(sorted(by_resource.items())),
        "by_code": dict(sorted(by_code.items())),
        "reconciles": dict(reconciles),
        "reconcile_seconds": dict(reconcile_seconds),
    }


async def _serving(metrics_url: str, seconds: float) -> None:
    """Until the operator answers on /metrics: on a loaded machine it may take longer to
    start than the benchmark's own cache takes to sync."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            _operator_requests(metrics_url)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


def _writes(by_verb: dict[str, int]) -> int:
    return sum(by_verb.get(verb, 0) for verb in WRITE_VERBS)


# -- the cluster, watched ------------------------------------------------------------------


PER_RESOURCE = {
    "apiserver_terminated_watchers": ("_total", "TERMINATED watch"),
    "apiserver_watch_events": ("_total", "WATCH EVENTS"),
    "apiserver_watch_events_sizes": ("_sum", "WATCH BYTES"),
}
"""Per resource, beside the requests: the watchers the API server closed, and what it sent
its watchers, all of them together (in two runs of the same requests, what more watchers
cost it to encode and send). Family -> (sample suffix, key prefix)."""


async def _apiserver_requests(transport: Transport) -> Counter[str]:
    """Requests the API server served, "VERB resource[/subresource]" -> count (all clients);
    also "TERMINATED watch resource": watchers it closed for falling behind (its watch cache
    holds every watcher's events while one is full, for about 50 ms a second at most, then
    closes that one; the client watches again from where it was)."""
    raw = await transport.request_bytes("GET", "/metrics")
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(raw.decode()):
        if family.name in PER_RESOURCE:
            suffix, prefix = PER_RESOURCE[family.name]
            for sample in family.samples:
                if sample.name.endswith(suffix):
                    resource = sample.labels.get("resource") or sample.labels.get("kind", "")
                    counts[f"{prefix} {resource.lower()}"] += int(sample.value)
            continue
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            counts[f"{labels.get('verb')} {resource}"] += int(sample.value)
    return counts


def _rolled_out(ds: Object, podless: bool = False) -> bool:
    """Every pod the DaemonSet wants is updated and available. `podless`: one that wants
    none counts too, once its controller has seen it (NVIDIA's operator makes the MIG
    manager's and the MPS daemon's for every cluster; they have no node here)."""
    status = ds.get("status") or {}
    desired = status.get("desiredNumberScheduled", -1)
    observed = status.get("observedGeneration", 0) >= ds["metadata"].get("generation", 1)
    if podless and observed and desired == 0:
        return True
    return bool(
        observed
        and desired > 0
        and status.get("numberReady") == desired
        and status.get("updatedNumberScheduled") == desired
        and status.get("numberAvailable") == desired
    )


def _allocatable(node: Object) -> bool:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0")
    return str(value) not in ("", "0")


class PodMilestones:
    """When each operand pod was first seen, bound to its node and Ready (`--pods`): per
    DaemonSet, where a rollout's time goes (the DaemonSet controller creating pods, the
    scheduler binding them, the pods turning Ready) in the floor's run and the operator's."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.pods: dict[str, dict[str, float | str]] = {}

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        pass

    def _seen(self, pod: Object) -> None:
        owner = next(
            (r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None
        )
        if owner is None or owner.get("kind") != "DaemonSet":
            return
        at = round(time.monotonic() - self.began, 3)
        seen = self.pods.setdefault(name_of(pod), {"daemonset": owner["name"], "created": at})
        if "bound" not in seen and (pod.get("spec") or {}).get("nodeName"):
            seen["bound"] = at
        conditions = (pod.get("status") or {}).get("conditions") or []
        if "ready" not in seen and any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
        ):
            seen["ready"] = at

    def summary(self) -> dict[str, dict[str, list[float]]]:
        """Per DaemonSet and milestone: [first, median, last] seconds from the start."""
        by_ds: dict[str, dict[str, list[float]]] = {}
        for seen in self.pods.values():
            ds = by_ds.setdefault(str(seen["daemonset"]), {})
            for milestone in ("created", "bound", "ready"):
                if milestone in seen:
                    ds.setdefault(milestone, []).append(float(seen[milestone]))
        return {
            ds: {
                k: [round(min(v), 2), round(statistics.median(v), 2), round(max(v), 2)]
                for k, v in milestones.items()
            }
            for ds, milestones in sorted(by_ds.items())
        }


class Watch:
    """Nodes, the operator namespace's DaemonSets and the policy, from one cache: each
    `until` answers on the event that makes it true, without polling the server."""

    def __init__(
        self, cache: Cache, expected_daemonsets: int | None, *, podless: bool = False
    ) -> None:
        self.cache = cache
        self.expected_daemonsets = expected_daemonsets
        self.podless = podless
        """A DaemonSet that wants no pod counts as rolled out (`_rolled_out`)."""
        self.daemonsets: dict[str, dict[str, float]] = {}
        """Per DaemonSet: seconds until it existed and until it was rolled out (where the
        operator's time goes against the floor's)."""

    def _track(self, began: float) -> None:
        at = round(time.monotonic() - began, 1)
        for ds in self.cache.list(DAEMONSET, namespace=NAMESPACE):
            seen = self.daemonsets.setdefault(name_of(ds), {"created": at})
            if "rolled_out" not in seen and _rolled_out(ds, self.podless):
                seen["rolled_out"] = at

    def gpu_nodes(self) -> list[Object]:
        return [n for n in self.cache.list(NODE) if labels_of(n).get(GPU_LABEL) == "true"]

    def all_allocatable(self) -> bool:
        return all(_allocatable(n) for n in self.gpu_nodes())

    def all_labelled(self) -> bool:
        """Every GPU node carries the operator's deploy labels (its first write)."""
        nodes = self.gpu_nodes()
        return bool(nodes) and all(DRIVER_DEPLOY_LABEL in labels_of(n) for n in nodes)

    def all_present(self) -> bool:
        """Every GPU node carries `gpu.present`: the operator's own work before any policy."""
        nodes = self.gpu_nodes()
        return bool(nodes) and all(labels_of(n).get(GPU_PRESENT_LABEL) == "true" for n in nodes)

    def all_rolled_out(self) -> bool:
        daemonsets = self.cache.list(DAEMONSET, namespace=NAMESPACE)
        if self.expected_daemonsets is not None and len(daemonsets) < self.expected_daemonsets:
            return False
        return bool(daemonsets) and all(_rolled_out(ds, self.podless) for ds in daemonsets)

    def policy_ready(self) -> bool:
        policy = self.cache.get(CLUSTER_POLICY, POLICY["metadata"]["name"])
        return policy is not None and (policy.get("status") or {}).get("state") == "ready"

    async def until(
        self,
        checks: dict[str, Callable[[], bool]],
        began: float,
        deadline_s: float,
        on_reach: dict[str, Callable[[], None]] | None = None,
    ) -> dict[str, float]:
        """Seconds from `began` until each check first held; returns when all have.
        `on_reach[name]` is called the moment `name` first holds."""
        reached: dict[str, float] = {}
        while len(reached) < len(checks):
            self._track(began)
            for name, check in checks.items():
                if name not in reached and check():
                    reached[name] = round(time.monotonic() - began, 1)
                    if on_reach and name in on_reach:
                        on_reach[name]()
            if time.monotonic() - began > deadline_s:
                missing = sorted(set(checks) - set(reached))
                raise TimeoutError(f"not reached within {deadline_s:.0f}s: {missing}")
            await asyncio.sleep(0.2)
        return reached


async def _open(
    sim: SimulatedCluster, api: Any, *, policy: bool, pods: PodMilestones | None = None
) -> tuple[Client, Cache]:
    transport = Transport(api)
    mapper = RESTMapper(transport)
    cache = Cache(transport, mapper)
    # Only what the checks read: nodes' labels and allocatable, DaemonSets' status.
    cache.informer(NODE, drop=[("status", "images"), ("status", "conditions")])
    cache.informer(DAEMONSET, namespace=NAMESPACE, drop=[("spec", "template")])
    if pods is not None:
        drop = [("spec", "containers"), ("spec", "volumes"), ("spec", "affinity")]
        cache.informer(POD, namespace=NAMESPACE, drop=drop).add_handler(pods)
    if policy:
        cache.informer(CLUSTER_POLICY)
    await cache.start()
    await cache.wait_for_sync(300)
    return Client(transport, mapper, cache, field_manager="bench"), cache


def _diff(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    out = {k: after[k] - before.get(k, 0) for k in after}
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))


def _top(counts: dict[str, int], n: int = 12) -> str:
    return ", ".join(f"{k}={v}" for k, v in list(counts.items())[:n])


# -- the floor ---------------------------------------------------------------------------


def rendered_objects(nodes: Iterable[Object]) -> list[Object]:
    """What the operator would create for `POLICY` on these nodes, without an owner."""
    policy = ClusterPolicy.from_dict(POLICY)
    view = ClusterView(
        namespace=NAMESPACE,
        gpu_nodes=gpu_nodes(nodes),
        has_service_monitor_crd=False,
        owner=None,
    )
    objects: list[Object] = []
    for operand in OPERANDS:
        if operand.enabled(policy):
            objects += operand.render(policy, view).objects
    return objects


def crds() -> list[dict[str, Any]]:
    """Our CRDs, installed as each simulated cluster starts (before its controller manager:
    as in a cluster the chart was installed on earlier; a CRD created seconds before the
    policy costs the garbage collector ~12 GETs of every object the policy owns while it
    has not yet discovered the kind, about 10% of the control plane's CPU at 100 nodes)."""
    return load_documents(sorted((REPO / "config" / "crd").glob("*.yaml")))


async def install(sim: SimulatedCluster) -> None:
    """What an operator run needs first on a fresh simulated cluster: the operator's
    namespace (the chart's job in a real cluster)."""
    async with sim.api_client() as api:
        transport = Transport(api)
        await transport.request(
            "POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}}
        )
        await transport.close()


@dataclass(frozen=True)
class Alongside:
    """What runs beside the labelled floor, to tell what of the operator's run costs what:
    a process spending `burn_share` of a core (its CPU without its requests), the
    operator's informers alone (`watchers`: its watches without its CPU for controllers)."""

    burn_share: float = 0.0
    watchers: bool = False

    def said(self) -> str:
        parts = [f"a process burning {self.burn_share:.0%} of a core"] if self.burn_share else []
        parts += ["the operator's informers"] if self.watchers else []
        return f", {' and '.join(parts)} alongside" if parts else ""


async def _floor(
    sim: SimulatedCluster,
    deadline_s: float,
    *,
    pods: bool,
    labels_on_clock: bool = False,
    alongside: Alongside | None = None,
) -> dict[str, Any]:
    """The floor. `labels_on_clock`: the nodes are labelled inside the clock, as an operator
    must, by as many writers as the operator has (the floor of any operator that labels
    nodes). `alongside`: what runs beside it while the clock does (`Alongside`); the
    operator's informers, if asked for, are synced before the clock."""
    alongside = alongside or Alongside()
    milestones = PodMilestones() if pods else None
    async with sim.api_client() as api:
        c, cache = await _open(sim, api, policy=False, pods=milestones)
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        wanted = LabelPolicy.of(ClusterPolicy.from_dict(POLICY))
        nodes = await c.list_live(NODE)
        patches = {name_of(n): node_label_patch(labels_of(n), wanted) for n in nodes}

        async def label_all(writers: int) -> None:
            await _gather(
                (
                    c.patch(NODE, name, {"metadata": {"labels": patch}})
                    for name, patch in patches.items()
                    if patch
                ),
                limit=writers,
            )

        prelabelled: dict[str, Any] | None = None
        if not labels_on_clock:
            # Untimed, but its cost is reported: the operator's run pays for these writes
            # (and every watcher's handling of them) inside its window.
            prelabel = CpuTally({**sim.pids(), "bench": os.getpid()})
            prelabel.start()
            labelling = time.monotonic()
            await label_all(20)
            prelabelled = {"seconds": round(time.monotonic() - labelling, 1), **prelabel.stop()}
        # Rendered from the labels the nodes have once labelled: no LIST inside the clock.
        objects = rendered_objects(_labelled(nodes, patches))
        daemonsets = sum(1 for o in objects if o.get("kind") == "DaemonSet")
        watch = Watch(cache, daemonsets)
        informers = await asyncio.to_thread(_start_watchers, sim) if alongside.watchers else None
        settled = await quiet()
        before = await _apiserver_requests(c.transport)
        burner = _start_burner(alongside.burn_share) if alongside.burn_share > 0 else None
        pids = {**sim.pids(), "bench": os.getpid()}
        if burner is not None:
            pids["burner"] = burner.pid
        if informers is not None:
            pids["watchers"] = informers.pid
        tally = CpuTally(pids)
        tally.start()
        began = time.monotonic()
        if milestones is not None:
            milestones.began = began
        labelled_after = None
        if labels_on_clock:
            await label_all(LABEL_WORKERS)
            labelled_after = round(time.monotonic() - began, 1)
        # Prerequisites before the DaemonSets that use them, each group at once: created one
        # by one, the 37 objects took the floor's DaemonSets to 1.1-1.8 s at 100 nodes,
        # where the operator's came at 0.6-0.8 s (a head start the floor must not give).
        await _gather(c.create(o) for o in objects if o.get("kind") != "DaemonSet")
        await _gather(c.create(o) for o in objects if o.get("kind") == "DaemonSet")
        reached = await watch.until(
            {"rolled_out": watch.all_rolled_out, "allocatable": watch.all_allocatable},
            began,
            deadline_s,
        )
        cpu = tally.stop()
        for helper in (burner, informers):
            if helper is not None:
                helper.kill()
                helper.wait()
        requests = _diff(await _apiserver_requests(c.transport), before)
        await cache.stop()
    seconds = max(reached.values())
    return {
        "seconds": seconds,
        "objects": len(objects),
        "daemonsets": daemonsets,
        "to_rolled_out_seconds": reached["rolled_out"],
        "to_allocatable_seconds": reached["allocatable"],
        "daemonset_times": dict(sorted(watch.daemonsets.items())),
        "apiserver_requests": requests,
        **cpu,
        **({"prelabel": prelabelled} if prelabelled is not None else {}),
        **({"to_labelled_seconds": labelled_after} if labelled_after is not None else {}),
        **({"burn_share": alongside.burn_share} if burner is not None else {}),
        **({"watchers": True} if informers is not None else {}),
        "quiet_after_seconds": settled,
        **({"pod_milestones": milestones.summary()} if milestones is not None else {}),
    }


def _labelled(nodes: Iterable[Object], patches: dict[str, LabelPatch]) -> list[Object]:
    """`nodes` as they are once their label patches have landed."""
    out = []
    for node in nodes:
        labels = {**labels_of(node), **patches.get(name_of(node), {})}
        meta = {**node["metadata"], "labels": {k: v for k, v in labels.items() if v is not None}}
        out.append({**node, "metadata": meta})
    return out


BURNER = """
import sys, time
share = float(sys.argv[1])
began = time.monotonic()
while True:
    if time.process_time() < share * (time.monotonic() - began):
        end = time.process_time() + 0.001
        while time.process_time() < end:
            pass
    else:
        time.sleep(0.005)
"""
"""Spends `share` of one core's time in CPU, evenly, and nothing else: no request, no
memory to speak of. When the machine cannot give it that much at once it catches up."""


def _start_burner(share: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", BURNER, str(share)])


def _start_watchers(sim: SimulatedCluster) -> subprocess.Popen[bytes]:
    """`_watchers.py`, once it says its informers have all listed (before the clock)."""
    script = Path(__file__).with_name("_watchers.py")
    process = subprocess.Popen(
        [sys.executable, str(script), str(sim.kubeconfig), NAMESPACE], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.decode().strip() != SYNCED:
        process.kill()
        raise RuntimeError(f"bench/_watchers.py ended before its informers synced: {line!r}")
    return process


async def _gather(coros: Iterable[Any], limit: int = 20) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> None:
        async with gate:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


# -- the operator ------------------------------------------------------------------------


def _start_operator(
    sim: SimulatedCluster, metrics_port: int, profile: Path | None
) -> subprocess.Popen[bytes]:
    """The operator as its own process (under the CPU sampler when profiling)."""
    sampler = (
        []
        if profile is None
        else [str(BENCH / "_cpu_profile.py"), str(profile), "--interval", str(PROFILE_INTERVAL)]
    )
    command = [
        sys.executable,
        *sampler,
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
    ]
    with (sim.workdir / "logs" / "gpu-operator.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return process


def _apiserver_profile(transport: Transport, seconds: float) -> asyncio.Task[bytes] | None:
    """kube-apiserver's CPU profile over the next `seconds` (its /debug/pprof, which the
    benchmark's admin credentials may read), or None when not asked for."""
    if seconds <= 0:
        return None
    params = {"seconds": str(max(1, round(seconds)))}
    return asyncio.create_task(
        transport.request_bytes(
            "GET", "/debug/pprof/profile", params=params, request_timeout=seconds + 60
        )
    )


async def _keep_apiserver_profile(task: asyncio.Task[bytes] | None, nodes: int) -> str | None:
    if task is None:
        return None
    path = RESULTS / f"apiserver-profile-{nodes}.pb.gz"
    path.write_bytes(await task)
    print(f"[{nodes}] kube-apiserver profile: go tool pprof -top -cum {path}", flush=True)
    return str(path.relative_to(REPO))


async def _operator(
    sim: SimulatedCluster,
    metrics_url: str,
    pid: int,
    steady_seconds: float,
    deadline_s: float,
    *,
    pods: bool,
    reference: bool = False,
) -> dict[str, Any]:
    """Ours, or with `reference` NVIDIA's operator: the same clock and figures, but its
    policy is `reference_policy`'s, it labels no node before a policy exists, and it is
    ready when its policy also says so (it makes two DaemonSets that have no pod here)."""
    milestones = PodMilestones() if pods else None
    policy = reference_policy(POLICY) if reference else POLICY
    async with sim.api_client() as api:
        c, cache = await _open(sim, api, policy=True, pods=milestones)
        watch = Watch(cache, None, podless=reference)
        await _serving(metrics_url, 300)
        if not reference:
            # Ours labels every GPU node `gpu.present` as it starts, policy or not. At
            # 1,000 nodes on a busy machine that outlasted the wait below, and those writes
            # were counted as the rollout's (1.2 node writes per node instead of 1).
            await watch.until({"present": watch.all_present}, time.monotonic(), deadline_s)
        await asyncio.sleep(5)  # the operator's caches sync before the policy exists
        settled = await quiet()
        cpu_before = _cpu_seconds(pid)
        ours_before = _operator_requests(metrics_url)
        before = await _apiserver_requests(c.transport)
        pids = {**sim.pids(), "operator": pid, "bench": os.getpid()}
        tally, label_phase = CpuTally(pids), CpuTally(pids)
        labelled: dict[str, Any] = {}
        tally.start()
        label_phase.start()
        began = time.monotonic()
        if milestones is not None:
            milestones.began = began
        apiserver_profile = _apiserver_profile(c.transport, APISERVER_PROFILE_SECONDS[0])
        await c.create(policy)
        reached = await watch.until(
            {
                "rolled_out": watch.all_rolled_out,
                "allocatable": watch.all_allocatable,
                "policy_ready": watch.policy_ready,
                "labelled": watch.all_labelled,
            },
            began,
            deadline_s,
            # How busy the machine was while the DaemonSets waited for the labels: whether
            # that phase could have overlapped the rollout for free.
            on_reach={"labelled": lambda: labelled.update(label_phase.stop())},
        )
        cpu = _cpu_seconds(pid)
        processes = tally.stop()
        profiled = await _keep_apiserver_profile(apiserver_profile, len(watch.gpu_nodes()))
        ours = _operator_requests(metrics_url)
        requests = _diff(await _apiserver_requests(c.transport), before)
        await asyncio.sleep(steady_seconds)
        after = _operator_requests(metrics_url)
        await cache.stop()
    by_verb = _sub(ours["by_verb"], ours_before["by_verb"])
    by_resource = _sub(ours["by_resource"], ours_before["by_resource"])
    steady = _sub(after["by_verb"], ours["by_verb"])
    gpu = len(watch.gpu_nodes())
    done = ("rolled_out", "allocatable", *(("policy_ready",) if reference else ()))
    return {
        "seconds": max(reached[k] for k in done),
        "to_rolled_out_seconds": reached["rolled_out"],
        "to_allocatable_seconds": reached["allocatable"],
        "to_policy_ready_seconds": reached["policy_ready"],
        "to_labelled_seconds": reached["labelled"],
        "label_phase": labelled,
        **({"apiserver_profile": profiled} if profiled else {}),
        "quiet_after_seconds": settled,
        "daemonset_times": dict(sorted(watch.daemonsets.items())),
        "operator_cpu_seconds_to_ready": round(cpu - cpu_before, 2),
        "operator_cpu_seconds_before_policy": round(cpu_before, 2),
        "operator_peak_rss_mib": round(_peak_rss_mib(pid), 1),
        "operator_requests_by_verb": by_verb,
        "operator_requests_by_resource": by_resource,
        "operator_requests_by_code": _sub(ours["by_code"], ours_before["by_code"]),
        "operator_reconciles": _descending(_sub(ours["reconciles"], ours_before["reconciles"])),
        "operator_reconcile_seconds": _descending(
            _sub(ours["reconcile_seconds"], ours_before["reconcile_seconds"], digits=2)
        ),
        # Issue 14's "one label write per node" and "Events aggregated" targets (the
        # reference's client counts no request by resource).
        **(
            {}
            if reference
            else {
                "operator_node_writes_per_gpu_node": round(
                    by_resource.get("PATCH nodes", 0) / gpu, 2
                ),
                "operator_events_created": by_resource.get("POST events", 0),
                "operator_events_updated": by_resource.get("PATCH events", 0),
            }
        ),
        "apiserver_requests": requests,
        "steady_state_seconds": steady_seconds,
        "steady_state_writes": _writes(steady),
        "steady_state_requests_by_verb": steady,
        **processes,
        **({"pod_milestones": milestones.summary()} if milestones is not None else {}),
    }


def at_equal_speed(run: dict[str, Any], floor: dict[str, Any]) -> float | None:
    """`run`'s time over `floor`'s, each divided by how slow the machine was meanwhile
    (`SpeedProbe`): the ratio had both run on the same machine."""
    run_ms, floor_ms = run.get("probe_unit_ms"), floor.get("probe_unit_ms")
    if not run_ms or not floor_ms:
        return None
    return round(float(run["seconds"] / run_ms) / float(floor["seconds"] / floor_ms), 2)


def _compare(figures: dict[str, Any], key: str, run: dict[str, Any], base: dict[str, Any]) -> None:
    """`run`'s time over `base`'s as `key`, and as `<key>_at_equal_speed` where both runs
    carry the machine's speed."""
    figures[key] = round(run["seconds"] / base["seconds"], 2)
    equal = at_equal_speed(run, base)
    if equal is not None:
        figures[f"{key}_at_equal_speed"] = equal


def cpu_accounting(floor: dict[str, Any], operator: dict[str, Any]) -> dict[str, Any]:
    """Where the operator's run spent more CPU than the floor's, by process. On a machine
    the floor already keeps busy, time is CPU over cores: the run/floor ratio of total CPU
    is what the time ratio follows."""
    ours, theirs = operator["process_cpu_seconds"], floor["process_cpu_seconds"]
    extra = {p: round(ours.get(p, 0.0) - theirs.get(p, 0.0), 1) for p in {*ours, *theirs}}
    total_ours, total_theirs = sum(ours.values()), sum(theirs.values())
    return {
        "extra_by_process": _descending(extra),
        "extra_total": round(total_ours - total_theirs, 1),
        "total_ratio": round(total_ours / total_theirs, 3) if total_theirs else None,
    }


def _sub(
    after: dict[str, Any], before: dict[str, Any], digits: int | None = None
) -> dict[str, Any]:
    """What each count (or sum, rounded to `digits`) grew by, where it grew."""
    out = {k: v - before.get(k, 0) for k, v in after.items()}
    if digits is not None:
        out = {k: round(v, digits) for k, v in out.items()}
    return {k: v for k, v in out.items() if v}


def measure(
    nodes: int,
    steady_seconds: float,
    deadline_s: float,
    *,
    floor: bool,
    profile: bool,
    pods: bool = False,
    labelled_floor: bool = False,
    alongside: Alongside = Alongside(),
    operator_first: bool = False,
    os_mix: str = DEFAULT_OS,
    reference: Path | None = None,
) -> dict[str, Any]:
    """One floor (and labelled floor) and one operator run of `nodes`, back to back;
    `operator_first` runs the operator before the floors (`_measure_all` alternates, so a
    machine that drifts faster or slower over a batch favours neither side). `reference`
    (the folder `build_reference` gives): NVIDIA's operator runs between the two."""
    config = ClusterConfig(gpu_nodes=nodes, cpu_nodes=2, os=parse_os_list(os_mix))
    figures: dict[str, Any] = {"nodes": nodes}
    if os_mix != DEFAULT_OS:
        figures["os"] = os_mix
    if floor:
        figures["order"] = "operator first" if operator_first else "floor first"
    if not operator_first:
        _measure_floors(figures, config, deadline_s, floor, pods, labelled_floor, alongside)
    if reference is not None and not operator_first:
        _measure_operator(figures, config, steady_seconds, deadline_s, False, pods, reference)
    _measure_operator(figures, config, steady_seconds, deadline_s, profile, pods)
    if reference is not None and operator_first:
        _measure_operator(figures, config, steady_seconds, deadline_s, False, pods, reference)
    if operator_first:
        _measure_floors(figures, config, deadline_s, floor, pods, labelled_floor, alongside)
    return _report(figures, floor=floor)


def _measure_floors(
    figures: dict[str, Any],
    config: ClusterConfig,
    deadline_s: float,
    floor: bool,
    pods: bool,
    labelled_floor: bool,
    alongside: Alongside,
) -> None:
    nodes = figures["nodes"]
    if floor:
        with SimulatedCluster(config, startup_timeout=900, crds=crds()) as sim:
            figures["floor"] = asyncio.run(_floor(sim, deadline_s, pods=pods))
        f = figures["floor"]
        print(
            f"[{nodes}] floor: {f['seconds']}s (rolled out {f['to_rolled_out_seconds']}s, "
            f"allocatable {f['to_allocatable_seconds']}s)",
            flush=True,
        )
    if floor and labelled_floor:
        with SimulatedCluster(config, startup_timeout=900, crds=crds()) as sim:
            labelled = _floor(
                sim,
                deadline_s,
                pods=pods,
                labels_on_clock=True,
                alongside=alongside,
            )
            figures["labelled_floor"] = asyncio.run(labelled)
        lf = figures["labelled_floor"]
        _compare(figures, "labelled_floor_ratio", lf, figures["floor"])
        print(
            f"[{nodes}] labelled floor (nodes labelled on the clock{alongside.said()}): "
            f"{lf['seconds']}s (labelled {lf['to_labelled_seconds']}s), "
            f"{figures['labelled_floor_ratio']}x the floor (at equal machine speed "
            f"{figures.get('labelled_floor_ratio_at_equal_speed', '-')})",
            flush=True,
        )


def _measure_operator(
    figures: dict[str, Any],
    config: ClusterConfig,
    steady_seconds: float,
    deadline_s: float,
    profile: bool,
    pods: bool,
    reference: Path | None = None,
) -> None:
    """Ours, or NVIDIA's operator from the `reference` folder (figures under "reference")."""
    nodes = figures["nodes"]
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=900, crds=crds()) as sim:
        if reference is None:
            figures["sim_up_seconds"] = round(time.monotonic() - began, 1)

        asyncio.run(install(sim))
        metrics_port = free_port()
        profile_path = RESULTS / f"scale-profile-{nodes}.txt" if profile else None
        if reference is None:
            process = _start_operator(sim, metrics_port, profile_path)
        else:
            process = start_reference(
                sim, reference, namespace=NAMESPACE, metrics_port=metrics_port
            )
        pid = process.pid
        try:
            figures["operator" if reference is None else "reference"] = asyncio.run(
                _operator(
                    sim,
                    f"http://127.0.0.1:{metrics_port}/metrics",
                    pid,
                    steady_seconds,
                    deadline_s,
                    pods=pods,
                    reference=reference is not None,
                )
            )
        finally:
            # The operator first: the sampler writes its last counts as the operator exits.
            os.kill(pid, signal.SIGTERM)
            process.wait(120)
            # Our log (one INFO line per change it made) outlives the cluster's folder.
            if reference is None:
                shutil.copyfile(sim.workdir / "logs" / "gpu-operator.log", RESULTS / OPERATOR_LOG)
    if profile_path is not None:
        figures["profile"] = str(profile_path.relative_to(REPO))


def _report(figures: dict[str, Any], *, floor: bool) -> dict[str, Any]:
    """Compare and print one size's runs (whichever order they ran in)."""
    nodes = figures["nodes"]
    o = figures["operator"]
    if floor:
        _compare(figures, "ratio", o, figures["floor"])
        figures["cpu"] = cpu_accounting(figures["floor"], o)
    if "labelled_floor" in figures:
        lf = figures["labelled_floor"]
        _compare(figures, "ratio_to_labelled_floor", o, lf)
        figures["cpu_beyond_labelled_floor"] = cpu_accounting(lf, o)
    if "reference" in figures:
        _report_reference(figures, floor=floor)
    print(_run_line(figures, "operator", "ratio"), flush=True)
    print(f"[{nodes}] operator requests: {o['operator_requests_by_verb']}", flush=True)
    print(f"[{nodes}]   by answer: {o['operator_requests_by_code']}", flush=True)
    print(f"[{nodes}] operator reconciles: {_top(o['operator_reconciles'], 20)}", flush=True)
    print(f"[{nodes}]   their seconds: {o['operator_reconcile_seconds']}", flush=True)
    print(f"[{nodes}]   by resource: {_top(o['operator_requests_by_resource'], 20)}", flush=True)
    print(
        f"[{nodes}]   node writes per GPU node {o['operator_node_writes_per_gpu_node']}, "
        f"Events created {o['operator_events_created']}, "
        f"updated {o['operator_events_updated']}",
        flush=True,
    )
    print(f"[{nodes}] apiserver (all clients): {_top(o['apiserver_requests'])}", flush=True)
    if floor:
        print(f"[{nodes}] apiserver, floor: {_top(figures['floor']['apiserver_requests'])}")
    print(f"[{nodes}] steady state: {o['steady_state_requests_by_verb']}", flush=True)
    if floor:
        print(_cpu_line(nodes, "floor", figures["floor"]), flush=True)
    print(_cpu_line(nodes, "operator", o), flush=True)
    print(_cpu_line(nodes, "operator's label phase", o["label_phase"]), flush=True)
    if floor:
        print(_cpu_line(nodes, "floor's pre-labelling", figures["floor"]["prelabel"]), flush=True)
        extra = figures["cpu"]
        print(
            f"[{nodes}] CPU s the operator's run spent beyond the floor's: "
            f"{extra['extra_by_process']}; total {extra['extra_total']} "
            f"(run/floor total CPU {extra['total_ratio']}, time ratio {figures['ratio']})",
            flush=True,
        )
    if "labelled_floor" in figures:
        print(_cpu_line(nodes, "labelled floor", figures["labelled_floor"]), flush=True)
        beyond = figures["cpu_beyond_labelled_floor"]
        print(
            f"[{nodes}] CPU s the operator's run spent beyond the labelled floor's: "
            f"{beyond['extra_by_process']}; total {beyond['extra_total']} (run/labelled floor "
            f"total CPU {beyond['total_ratio']}, time ratio {figures['ratio_to_labelled_floor']})",
            flush=True,
        )
    for run in ("floor", "operator"):
        for ds, milestones in (figures.get(run) or {}).get("pod_milestones", {}).items():
            line = ", ".join(f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in milestones.items())
            print(f"[{nodes}] {run} pods of {ds} (first/median/last s): {line}", flush=True)
    if "profile" in figures:
        profile_path = REPO / figures["profile"]
        print(profile_top(profile_path, seconds_per_sample=PROFILE_INTERVAL), flush=True)
    return figures


def _run_line(figures: dict[str, Any], run: str, ratio: str) -> str:
    """One operator run's times, its ratio (`ratio` in `figures`), CPU and memory."""
    r = figures[run]
    name = "NVIDIA's operator" if run == "reference" else run
    return (
        f"[{figures['nodes']}] {name}: {r['seconds']}s (rolled out "
        f"{r['to_rolled_out_seconds']}s, allocatable {r['to_allocatable_seconds']}s, policy "
        f"ready {r['to_policy_ready_seconds']}s, labelled {r['to_labelled_seconds']}s), ratio "
        f"{figures.get(ratio, '-')} (at equal machine speed "
        f"{figures.get(f'{ratio}_at_equal_speed', '-')}), CPU "
        f"{r['operator_cpu_seconds_to_ready']}s, peak RSS {r['operator_peak_rss_mib']} MiB"
    )


def _report_reference(figures: dict[str, Any], *, floor: bool) -> None:
    nodes, r = figures["nodes"], figures["reference"]
    if floor:
        _compare(figures, "reference_ratio", r, figures["floor"])
        figures["reference_cpu"] = cpu_accounting(figures["floor"], r)
    print(_run_line(figures, "reference", "reference_ratio"), flush=True)
    print(f"[{nodes}] NVIDIA's operator requests: {r['operator_requests_by_verb']}", flush=True)
    print(f"[{nodes}]   its steady state: {r['steady_state_requests_by_verb']}", flush=True)
    print(f"[{nodes}] apiserver, NVIDIA's run: {_top(r['apiserver_requests'])}", flush=True)
    print(_cpu_line(nodes, "NVIDIA's operator", r), flush=True)
    if floor:
        extra = figures["reference_cpu"]
        print(
            f"[{nodes}] CPU s NVIDIA's run spent beyond the floor's: "
            f"{extra['extra_by_process']}; total {extra['extra_total']} "
            f"(run/floor total CPU {extra['total_ratio']}, time ratio "
            f"{figures['reference_ratio']})",
            flush=True,
        )


def profile_top(path: Path, n: int = 25, seconds_per_sample: float | None = None) -> str:
    """The top of a collapsed-stacks profile (`_cpu_profile.py`'s, or py-spy's raw
    format): self and inclusive shares of the samples, and the CPU seconds they stand for."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    cpu = "" if seconds_per_sample is None else f", {total * seconds_per_sample:.1f} CPU s"
    lines = [f"profile: {total} samples{cpu} ({path.name})", "  self%  frame"]
    lines += [f"  {100 * c / total:5.1f}  {f}" for f, c in own.most_common(n)]
    lines += ["  incl%  frame"]
    lines += [f"  {100 * c / total:5.1f}  {f}" for f, c in inclusive.most_common(n)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="100,1000", help="comma-separated cluster sizes")
    parser.add_argument("--steady-seconds", type=float, default=300.0)
    parser.add_argument("--deadline-seconds", type=float, default=1800.0)
    parser.add_argument("--profile", action="store_true", help="sample the operator's CPU time")
    parser.add_argument("--no-floor", action="store_true", help="the operator only")
    parser.add_argument(
        "--apiserver-profile",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="kube-apiserver's CPU profile over SECONDS from the operator's policy creation",
    )
    parser.add_argument("--policy", type=Path, default=SAMPLE_POLICY, help="ClusterPolicy YAML")
    parser.add_argument("--repeats", type=int, default=1, help="runs per size (median ratio)")
    parser.add_argument(
        "--labelled-floor",
        action="store_true",
        help="a third run: the floor with the nodes labelled inside its clock",
    )
    parser.add_argument(
        "--burn-share",
        type=float,
        default=0.0,
        help="with --labelled-floor: a process spends this share of a core during that run",
    )
    parser.add_argument(
        "--watchers",
        action="store_true",
        help="with --labelled-floor: the operator's informers alone run during that run",
    )
    parser.add_argument(
        "--os",
        default=DEFAULT_OS,
        help=f"the GPU nodes' OS mix, comma-separated ID+VERSION_ID (default {DEFAULT_OS})",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run NVIDIA's GPU Operator (hack/build-reference.sh); needs one --os",
    )
    parser.add_argument(
        "--dra-floor",
        action="store_true",
        help="only the DRA floor: NVIDIA's DRA stack created directly, timed until every "
        "GPU node publishes its ResourceSlice (printed, no results file)",
    )
    parser.add_argument(
        "--dra",
        action="store_true",
        help="the DRA floor, then the operator given the reference's GPUCluster sample on a "
        "fresh cluster, timed to the same end, with its CPU, memory and both timelines "
        "(results file scale-dra-<nodes>.json)",
    )
    parser.add_argument(
        "--pods",
        action="store_true",
        help="also time each operand pod (created, bound, Ready) and print them per DaemonSet",
    )
    args = parser.parse_args()
    if args.reference and len(set(parse_os_list(args.os))) > 1:
        parser.error(
            f"--reference needs the GPU nodes on one OS, not {args.os!r}: NVIDIA's operator "
            "renders one driver DaemonSet, for the OS of the first GPU node it lists "
            "(pass --os ubuntu22.04)"
        )
    if args.dra_floor or args.dra:
        _measure_dra_floors(args, [int(n) for n in args.nodes.split(",")], operator=args.dra)
        return
    POLICY.update(yaml.safe_load(args.policy.read_text()))
    APISERVER_PROFILE_SECONDS[0] = args.apiserver_profile
    args.reference_folder = build_reference() if args.reference else None
    sizes = [int(n) for n in args.nodes.split(",")]
    PROBES.append(SpeedProbe())
    try:
        runs = _measure_all(args, sizes)
    finally:
        PROBES.pop().close()
    figures: dict[str, Any] = {"runs": runs}
    if args.repeats > 1 and not args.no_floor:
        figures["medians"] = {str(n): _medians([r for r in runs if r["nodes"] == n]) for n in sizes}
        for n, m in figures["medians"].items():
            print(
                f"[{n}] {args.repeats} runs: ratio median {m['ratio']} (each {m['ratios']}), "
                f"floor median {m['floor_seconds']}s, operator median {m['operator_seconds']}s, "
                f"CPU median {m['operator_cpu_seconds']}s",
                flush=True,
            )
            if "ratio_at_equal_speed" in m:
                print(
                    f"[{n}] at equal machine speed: ratio median {m['ratio_at_equal_speed']} "
                    f"(each {m['ratio_at_equal_speed_each']})",
                    flush=True,
                )
            if "reference_ratio" in m:
                print(
                    f"[{n}] NVIDIA's operator / floor median {m['reference_ratio']} (each "
                    f"{m['reference_ratio_each']}; at equal machine speed "
                    f"{m.get('reference_ratio_at_equal_speed_each', '-')}), CPU median "
                    f"{m.get('reference_cpu_seconds', '-')}s",
                    flush=True,
                )
            if "labelled_floor_ratio" in m:
                print(
                    f"[{n}] labelled floor / floor median {m['labelled_floor_ratio']} "
                    f"(each {m['labelled_floor_ratio_each']}); operator / labelled floor median "
                    f"{m['ratio_to_labelled_floor']} (each {m['ratio_to_labelled_floor_each']})",
                    flush=True,
                )
    finish("scale" if len(sizes) > 1 else f"scale-{sizes[0]}", figures)


def _measure_dra_floors(
    args: argparse.Namespace, sizes: list[int], *, operator: bool = False
) -> None:
    """The DRA floor (`_dra_floor`) of each size, `--repeats` times, and with `operator` the
    GPUCluster run (`_dra_operator`) beside each, each with its timeline (`_dra_timeline`).
    With `operator` the figures go to `scale-dra-<nodes>.json` (one size) through `finish`;
    the floor alone is printed, not kept."""
    runs = []
    for nodes in sizes:
        for _ in range(args.repeats):
            config = ClusterConfig(gpu_nodes=nodes, cpu_nodes=2, os=parse_os_list(args.os))
            load = _load_average()
            with SimulatedCluster(config, startup_timeout=900) as sim:
                tally = CpuTally({**sim.pids(), "bench": os.getpid()})
                run = asyncio.run(dra_floor(sim, args.deadline_seconds, tally))
            run["nodes"] = nodes
            run["load_average"] = load
            print(
                f"[{nodes}] DRA floor: {run['published']}/{run['gpu_nodes']} GPU nodes "
                f"published their ResourceSlice in {run['seconds']}s (load average {load})\n"
                f"{describe(run['timeline'])}",
                flush=True,
            )
            if operator:
                load = _load_average()
                run["gpu_cluster"] = _gpu_cluster_run(config, args.deadline_seconds)
                ours = run["gpu_cluster"]
                ours["load_average"] = load
                ratio = round(ours["seconds"] / run["seconds"], 2) if run["seconds"] else None
                run["ratio"] = ratio
                print(
                    f"[{nodes}] GPUCluster: {ours['published']}/{ours['gpu_nodes']} GPU nodes "
                    f"published their ResourceSlice in {ours['seconds']}s ({ratio}x the floor; "
                    f"load average {load}); operator CPU {ours['operator_cpu_seconds']}s, peak "
                    f"RSS {ours['operator_peak_rss_mib']} MiB\n{describe(ours['timeline'])}",
                    flush=True,
                )
            runs.append(run)
    if not operator:
        print(json.dumps({"benchmark": "scale-dra-floor", "runs": runs}), flush=True)
        return
    figures: dict[str, Any] = {"runs": runs, "medians": {}}
    for n in sizes:
        of_size = [r for r in runs if r["nodes"] == n]
        m = _dra_medians(of_size)
        figures["medians"][str(n)] = m
        print(
            f"[{n}] {len(of_size)} runs: GPUCluster/floor median {m['ratio']} (each "
            f"{m['ratios']}), floor median {m['floor_seconds']}s, GPUCluster median "
            f"{m['gpu_cluster_seconds']}s, operator CPU median {m['operator_cpu_seconds']}s, "
            f"peak RSS max {m['operator_peak_rss_mib']} MiB",
            flush=True,
        )
    finish("scale-dra" if len(sizes) > 1 else f"scale-dra-{sizes[0]}", figures)


def _load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages as a run starts (it is shared)."""
    return [round(x, 2) for x in os.getloadavg()]


def _dra_medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Over repeated `--dra` pairs of one size: the ratios (median, lowest, highest), the
    seconds and the operator's CPU and peak memory."""
    ratios = [r["ratio"] for r in runs if r.get("ratio") is not None]
    ours = [r["gpu_cluster"] for r in runs]
    return {
        "ratios": ratios,
        "ratio": round(statistics.median(ratios), 2) if ratios else None,
        "ratio_range": [min(ratios), max(ratios)] if ratios else None,
        "floor_seconds": round(statistics.median(r["seconds"] for r in runs), 1),
        "gpu_cluster_seconds": round(statistics.median(o["seconds"] for o in ours), 1),
        "operator_cpu_seconds": round(
            statistics.median(o["operator_cpu_seconds"] or 0.0 for o in ours), 2
        ),
        "operator_peak_rss_mib": max(o["operator_peak_rss_mib"] for o in ours),
    }


def _gpu_cluster_run(config: ClusterConfig, deadline_s: float) -> dict[str, Any]:
    """The operator serving the GPUCluster sample on a fresh cluster; its CPU on the clock
    and its peak memory, as the ClusterPolicy run reports them."""
    with SimulatedCluster(config, startup_timeout=900, crds=crds()) as sim:
        asyncio.run(install(sim))
        asyncio.run(prepare(sim))
        metrics_port = free_port()
        process = _start_operator(sim, metrics_port, None)
        try:
            asyncio.run(_serving(f"http://127.0.0.1:{metrics_port}/metrics", 120))
            pids = {**sim.pids(), "bench": os.getpid(), "operator": process.pid}
            run = asyncio.run(gpu_cluster_run(sim, deadline_s, CpuTally(pids)))
            run["operator_cpu_seconds"] = run["process_cpu_seconds"].get("operator")
            run["operator_peak_rss_mib"] = round(_peak_rss_mib(process.pid), 1)
        finally:
            process.terminate()
            process.wait(120)
            # Its log (one INFO line per change it made) outlives the cluster's folder.
            shutil.copyfile(sim.workdir / "logs" / "gpu-operator.log", RESULTS / DRA_OPERATOR_LOG)
    return run


def _measure_all(args: argparse.Namespace, sizes: list[int]) -> list[dict[str, Any]]:
    return [
        measure(
            n,
            args.steady_seconds,
            args.deadline_seconds,
            floor=not args.no_floor,
            profile=args.profile,
            pods=args.pods,
            labelled_floor=args.labelled_floor,
            alongside=Alongside(args.burn_share, args.watchers),
            operator_first=repeat % 2 == 1,
            os_mix=args.os,
            reference=args.reference_folder,
        )
        for n in sizes
        for repeat in range(args.repeats)
    ]


def _median_of(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """`key`'s median over the runs that have it, and each value (`<key>_each`)."""
    values = [r[key] for r in runs if key in r]
    if not values:
        return {}
    return {key: round(statistics.median(values), 2), f"{key}_each": values}


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over repeated runs of one size (each ratio is of a floor
    and an operator run back to back, so a slow spell of the machine touches both)."""
    return {
        "ratios": [r["ratio"] for r in runs],
        "ratio": round(statistics.median(r["ratio"] for r in runs), 2),
        "floor_seconds": round(statistics.median(r["floor"]["seconds"] for r in runs), 1),
        "operator_seconds": round(statistics.median(r["operator"]["seconds"] for r in runs), 1),
        "operator_cpu_seconds": round(
            statistics.median(r["operator"]["operator_cpu_seconds_to_ready"] for r in runs), 2
        ),
        "cpu_total_ratios": [r["cpu"]["total_ratio"] for r in runs],
        **_median_of(runs, "ratio_at_equal_speed"),
        **_median_of(runs, "labelled_floor_ratio"),
        **_median_of(runs, "labelled_floor_ratio_at_equal_speed"),
        **_median_of(runs, "ratio_to_labelled_floor"),
        **_median_of(runs, "ratio_to_labelled_floor_at_equal_speed"),
        **_median_of(runs, "reference_ratio"),
        **_median_of(runs, "reference_ratio_at_equal_speed"),
        **(
            {
                "reference_cpu_seconds": round(
                    statistics.median(
                        r["reference"]["operator_cpu_seconds_to_ready"] for r in runs
                    ),
                    2,
                )
            }
            if all("reference" in r for r in runs)
            else {}
        ),
    }


if __name__ == "__main__":
    main()
