"""Driver upgrades end to end: 20 simulated GPU nodes, GPU workloads, the operator process.

Tests run in file order on one cluster and one operator process. Each changes the driver
version in the ClusterPolicy (the operator re-renders the driver DaemonSet, the DaemonSet
controller makes a new revision) and watches the whole rollout through `Invariants`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from components.api import DRIVER_KERNEL_PIN_LABEL, KERNEL_LABEL, UpgradeState
from components.upgrade import DEVICE_PLUGIN_DEPLOY_LABEL, STATE_LABEL
from gpusim import SimulatedCluster
from reconciler import GVK, Object, PatchType, labels_of, name_of
from reconciler.errors import NotFound, ReconcilerError
from tests.e2e.operator._harness import NAMESPACE, OperatorProcess
from tests.polling import eventually

from .conftest import POD, Watch, is_driver, is_gpu_pod, pod_ready

S = UpgradeState
POLICY = "cluster-policy"
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
NODE = GVK("", "v1", "Node")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
PDB = GVK("policy", "v1", "PodDisruptionBudget")
DAEMONSET = GVK("apps", "v1", "DaemonSet")
PIN = DRIVER_KERNEL_PIN_LABEL
KERNEL = KERNEL_LABEL
NEW_KERNEL = "6.8.0-60-generic"
ROLLOUT_SECONDS = 600.0


async def _set_policy(
    watch: Watch, version: str, upgrade: dict[str, Any], *, precompiled: bool = False
) -> None:
    driver = {"version": version, "upgradePolicy": upgrade, "usePrecompiled": precompiled}
    spec = {"driver": driver}
    try:
        await watch.client.get_live(CLUSTER_POLICY, POLICY)
    except NotFound:
        await watch.client.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": POLICY},
                "spec": spec,
            }
        )
        return
    # One write that replaces the whole upgradePolicy (a merge patch would keep old keys).
    ops = [
        {"op": "add", "path": "/spec/driver/version", "value": version},
        {"op": "add", "path": "/spec/driver/upgradePolicy", "value": upgrade},
        {"op": "add", "path": "/spec/driver/usePrecompiled", "value": precompiled},
    ]
    await watch.client.patch(CLUSTER_POLICY, POLICY, ops, patch_type=PatchType.JSON)


def _upgraded(watch: Watch, version: str) -> bool:
    nodes = {name_of(n) for n in watch.gpu_nodes()}
    drivers = watch.drivers()
    on = {p["spec"].get("nodeName") for p in drivers}
    return (
        on == nodes
        and len(drivers) == len(nodes)
        and all(version in p["spec"]["containers"][0]["image"] and pod_ready(p) for p in drivers)
        and all(s == S.UPGRADE_DONE for s in watch.states().values())
    )


async def _rollout_done(watch: Watch, version: str, seconds: float = ROLLOUT_SECONDS) -> None:
    async def done() -> bool:
        return _upgraded(watch, version)

    await eventually(done, f"every GPU node upgraded to {version}", seconds)


async def _workload(
    watch: Watch,
    name: str,
    replicas: int,
    *,
    empty_dir: bool = False,
    tolerate_everything: bool = False,
) -> None:
    pod: Object = {
        "metadata": {"labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        },
    }
    if tolerate_everything:
        pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    if empty_dir:
        pod["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/s"}]
    await watch.client.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "work"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": pod,
            },
        }
    )

    async def running() -> bool:
        pods = [p for p in watch.cache.list(POD, namespace="work") if labels_of(p)["app"] == name]
        return len(pods) == replicas and all(pod_ready(p) for p in pods)

    await eventually(running, f"{replicas} {name} GPU pods running", 180)


async def test_a_new_driver_version_rolls_through_20_nodes_within_every_limit(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 3, "maxUnavailable": "25%"}
    await _set_policy(watch, "595.91.07", upgrade)
    await _rollout_done(watch, "595.91.07")  # the first rollout: every node in sync
    await _workload(watch, "train", 16)
    # An admin cordoned one node before the upgrade: it must stay cordoned after it.
    cordoned = name_of(watch.gpu_nodes()[7])
    await watch.client.patch(NODE, cordoned, {"spec": {"unschedulable": True}})
    inv = watch.invariants(3, 5, {cordoned})
    log_from = operator.log_path.stat().st_size

    await _set_policy(watch, "595.100.01", upgrade)
    await _rollout_done(watch, "595.100.01")
    watch.drop(inv)

    assert not inv.violations, inv.violations[:5]
    # One INFO line per pod the walk deleted: a reconcile from a cache still behind the
    # first delete must not delete (and say so) again.
    with operator.log_path.open("rb") as log:
        log.seek(log_from)
        deleted = Counter(re.findall(r"deleted Pod (\S+) \(", log.read().decode(errors="replace")))
    assert sum(deleted.values()) >= 20, deleted  # at least every node's driver pod
    assert max(deleted.values()) == 1, [pod for pod, n in deleted.items() if n > 1]
    assert inv.peak_in_progress == 3  # it used the parallelism it was given
    # A version change is a new install: every node walked, cordoned (not restart-only).
    assert {name_of(n) for n in watch.gpu_nodes()} <= inv.cordons_seen
    # Every node seen at least upgrade-required, pod-deletion-required (admission's write,
    # cordoned), pod-restart-required and upgrade-done (the states with nothing to do
    # between them go in one write, which a watch sees once).
    assert inv.transitions >= 20 * 4
    for node in watch.gpu_nodes():
        assert bool(node["spec"].get("unschedulable")) == (name_of(node) == cordoned)

    def train() -> list[Object] | None:
        # The ReplicaSet controller replaces the pods the walk cleared off the last node;
        # that node's `upgrade-done` does not wait for it.
        pods = [p for p in watch.cache.list(POD, namespace="work") if is_gpu_pod(p)]
        return pods if len(pods) == 16 else None

    await eventually(train, "the 16 train pods back (the workload came back)", 60)
    await watch.client.patch(NODE, cordoned, {"spec": {"unschedulable": None}})


@dataclass
class _Disruption:
    """What a restart-only must never do, seen on every node and pod event: a GPU node
    unschedulable, a GPU pod deleted (or terminating), a GPU node's device plugin paused."""

    cache: Any
    cordoned: set[str] = field(default_factory=set)
    gpu_pods_gone: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    in_progress: int = 0
    """The most nodes seen in the walk at once."""

    def on_add(self, obj: Object) -> None:
        self.check(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self.check(new)

    def on_delete(self, obj: Object) -> None:
        if is_gpu_pod(obj):
            self.gpu_pods_gone.add(name_of(obj))
        self.check(obj)

    def check(self, obj: Object) -> None:
        if is_gpu_pod(obj) and obj["metadata"].get("deletionTimestamp"):
            self.gpu_pods_gone.add(name_of(obj))
        walking = 0
        for n in self.cache.list(NODE):
            labels = labels_of(n)
            if labels.get("feature.node.kubernetes.io/pci-10de.present") != "true":
                continue
            if n["spec"].get("unschedulable"):
                self.cordoned.add(name_of(n))
            if labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) != "true":
                self.paused.add(name_of(n))
            if labels.get(STATE_LABEL) not in ("", None, S.UPGRADE_DONE, S.UPGRADE_REQUIRED):
                walking += 1
        self.in_progress = max(self.in_progress, walking)


async def test_a_cosmetic_change_restarts_every_driver_in_place_under_running_gpu_pods(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    """A label on every DaemonSet (`daemonsets.labels`) changes the driver's template, not
    its install (`DRIVER_CONFIG_DIGEST`): each driver pod is restarted in place, within
    maxParallelUpgrades, with no cordon, no GPU pod deleted and the device plugin left
    running. (A version change still walks: the test above.)"""
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 3, "maxUnavailable": "25%"}
    await _set_policy(watch, "595.100.01", upgrade)
    await _rollout_done(watch, "595.100.01")
    if not any(is_gpu_pod(p) for p in watch.cache.list(POD, namespace="work")):
        await _workload(watch, "train", 16)  # run alone: the test above left none
    gpu_pods = {name_of(p) for p in watch.cache.list(POD, namespace="work") if is_gpu_pod(p)}
    drivers = {name_of(p) for p in watch.drivers()}
    # Half the driver pods as an operator before restart-only left them: the digest in
    # their env alone, not in the annotation the pod cache keeps (read from the server).
    for name in sorted(drivers)[::2]:
        gone = {"metadata": {"annotations": {"nvidia.com/gpu-driver-config-digest": None}}}
        await watch.client.patch(POD, name, gone, namespace=NAMESPACE)
    seen = _Disruption(watch.cache)
    watch.nodes.add_handler(seen)
    watch.pods.add_handler(seen)

    label = {"spec": {"daemonsets": {"labels": {"example.com/team": "ml-platform"}}}}
    await watch.client.patch(CLUSTER_POLICY, POLICY, label, patch_type=PatchType.MERGE)

    async def restarted() -> bool:
        now = watch.drivers()
        return (
            _upgraded(watch, "595.100.01")
            and not drivers & {name_of(p) for p in now}
            and all(labels_of(p).get("example.com/team") == "ml-platform" for p in now)
        )

    await eventually(restarted, "every driver pod restarted with the new label", 300)
    watch.nodes.remove_handler(seen)
    watch.pods.remove_handler(seen)

    assert not seen.cordoned, f"restart-only cordoned {sorted(seen.cordoned)}"
    assert not seen.gpu_pods_gone, f"restart-only deleted GPU pods {sorted(seen.gpu_pods_gone)}"
    assert not seen.paused, f"restart-only paused the device plugin on {sorted(seen.paused)}"
    assert {name_of(p) for p in watch.cache.list(POD, namespace="work")} == gpu_pods
    assert 0 < seen.in_progress <= 3  # still within maxParallelUpgrades


async def test_a_budget_blocking_the_drain_fails_nodes_until_it_is_removed(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    # Pods with emptyDir data: pod deletion may not take them (no deleteEmptyDir), the
    # drain may, but a PodDisruptionBudget that allows no disruption refuses each eviction.
    upgrade = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 8,
        "maxUnavailable": "50%",
        "drain": {"enable": True, "deleteEmptyDir": True, "timeoutSeconds": 5},
    }
    await _set_policy(watch, "595.100.01", upgrade)
    await _workload(watch, "db", 2, empty_dir=True)
    await watch.client.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "work"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    db_nodes = {
        p["spec"]["nodeName"] for p in watch.cache.list(POD, namespace="work")
        if labels_of(p)["app"] == "db"
    }  # fmt: skip
    inv = watch.invariants(8, 10, set())
    await _set_policy(watch, "595.100.02", upgrade)

    async def failed() -> set[str] | None:
        states = watch.states()
        bad = {n for n, s in states.items() if s == S.UPGRADE_FAILED}
        return bad if bad >= db_nodes else None

    await eventually(failed, "the nodes holding the budgeted pods in upgrade-failed", 300)
    for name in db_nodes:
        node = watch.cache.get(NODE, name)
        assert node is not None and node["spec"].get("unschedulable")  # still cordoned
        message = node["metadata"]["annotations"]["nvidia.com/gpu-driver-upgrade-message"]
        assert "PodDisruptionBudget work/db" in message
    db = [p for p in watch.cache.list(POD, namespace="work") if labels_of(p)["app"] == "db"]
    assert {p["spec"]["nodeName"] for p in db} == db_nodes  # nothing was evicted

    await watch.client.delete(PDB, "db", namespace="work")
    await _rollout_done(watch, "595.100.02")
    watch.drop(inv)
    assert not inv.violations, inv.violations[:5]
    assert not any(n["spec"].get("unschedulable") for n in watch.gpu_nodes())
    await watch.client.delete(DEPLOYMENT, "db", namespace="work")


async def test_repeated_operator_kills_during_a_rollout(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 4, "maxUnavailable": "25%"}
    await _set_policy(watch, "595.100.02", upgrade)
    inv = watch.invariants(4, 5, set())
    await _set_policy(watch, "595.100.03", upgrade)
    rng = random.Random(20261130)
    kills = 0
    deadline = asyncio.get_running_loop().time() + ROLLOUT_SECONDS
    while not _upgraded(watch, "595.100.03"):
        assert asyncio.get_running_loop().time() < deadline, f"not done after {kills} kills"
        # A random moment of its work: counted from when it is ready (caches synced), as a
        # kill while it still imports and lists only repeats its start, and a count from
        # the start left it so little time to work that the walk took minutes.
        await eventually(partial(_serving, operator), "the operator ready", 60)
        await asyncio.sleep(rng.uniform(0.5, 3.0))
        operator.kill()  # SIGKILL, wherever it is
        kills += 1
        operator.start()
    watch.drop(inv)
    # The walk no longer waits out a 2 s settle per node, so a rollout can be short.
    assert kills >= 2, "the rollout should have been cut short more than once"
    assert not inv.violations, inv.violations[:5]
    assert inv.peak_in_progress <= 4
    assert not any(n["spec"].get("unschedulable") for n in watch.gpu_nodes())


async def _serving(operator: OperatorProcess) -> bool:
    return await asyncio.to_thread(operator.probe, "/readyz") == 200


async def test_auto_upgrade_off_touches_nothing(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    await _set_policy(watch, "595.100.03", {"autoUpgrade": False})

    async def cleared() -> bool:
        return all(s == "" for s in watch.states().values())

    await eventually(cleared, "the upgrade state cleared when auto upgrade went off", 120)
    drivers = {name_of(p) for p in watch.drivers()}
    revisions = len(await watch.client.list_live(GVK("apps", "v1", "ControllerRevision"),
                                                 namespace=NAMESPACE))  # fmt: skip
    nodes_before = {name_of(n): n["metadata"]["resourceVersion"] for n in watch.gpu_nodes()}
    inv = watch.invariants(0, 0, set())
    inv.armed = True

    await _set_policy(watch, "595.100.04", {"autoUpgrade": False})

    async def new_revision() -> bool:
        revs = await watch.client.list_live(
            GVK("apps", "v1", "ControllerRevision"), namespace=NAMESPACE
        )
        return len(revs) > revisions

    await eventually(new_revision, "the driver DaemonSet's new revision", 120)
    await asyncio.sleep(5)  # room for a wrong move; nothing below depends on how long
    watch.drop(inv)
    assert {name_of(p) for p in watch.drivers()} == drivers  # no driver restarted
    assert all(s == "" for s in watch.states().values())
    assert not inv.cordons_seen
    for node in watch.gpu_nodes():
        assert STATE_LABEL not in labels_of(node)
        changed = node["metadata"]["resourceVersion"] != nodes_before[name_of(node)]
        if changed:
            # Heartbeats and GFD may write the node; the upgrade must not have.
            assert not node["spec"].get("unschedulable")


def _on_own_kernel(watch: Watch) -> bool:
    """Every GPU node pinned to the kernel it runs, with one ready driver pod for it."""
    drivers = {p["spec"].get("nodeName"): p for p in watch.drivers()}
    if len(drivers) != len(watch.drivers()):
        return False
    for node in watch.gpu_nodes():
        labels = labels_of(node)
        driver = drivers.get(name_of(node))
        if (
            driver is None
            or not pod_ready(driver)
            or labels.get(PIN) != labels.get(KERNEL)
            or (driver["spec"].get("nodeSelector") or {}).get(PIN) != labels.get(KERNEL)
            or labels.get(STATE_LABEL) != S.UPGRADE_DONE
        ):
            return False
    return True


async def test_precompiled_drivers_follow_a_new_kernel_only_through_the_safe_path(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": 2, "maxUnavailable": "25%"}
    # Turning precompiled drivers on moves every node, one walk at a time, from the per-OS
    # DaemonSet (kept meanwhile) to its kernel's: the same limits hold as for any upgrade.
    switch = watch.invariants(2, 5, set())
    await _set_policy(watch, "595.100.04", upgrade, precompiled=True)

    async def settled() -> bool:
        return _on_own_kernel(watch)

    await eventually(settled, "every node on its own kernel's precompiled driver", ROLLOUT_SECONDS)
    watch.drop(switch)
    assert not switch.violations, switch.violations[:5]
    assert len(switch.cordons_seen) == 20  # every node went through the safe path

    async def per_os_gone() -> bool:
        # The policy controller deletes it once no node depends on it, in its own paced
        # reconcile: the walk may finish the last node a moment before.
        dss = await watch.client.list_live(DAEMONSET, namespace=NAMESPACE)
        return not [name_of(d) for d in dss if name_of(d) == "nvidia-driver-daemonset-ubuntu22.04"]

    await eventually(per_os_gone, "the per-OS driver DaemonSet deleted", 60)

    await _workload(watch, "infer", 12)
    busy = sorted(
        {p["spec"]["nodeName"] for p in watch.cache.list(POD, namespace="work") if is_gpu_pod(p)}
    )
    rebooted = busy[:4]
    inv = watch.invariants(2, 5, set())
    # The nodes boot a new kernel (as far as NFD can tell): the old kernel's driver must
    # stay until the node is cordoned and its GPU pods are gone.
    for name in rebooted:
        await upgrade_cluster.change_kernel(name, NEW_KERNEL)

    async def moved() -> bool:
        kernels = {name_of(n): labels_of(n).get(KERNEL) for n in watch.gpu_nodes()}
        return all(kernels[n] == NEW_KERNEL for n in rebooted) and _on_own_kernel(watch)

    await eventually(moved, "the rebooted nodes on the new kernel's driver", ROLLOUT_SECONDS)
    watch.drop(inv)
    assert not inv.violations, inv.violations[:5]
    assert set(rebooted) <= inv.cordons_seen  # each went through the safe path
    assert inv.peak_in_progress <= 2
    assert not any(n["spec"].get("unschedulable") for n in watch.gpu_nodes())
    new_ds = [
        d for d in await watch.client.list_live(DAEMONSET, namespace=NAMESPACE)
        if (d["spec"]["template"]["spec"].get("nodeSelector") or {}).get(PIN) == NEW_KERNEL
    ]  # fmt: skip
    assert (
        len(new_ds) == 1
        and NEW_KERNEL in new_ds[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    await watch.client.delete(DEPLOYMENT, "infer", namespace="work")


@dataclass
class StaleScheduler:
    """Binds one GPU pod that tolerates every taint to each node the moment the node is
    seen in `pod-restart-required` with its driver pod gone or not ready, as a scheduler
    still acting on a view from before the node stopped offering GPUs would (how often
    kube-scheduler itself does that is up to timing; this does it on every node). Only
    the kubelet's device admission stands between such a pod and the restarting driver.
    """

    watch: Watch
    bound: dict[str, str] = field(default_factory=dict)
    """Node -> the pod bound to it."""
    errors: list[str] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def on_add(self, obj: Object) -> None:
        self._look()

    def on_update(self, old: Object, new: Object) -> None:
        self._look()

    def on_delete(self, obj: Object) -> None:
        self._look()

    def _look(self) -> None:
        drivers_ready = {
            p["spec"].get("nodeName")
            for p in self.watch.cache.list(POD, namespace=NAMESPACE)
            if is_driver(p) and pod_ready(p) and not p["metadata"].get("deletionTimestamp")
        }
        for name, state in self.watch.states().items():
            if state != S.POD_RESTART_REQUIRED or name in drivers_ready or name in self.bound:
                continue
            self.bound[name] = f"stale-{name}"
            task = asyncio.get_running_loop().create_task(self._bind(name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _bind(self, node: str) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.bound[node], "namespace": "work", "labels": {"stale": "1"}},
            "spec": {
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "cuda",
                        "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ],
            },
        }
        try:
            await self.watch.client.create(pod)
        except ReconcilerError as exc:  # reported by the test
            self.errors.append(f"{node}: {exc}")


async def test_gpu_pods_tolerating_every_taint_never_run_under_a_restarting_driver(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch
) -> None:
    """A training Deployment whose pods tolerate every taint (the cordon included): the
    scheduler puts its replacements straight back on the node being cleared. The walk must
    see them before it restarts the driver and while it validates, and clear again. And a
    GPU pod bound to a node once its driver is going (from a stale view) is refused by the
    node's kubelet: no GPU pod ever runs on a node without a ready driver."""
    upgrade = {
        "autoUpgrade": True,
        "maxParallelUpgrades": 2,
        "maxUnavailable": "25%",
        # The stale pods have no controller: the walk may delete them if it sees them
        # before their kubelet refuses them.
        "podDeletion": {"timeoutSeconds": 0, "force": True},
    }
    await _set_policy(watch, "595.130.01", upgrade)
    await _rollout_done(watch, "595.130.01")
    await _workload(watch, "tolerant", 16, tolerate_everything=True)
    inv = watch.invariants(2, 5, set())
    stale = StaleScheduler(watch)
    watch.nodes.add_handler(stale)
    watch.pods.add_handler(stale)

    await _set_policy(watch, "595.130.02", upgrade)
    await _rollout_done(watch, "595.130.02")
    watch.drop(inv)
    watch.nodes.remove_handler(stale)
    watch.pods.remove_handler(stale)

    assert not inv.violations, inv.violations[:5]
    assert not stale.errors, stale.errors[:5]
    assert len(stale.bound) == 20  # one stale pod per node, each while its driver was gone
    # Refused by the kubelet, as a real one refuses a pod its device manager cannot serve
    # (the walk may have deleted a few first).
    assert inv.refused
    for pod in watch.cache.list(POD, namespace="work"):
        if labels_of(pod).get("stale") and pod["status"].get("phase") == "Failed":
            assert pod["status"]["message"] == (
                "Pod was rejected: Allocate failed due to no healthy devices present; "
                "cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
            )
    assert len(inv.cordons_seen) == 20
    assert not any(n["spec"].get("unschedulable") for n in watch.gpu_nodes())
    # Each node stopped offering GPUs for its driver restart, and offers them again.
    assert inv.device_plugin_paused == inv.cordons_seen
    assert all(labels_of(n).get(DEVICE_PLUGIN_DEPLOY_LABEL) == "true" for n in watch.gpu_nodes())
    await watch.client.delete(DEPLOYMENT, "tolerant", namespace="work")
    for name in stale.bound.values():
        with contextlib.suppress(NotFound):
            await watch.client.delete(POD, name, namespace="work")
