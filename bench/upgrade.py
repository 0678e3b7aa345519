"""Driver upgrade: time to upgrade 100 simulated GPU nodes, and the operator's share of it.

A simulated cluster (real control plane, kwok nodes, simulated GPUs) runs `gpu-operator run`
as a process, as in its pod. For maxParallelUpgrades 1 and 10, the ClusterPolicy's driver
version changes; the benchmark measures, through its own watch, how long until every node
runs the new driver and is back in `upgrade-done`.

Then, in the same run and on the same cluster, the **floor**: the operator stopped, the
benchmark changes the driver DaemonSet's image itself and makes the walk's own API calls
directly, `--floor-parallel` nodes at a time (10): cordon, delete the driver pod, wait for
its replacement Ready, uncordon. The ratio is the operator's time at that
maxParallelUpgrades over the floor's. A second floor adds the steps the operator's walk
takes for safety: the device plugin paused and the node's GPUs gone before the driver
restarts, the validator paused with it, and both resumed once the new driver is ready,
the node uncordoned once a new validator is Ready (`floor_with_safety_steps`).

The operator's share is how long the operator took to act once it could: for every action
it takes on a node (a state change, a cordon, a pod it deletes or evicts), the time since
the last thing that happened on that node (any node, for starting an upgrade, which waits
for a slot) that the action could have been waiting for: the previous step, a pod gone, a
new driver pod ready. Everything else (pods terminating, the DaemonSet controller creating
the new driver pod, kwok making it ready) is the cluster's share.

    .venv/bin/python bench/upgrade.py [--nodes 100] [--parallel 1,10] [--floor-parallel 10]

Prints figures as it goes; the last line is one JSON object (also bench/results/upgrade.json).

`--bad-version` runs another scenario instead: a driver version every node fails to
validate (the simulator's `failing-driver-versions` marker: the driver pod turns Ready, the
validator never does), walked with `--bad-parallel` (10) nodes at a time, no unavailability
limit and `failureBudget` `--budget` (2), the operator's validation timeout cut to
`--validation-timeout` seconds. It counts the nodes that ever left service (admitted to the
walk, cordoned, or failed; the target is at most budget + maxParallelUpgrades) and times,
from the first node seen `upgrade-failed`, until the policy says `UpgradeHalted`, and until
no node is left in the walk (bench/results/upgrade-bad-version.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish, percentile
from components.upgrade import IN_PROGRESS, STATE_LABEL
from gpusim import ClusterConfig, SimulatedCluster, apply_crds, load_documents, parse_os_list
from reconciler import GVK, Cache, Client, Object, PatchType, labels_of, name_of
from reconciler.envtest import free_port
from reconciler.errors import NotFound
from reconciler.lowlevel import RESTMapper, Transport

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "gpu-operator"
NODE = GVK("", "v1", "Node")
POD = GVK("", "v1", "Pod")
REVISION = GVK("apps", "v1", "ControllerRevision")
DAEMONSET = GVK("apps", "v1", "DaemonSet")
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
POLICY = "cluster-policy"
GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
GPU = "nvidia.com/gpu"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
VALIDATOR_LABEL = "nvidia.com/gpu.deploy.operator-validator"
DEVICE_PLUGIN_PAUSED = "paused-for-driver-upgrade"
VALIDATOR_APP = "nvidia-operator-validator"
IN_PROGRESS_VALUES = frozenset(s.value for s in IN_PROGRESS)


@dataclass
class Recorder:
    """Every relevant change, timestamped on arrival, and the operator's actions among them."""

    cache: Cache
    events: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    """node -> [(time, what)]: everything that happened on it."""
    actions: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, node, what): what the operator did."""
    any_node: list[float] = field(default_factory=list)
    """Times of state changes anywhere (a slot freeing lets another node start)."""
    _nodes: dict[str, tuple[str, bool]] = field(default_factory=dict)
    _pods: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    _gpus: dict[str, str] = field(default_factory=dict)

    def reset(self) -> None:
        self.events.clear()
        self.actions.clear()
        self.any_node.clear()

    def on_add(self, obj: Object) -> None:
        self._changed(obj, deleted=False)

    def on_update(self, old: Object, new: Object) -> None:
        self._changed(new, deleted=False)

    def on_delete(self, obj: Object) -> None:
        self._changed(obj, deleted=True)

    def _changed(self, obj: Object, *, deleted: bool) -> None:
        now = time.monotonic()
        kind = obj.get("kind")
        if kind == "Node":
            name = name_of(obj)
            state = (
                labels_of(obj).get(STATE_LABEL, ""),
                bool((obj.get("spec") or {}).get("unschedulable")),
            )
            gpus = str(((obj.get("status") or {}).get("allocatable") or {}).get(GPU, "0"))
            if self._gpus.get(name, gpus) != gpus:
                # The device plugin leaving or coming back: the cluster's doing.
                self.events.setdefault(name, []).append((now, f"gpus {gpus}"))
            self._gpus[name] = gpus
            old = self._nodes.get(name)
            self._nodes[name] = state
            if old is not None and old != state:
                # Every node write of the upgrade is the operator's.
                what = f"node {old[0] or '-'}->{state[0] or '-'}"
                self.actions.append((now, name, what))
                self.events.setdefault(name, []).append((now, what))
                self.any_node.append(now)
            return
        if kind == "ControllerRevision":
            for events in self.events.values():
                events.append((now, "revision"))
            self.any_node.append(now)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if not node:
            return
        key = f"{obj['metadata'].get('namespace')}/{name_of(obj)}"
        terminating = bool(obj["metadata"].get("deletionTimestamp"))
        ready = (obj.get("status") or {}).get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )
        old_pod = self._pods.get(key)
        self._pods[key] = (terminating, ready)
        if deleted:
            self._pods.pop(key, None)
            self.events.setdefault(node, []).append((now, f"pod gone {key}"))
        elif old_pod is None:
            self.events.setdefault(node, []).append((now, f"pod new {key}"))
        elif terminating and not old_pod[0]:
            # A pod asked to go: on nodes in an upgrade, the operator asked.
            state = self._nodes.get(node, ("", False))[0]
            if state in IN_PROGRESS_VALUES:
                self.actions.append((now, node, f"delete {key}"))
            self.events.setdefault(node, []).append((now, f"pod terminating {key}"))
        elif ready != old_pod[1]:
            self.events.setdefault(node, []).append((now, f"pod ready={ready} {key}"))

    def shares(self, since: float) -> list[tuple[str, float]]:
        """For each operator action after `since`: (what, seconds since the event it
        followed)."""
        out: list[tuple[str, float]] = []
        for t, node, what in self.actions:
            if t < since:
                continue
            before = [e for e, _ in self.events.get(node, []) if e < t]
            if what.startswith("node upgrade-required->"):
                # Admission (its write may take the node on past cordon-required at once).
                before += [e for e in self.any_node if e < t]
            if before:
                kind = what if what.startswith("node") else "delete " + what.rsplit("-", 1)[0]
                out.append((kind, t - max(before)))
        return out


def _cpu_seconds(pid: int) -> float:
    """utime + stime of the operator's process: the figure a loaded machine leaves intact."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _driver_ready_everywhere(cache: Cache, version: str, nodes: set[str]) -> bool:
    drivers = [
        p
        for p in cache.list(POD, namespace=NAMESPACE)
        if labels_of(p).get("app.kubernetes.io/component") == "nvidia-driver"
        and not p["metadata"].get("deletionTimestamp")
    ]
    return (
        {p["spec"].get("nodeName") for p in drivers} == nodes
        and len(drivers) == len(nodes)
        and all(
            version in p["spec"]["containers"][0]["image"]
            and (p.get("status") or {}).get("phase") == "Running"
            for p in drivers
        )
    )


def _rolled_out(cache: Cache) -> bool:
    """Every DaemonSet of the operator's namespace at its newest template, all pods ready."""
    sets = cache.list(DAEMONSET, namespace=NAMESPACE)
    for ds in sets:
        status = ds.get("status") or {}
        desired = status.get("desiredNumberScheduled", -1)
        if (
            status.get("observedGeneration") != ds["metadata"].get("generation")
            or status.get("numberReady") != desired
            or status.get("updatedNumberScheduled", desired) != desired
        ):
            return False
    return bool(sets)


def _all_done(cache: Cache, nodes: set[str]) -> bool:
    return all(
        labels_of(n).get(STATE_LABEL) == "upgrade-done"
        for n in cache.list(NODE)
        if name_of(n) in nodes
    )


async def _wait(check: Any, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what} after {seconds:.0f}s")
        await asyncio.sleep(0.1)


def _driver_pod(cache: Cache, node: str) -> Object | None:
    return _pod_of(cache, node, "app.kubernetes.io/component", "nvidia-driver")


def _pod_ready(pod: Object) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _pod_of(cache: Cache, node: str, label: str, value: str) -> Object | None:
    """The pod in the operator's namespace on `node` whose `label` is `value`."""
    for p in cache.list(POD, namespace=NAMESPACE):
        if (
            p["spec"].get("nodeName") == node
            and labels_of(p).get(label) == value
            and not p["metadata"].get("deletionTimestamp")
        ):
            return p
    return None


async def _replace_pod(
    c: Client, cache: Cache, node: str, find: Any, ready: Any, what: str
) -> None:
    """Delete the pod `find()` returns and wait until its replacement is `ready`."""
    old = find()
    if old is not None:
        with contextlib.suppress(NotFound):
            await c.delete(POD, name_of(old), namespace=NAMESPACE)
    old_uid = old["metadata"]["uid"] if old is not None else None

    def replaced() -> bool:
        pod = find()
        return pod is not None and pod["metadata"]["uid"] != old_uid and ready(pod)

    await _wait(replaced, f"the new {what} pod on {node}", 600)


async def _floor(
    c: Client, cache: Cache, nodes: set[str], version: str, parallel: int, *, safe: bool
) -> float:
    """The walk's own API calls made directly, `parallel` nodes at a time (a slot frees as
    soon as a node is uncordoned, as in the operator's admission): seconds from the driver
    DaemonSet's change until every node runs the new driver, Ready, uncordoned.

    `safe` adds the steps the operator's walk takes so that no GPU pod runs while the
    driver restarts and the new driver is validated (issue #15), as the walk takes them:
    the device plugin and the validator paused with the cordon, the node's GPUs gone from
    its allocatable before the driver pod is deleted, both resumed once the new driver is
    Ready, and the uncordon once a new validator pod is Ready."""
    began = time.monotonic()
    for ds in await c.list_live(DAEMONSET, namespace=NAMESPACE):
        template = ds["spec"]["template"]
        if (template["metadata"].get("labels") or {}).get(
            "app.kubernetes.io/component"
        ) != "nvidia-driver":
            continue
        containers = template["spec"]["containers"]
        image = containers[0]["image"]
        # The driver image's tag is <version>-<os>: keep the OS suffix.
        name, _, tag = image.rpartition(":")
        suffix = tag.split("-", 1)[1] if "-" in tag else ""
        new = f"{name}:{version}" + (f"-{suffix}" if suffix else "")
        body = {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": new}
        await c.patch(
            DAEMONSET, name_of(ds), [body], namespace=NAMESPACE, patch_type=PatchType.JSON
        )
    gate = asyncio.Semaphore(parallel)

    def new_driver(pod: Object) -> bool:
        return version in pod["spec"]["containers"][0]["image"] and _pod_ready(pod)

    def clients(value: str) -> Object:
        return {"metadata": {"labels": {DEVICE_PLUGIN_LABEL: value, VALIDATOR_LABEL: value}}}

    async def walk(node: str) -> None:
        async with gate:
            before = _pod_of(cache, node, "app", VALIDATOR_APP)
            old_validator = before["metadata"]["uid"] if before is not None else None
            cordon: Object = {"spec": {"unschedulable": True}}
            if safe:
                cordon |= clients(DEVICE_PLUGIN_PAUSED)
            await c.patch(NODE, node, cordon)
            if safe:

                def no_gpus() -> bool:
                    found = cache.get(NODE, node) or {}
                    allocatable = (found.get("status") or {}).get("allocatable") or {}
                    return str(allocatable.get(GPU, "0")) == "0"

                await _wait(no_gpus, f"{node} offering no GPUs", 600)
            await _replace_pod(
                c, cache, node, lambda: _driver_pod(cache, node), new_driver, "driver"
            )
            if safe:
                await c.patch(NODE, node, clients("true"))

                def validated() -> bool:
                    pod = _pod_of(cache, node, "app", VALIDATOR_APP)
                    return (
                        pod is not None
                        and pod["metadata"]["uid"] != old_validator
                        and _pod_ready(pod)
                    )

                await _wait(validated, f"a new validator Ready on {node}", 600)
            await c.patch(NODE, node, {"spec": {"unschedulable": False}})

    await asyncio.gather(*(walk(n) for n in sorted(nodes)))
    return time.monotonic() - began


async def _set_policy(
    c: Client, version: str, parallel: int, *, failure_budget: int | None = None
) -> None:
    upgrade: dict[str, Any] = {
        "autoUpgrade": True,
        "maxParallelUpgrades": parallel,
        "maxUnavailable": "100%",
    }
    if failure_budget is not None:
        upgrade["failureBudget"] = failure_budget
    spec = {"driver": {"version": version, "upgradePolicy": upgrade}}
    try:
        await c.get_live(CLUSTER_POLICY, POLICY)
    except NotFound:
        await c.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": POLICY},
                "spec": spec,
            }
        )
        return
    await c.patch(CLUSTER_POLICY, POLICY, {"spec": spec})


def _start_operator(
    sim: SimulatedCluster, log: Any, *, upgrade_only: bool
) -> subprocess.Popen[bytes]:
    """`gpu-operator run` as in its pod (warnings only: the log is not what we measure), or
    a process running the upgrade controller alone (`--upgrade-only`)."""
    argv = (
        [sys.executable, __file__, "--serve-upgrade-only", str(sim.kubeconfig)]
        if upgrade_only
        else [
            sys.executable,
            "-m",
            "components.cli",
            "run",
            f"--kubeconfig={sim.kubeconfig}",
            f"--namespace={NAMESPACE}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            "--log-level=warning",
        ]
    )
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def _serve_upgrade_only(kubeconfig: str) -> None:
    """The operator process of `--upgrade-only`: one manager, the upgrade controller alone."""
    import signal

    from components.run import api_client
    from components.upgrade import UpgradeController
    from reconciler import Manager

    api = await api_client(kubeconfig)
    async with api:
        manager = Manager(api, field_manager="gpu-operator", bind_address=None)
        UpgradeController(manager, namespace=NAMESPACE)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, manager.stop)
        await manager.run()


def _daemonset(name: str, labels: dict[str, str], image: str, on_delete: bool) -> Object:
    """Stand-ins for what the ClusterPolicy controller renders (`--upgrade-only`)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": labels["app"]}},
            "updateStrategy": {"type": "OnDelete" if on_delete else "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {GPU_LABEL: "true"},
                    "containers": [{"name": "main", "image": image}],
                },
            },
        },
    }


async def _set_driver(c: Client, version: str) -> None:
    """`--upgrade-only`: change the driver DaemonSet's template as the policy controller
    would for a new driver version (and create the operand DaemonSets the first time)."""
    sets = [
        _daemonset(
            "nvidia-driver-daemonset",
            {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
            f"nvcr.io/nvidia/driver:{version}-ubuntu22.04",
            True,
        ),
        _daemonset(
            "nvidia-operator-validator",
            {"app": "nvidia-operator-validator"},
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.0",
            False,
        ),
    ]
    for ds in sets:
        await c.apply(ds)


async def bench(
    nodes: int,
    parallels: list[int],
    limit: float,
    *,
    upgrade_only: bool,
    floor_parallel: int,
    timeline: Path | None = None,
) -> dict[str, Any]:
    config = ClusterConfig(
        gpu_nodes=nodes, cpu_nodes=0, gpus_per_node=1, os=parse_os_list("ubuntu22.04")
    )
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=600) as sim:
        print(f"simulated cluster: {nodes} GPU nodes in {time.monotonic() - began:.1f}s")
        log = (sim.workdir / "logs" / "gpu-operator.log").open("ab")
        operator = _start_operator(sim, log, upgrade_only=upgrade_only)
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
                recorder = Recorder(cache)
                cache.informer(DAEMONSET, namespace=NAMESPACE)
                for gvk, ns in ((NODE, None), (POD, None), (REVISION, NAMESPACE)):
                    cache.informer(gvk, namespace=ns).add_handler(recorder)
                await cache.start()
                await cache.wait_for_sync(120)
                gpu = {name_of(n) for n in cache.list(NODE) if labels_of(n).get(GPU_LABEL)}

                version = "595.91.07"
                await _set_policy(c, version, parallels[0])
                if upgrade_only:
                    await _set_driver(c, version)
                t0 = time.monotonic()
                # Every operand rolled out, not only the drivers: the tail of the first
                # rollout would otherwise share the cluster with the walk's first nodes.
                await _wait(
                    lambda: (
                        _driver_ready_everywhere(cache, version, gpu)
                        and _all_done(cache, gpu)
                        and _rolled_out(cache)
                    ),
                    "the first rollout",
                    limit,
                )
                print(f"first rollout (operands and drivers): {time.monotonic() - t0:.1f}s")

                runs = []
                for i, parallel in enumerate(parallels):
                    version = f"595.100.{i + 1:02d}"
                    await _set_policy(c, version, parallel)
                    await asyncio.sleep(1)  # the policy is read before the change lands
                    if upgrade_only:
                        await _set_driver(c, version)
                    recorder.reset()
                    cpu_before = _cpu_seconds(operator.pid)
                    start = time.monotonic()
                    peak = 0

                    def done(version: str = version) -> bool:
                        nonlocal peak
                        states = [labels_of(n).get(STATE_LABEL) for n in cache.list(NODE)]
                        peak = max(peak, sum(1 for s in states if s in IN_PROGRESS_VALUES))
                        return _driver_ready_everywhere(cache, version, gpu) and _all_done(
                            cache, gpu
                        )

                    await _wait(done, f"the rollout with maxParallelUpgrades {parallel}", limit)
                    seconds = time.monotonic() - start
                    cpu = _cpu_seconds(operator.pid) - cpu_before
                    by_action = recorder.shares(start)
                    shares = [d for _, d in by_action]
                    kinds: dict[str, list[float]] = {}
                    for kind, d in by_action:
                        kinds.setdefault(kind, []).append(d)
                    slowest = sorted(
                        ((round(percentile(v, 99) * 1000, 1), k, len(v)) for k, v in kinds.items()),
                        reverse=True,
                    )[:4]
                    run = {
                        "max_parallel_upgrades": parallel,
                        "seconds": round(seconds, 1),
                        "seconds_per_node": round(seconds / len(gpu), 2),
                        "operator_cpu_seconds": round(cpu, 2),
                        "peak_in_progress": peak,
                        "operator_actions": len(shares),
                        "operator_share_p50_ms": round(percentile(shares, 50) * 1000, 1),
                        "operator_share_p99_ms": round(percentile(shares, 99) * 1000, 1),
                        "operator_share_max_ms": round(max(shares) * 1000, 1) if shares else None,
                        "operator_share_of_time": round(sum(shares) / seconds, 3)
                        if parallel == 1
                        else None,
                        "slowest_actions_p99_ms": {k: p99 for p99, k, _ in slowest},
                    }
                    runs.append(run)
                    if timeline is not None:
                        _write_timeline(timeline, parallel, recorder, start)
                    print(
                        f"maxParallelUpgrades {parallel}: {seconds:.1f}s for {len(gpu)} nodes "
                        f"(peak {peak} in progress), operator CPU {cpu:.2f}s; reacted in p50 "
                        f"{run['operator_share_p50_ms']} ms, p99 {run['operator_share_p99_ms']} ms "
                        f"over {len(shares)} actions"
                    )
                floor: dict[str, Any] | None = None
                safe_floor: dict[str, Any] | None = None
                if floor_parallel:
                    _stop(operator)
                    same = [r for r in runs if r["max_parallel_upgrades"] == floor_parallel]
                    for safe, version in ((False, "595.200.01"), (True, "595.200.02")):
                        seconds = await _floor(c, cache, gpu, version, floor_parallel, safe=safe)
                        found = {"parallel": floor_parallel, "seconds": round(seconds, 1)}
                        if same:
                            found["ratio"] = round(same[0]["seconds"] / seconds, 2)
                        steps = (
                            "cordon and pause the device plugin and the validator, wait "
                            "for no GPUs, replace the driver pod, resume both, wait for a new "
                            "validator Ready, uncordon"
                            if safe
                            else "cordon, delete the driver pod, wait for its replacement "
                            "Ready, uncordon"
                        )
                        print(
                            f"{'safe floor' if safe else 'floor'}, {floor_parallel} at a time "
                            f"({steps}): {seconds:.1f}s; operator/floor {found.get('ratio', '-')}"
                        )
                        if safe:
                            safe_floor = found
                        else:
                            floor = found
                await cache.stop()
        finally:
            _stop(operator)
            log.close()
    return {
        "nodes": nodes,
        "operator": "upgrade controller alone" if upgrade_only else "gpu-operator run",
        "runs": runs,
        "floor": floor,
        "floor_with_safety_steps": safe_floor,
    }


BAD_VERSION = "600.10.01"


@dataclass
class LeftService:
    """Which nodes ever left service, and when the first failed, from every node event."""

    began: float = 0.0
    nodes: set[str] = field(default_factory=set)
    first_failure: float | None = None
    in_walk: set[str] = field(default_factory=set)

    def on_add(self, obj: Object) -> None:
        self.on_update(obj, obj)

    def on_update(self, old: Object, new: Object) -> None:
        if not self.began or not labels_of(new).get(GPU_LABEL):
            return
        name, state = name_of(new), labels_of(new).get(STATE_LABEL, "")
        if state in IN_PROGRESS_VALUES and state != "upgrade-failed":
            self.in_walk.add(name)
        else:
            self.in_walk.discard(name)
        if state in IN_PROGRESS_VALUES or state == "upgrade-failed":
            self.nodes.add(name)
        if (new.get("spec") or {}).get("unschedulable"):
            self.nodes.add(name)
        if state == "upgrade-failed" and self.first_failure is None:
            self.first_failure = time.monotonic()

    def on_delete(self, obj: Object) -> None:
        pass


def _halted(cache: Cache) -> dict[str, Any] | None:
    policy = cache.get(CLUSTER_POLICY, POLICY) or {}
    for c in ((policy.get("status") or {}).get("upgrade") or {}).get("conditions") or []:
        if c.get("type") == "UpgradeHalted" and c.get("status") == "True":
            return dict(c)
    return None


async def bad_version(
    nodes: int, parallel: int, budget: int, validation_timeout: float, limit: float
) -> dict[str, Any]:
    """A version that fails validation on every node, against the failure budget."""
    from components.run import VALIDATION_TIMEOUT_ENV

    config = ClusterConfig(
        gpu_nodes=nodes, cpu_nodes=0, gpus_per_node=1, os=parse_os_list("ubuntu22.04")
    )
    began = time.monotonic()
    with SimulatedCluster(config, startup_timeout=600) as sim:
        print(f"simulated cluster: {nodes} GPU nodes in {time.monotonic() - began:.1f}s")
        log = (sim.workdir / "logs" / "gpu-operator.log").open("ab")
        os.environ[VALIDATION_TIMEOUT_ENV] = str(validation_timeout)
        operator = _start_operator(sim, log, upgrade_only=False)
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
                seen = LeftService()
                cache.informer(DAEMONSET, namespace=NAMESPACE)
                cache.informer(POD)
                cache.informer(CLUSTER_POLICY)
                cache.informer(NODE).add_handler(seen)
                await cache.start()
                await cache.wait_for_sync(120)
                gpu = {name_of(n) for n in cache.list(NODE) if labels_of(n).get(GPU_LABEL)}
                await _set_policy(c, "595.91.07", parallel)
                t0 = time.monotonic()
                await _wait(
                    lambda: (
                        _driver_ready_everywhere(cache, "595.91.07", gpu)
                        and _all_done(cache, gpu)
                        and _rolled_out(cache)
                    ),
                    "the first rollout",
                    limit,
                )
                print(f"first rollout (operands and drivers): {time.monotonic() - t0:.1f}s")

                await sim.set_failing_driver_versions([BAD_VERSION])
                seen.began = time.monotonic()
                await _set_policy(c, BAD_VERSION, parallel, failure_budget=budget)
                await _wait(lambda: _halted(cache) is not None, "UpgradeHalted", limit)
                halted_at = time.monotonic()
                await _wait(lambda: not seen.in_walk, "no node left in the walk", limit)
                settled_at = time.monotonic()
                await asyncio.sleep(10)  # a halt that leaked would admit more nodes now
                condition = _halted(cache) or {}
                failed = sorted(
                    name_of(n)
                    for n in cache.list(NODE)
                    if labels_of(n).get(STATE_LABEL) == "upgrade-failed"
                )
                await cache.stop()
        finally:
            _stop(operator)
            log.close()
    first = seen.first_failure or halted_at
    figures = {
        "nodes": nodes,
        "max_parallel_upgrades": parallel,
        "failure_budget": budget,
        "validation_timeout_seconds": validation_timeout,
        "left_service": len(seen.nodes),
        "target_left_service_at_most": budget + parallel,
        "failed": len(failed),
        "seconds_first_failure_to_halted": round(halted_at - first, 2),
        "seconds_first_failure_to_walk_empty": round(settled_at - first, 2),
        "halted_message": str(condition.get("message", ""))[:300],
    }
    print(
        f"bad version on {nodes} nodes, {parallel} at a time, budget {budget}: "
        f"{len(seen.nodes)} nodes ever left service (target <= {budget + parallel}), "
        f"{len(failed)} failed; first failure to UpgradeHalted "
        f"{figures['seconds_first_failure_to_halted']} s, to no node in the walk "
        f"{figures['seconds_first_failure_to_walk_empty']} s"
    )
    return figures


def _write_timeline(path: Path, parallel: int, recorder: Recorder, start: float) -> None:
    """Every node's events of one run, in seconds since the run began (`--timeline`): where
    a node's walk spends its time."""
    import json

    nodes = {
        node: [(round(t - start, 3), what) for t, what in events if t >= start]
        for node, events in sorted(recorder.events.items())
    }
    out = path.with_name(f"{path.stem}-{parallel}{path.suffix}")
    out.write_text(json.dumps(nodes, indent=0))
    print(f"timeline: {out}")


def _stop(operator: subprocess.Popen[bytes]) -> None:
    if operator.poll() is not None:
        return
    operator.terminate()
    try:
        operator.wait(30)
    except subprocess.TimeoutExpired:
        operator.kill()
        operator.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--parallel", default="1,10", help="maxParallelUpgrades values")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per rollout, seconds")
    parser.add_argument(
        "--upgrade-only",
        action="store_true",
        help="run the upgrade controller alone (the bench renders the DaemonSets), to tell "
        "its own reaction time from the whole operator's",
    )
    parser.add_argument(
        "--floor-parallel",
        type=int,
        default=10,
        help="nodes at a time in the floor walk the benchmark makes itself (0: no floor)",
    )
    parser.add_argument(
        "--timeline",
        type=Path,
        metavar="FILE",
        help="write every node's events of each run here as JSON (FILE-<parallel>.json)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="whole runs (fresh cluster each) and the median of their ratios: one run's "
        "floor alone varies by a quarter",
    )
    parser.add_argument(
        "--bad-version",
        action="store_true",
        help="the bad-version scenario instead: every node fails the new driver's validation",
    )
    parser.add_argument("--bad-parallel", type=int, default=10, help="with --bad-version")
    parser.add_argument("--budget", type=int, default=2, help="failureBudget (--bad-version)")
    parser.add_argument(
        "--validation-timeout",
        type=float,
        default=10.0,
        help="the operator's validation timeout, seconds (--bad-version)",
    )
    parser.add_argument("--serve-upgrade-only", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upgrade_only:
        asyncio.run(_serve_upgrade_only(args.serve_upgrade_only))
        return
    if args.bad_version:
        found = asyncio.run(
            bad_version(
                args.nodes, args.bad_parallel, args.budget, args.validation_timeout, args.timeout
            )
        )
        finish("upgrade-bad-version", found)
        return
    parallels = [int(p) for p in args.parallel.split(",")]
    repeats = [
        asyncio.run(
            bench(
                args.nodes,
                parallels,
                args.timeout,
                upgrade_only=args.upgrade_only,
                floor_parallel=args.floor_parallel,
                timeline=args.timeline,
            )
        )
        for _ in range(args.repeats)
    ]
    figures = repeats[-1]
    if args.repeats > 1:
        figures = {**figures, "repeats": repeats, "medians": _medians(repeats)}
        for key, value in figures["medians"].items():
            print(f"{args.repeats} runs, median {key}: {value}")
    finish("upgrade-only" if args.upgrade_only else "upgrade", figures)


def _medians(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Median seconds and ratios over whole runs, for the floor's parallelism."""
    out: dict[str, Any] = {}
    for floor in ("floor", "floor_with_safety_steps"):
        found = [r[floor] for r in repeats if r.get(floor)]
        if found:
            out[f"{floor}_seconds"] = round(statistics.median(f["seconds"] for f in found), 1)
            ratios = [f["ratio"] for f in found if "ratio" in f]
            if ratios:
                out[f"operator_over_{floor}"] = round(statistics.median(ratios), 2)
                out[f"operator_over_{floor}_each"] = ratios
    walks = [run["seconds"] for r in repeats for run in r["runs"]]
    out["operator_seconds"] = round(statistics.median(walks), 1)
    return out


if __name__ == "__main__":
    main()
