"""Driver upgrades on a simulated cluster of their own, with the operator as a process.

20 GPU nodes (kwok), the full control plane (DaemonSets really roll out, the scheduler
really places GPU pods, evictions really meet PodDisruptionBudgets), and `gpu-operator run`
exactly as in its pod, killable with SIGKILL. `Invariants` watches every node and pod
change from the test process and records any moment a limit was broken.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import UpgradeState
from components.run import VALIDATION_TIMEOUT_ENV
from components.upgrade import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    IN_PROGRESS,
    STATE_LABEL,
)
from gpusim import ClusterConfig, SimulatedCluster, apply_crds, load_documents, parse_os_list
from reconciler import GVK, Cache, Client, Object, labels_of, name_of
from reconciler.lowlevel import RESTMapper, Transport
from tests.e2e.operator._harness import NAMESPACE, REPO, OperatorProcess, attach_logs

NODE = GVK("", "v1", "Node")
POD = GVK("", "v1", "Pod")
UPGRADE_CLUSTER = ClusterConfig(
    gpu_nodes=20, cpu_nodes=1, gpus_per_node=2, os=parse_os_list("ubuntu22.04")
)
S = UpgradeState
VALIDATION_SECONDS = 6
"""The validation timeout of `validating_operator`: a node whose validation never passes
fails in a test's time."""
IN_PROGRESS_VALUES = frozenset(s.value for s in IN_PROGRESS)


def gpu_resources(pod: Object) -> set[str]:
    """The GPU resources (`nvidia.com/gpu`, `nvidia.com/mig-*`) the pod asks for."""
    return {
        str(k)
        for c in (pod.get("spec") or {}).get("containers") or []
        for part in ("limits", "requests")
        for k in ((c.get("resources") or {}).get(part) or {})
        if str(k).startswith(("nvidia.com/gpu", "nvidia.com/mig-"))
    }


def is_gpu_pod(pod: Object) -> bool:
    return bool(gpu_resources(pod))


def is_driver(pod: Object) -> bool:
    return (pod["metadata"].get("namespace") == NAMESPACE) and labels_of(pod).get(
        "app.kubernetes.io/component"
    ) == "nvidia-driver"


def started(pod: Object) -> bool:
    """Running with a container started: the kubelet admitted it and it runs."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        "running" in (c.get("state") or {}) or c.get("started")
        for c in status.get("containerStatuses") or []
    )


def pod_ready(pod: Object) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


@dataclass
class Invariants:
    """Checks the limits on every node or pod change seen through a watch."""

    cache: Cache
    max_parallel: int
    max_unavailable: int
    allowed_cordoned: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    peak_in_progress: int = 0
    peak_unavailable: int = 0
    transitions: int = 0
    cordons_seen: set[str] = field(default_factory=set)
    device_plugin_paused: set[str] = field(default_factory=set)
    """Nodes seen with the device plugin paused for their driver restart."""
    refused: set[str] = field(default_factory=set)
    """GPU pods (by uid) a kubelet refused (`UnexpectedAdmissionError`).

    The walk relies on that refusal: once the paused device plugin's GPUs are gone from
    the node, a pod the scheduler binds from an older view cannot run under the restarting
    driver (`components.upgrade._restart`). The cordon does not stop a pod that tolerates
    every taint, and the walk's last live look at the node's pods cannot see a binding
    that lands after it. The simulated kubelet refuses as a real one does
    (`gpusim._admission`), so a GPU pod seen running there is a broken limit."""
    armed: bool = True
    _last: dict[str, str] = field(default_factory=dict)

    def on_add(self, obj: Object) -> None:
        self.check(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self.check(new)

    def on_delete(self, obj: Object) -> None:
        self.check(obj)

    def check(self, obj: Object) -> None:
        if not self.armed:
            return
        nodes = [n for n in self.cache.list(NODE) if _gpu_node(n)]
        pods = self.cache.list(POD)
        states = {name_of(n): labels_of(n).get(STATE_LABEL, "") for n in nodes}
        for name, state in states.items():
            if self._last.get(name) != state:
                self._last[name] = state
                self.transitions += 1
        in_progress = sum(1 for s in states.values() if s in IN_PROGRESS_VALUES)
        unavailable = 0
        for n in nodes:
            cordoned = bool((n.get("spec") or {}).get("unschedulable"))
            if cordoned:
                self.cordons_seen.add(name_of(n))
            if labels_of(n).get(DEVICE_PLUGIN_DEPLOY_LABEL) == DEVICE_PLUGIN_PAUSED:
                self.device_plugin_paused.add(name_of(n))
            if cordoned or states[name_of(n)] == S.CORDON_REQUIRED or not _node_ready(n):
                unavailable += 1
        self.peak_in_progress = max(self.peak_in_progress, in_progress)
        self.peak_unavailable = max(self.peak_unavailable, unavailable)
        if self.max_parallel and in_progress > self.max_parallel:
            self.violations.append(f"{in_progress} nodes in progress: {states}")
        if unavailable > self.max_unavailable:
            self.violations.append(f"{unavailable} nodes unavailable: {states}")
        drivers_ready = {
            p["spec"].get("nodeName")
            for p in pods
            if is_driver(p) and pod_ready(p) and not p["metadata"].get("deletionTimestamp")
        }
        for p in pods:
            node = (p.get("spec") or {}).get("nodeName")
            if node not in states or not is_gpu_pod(p):
                continue
            if (p.get("status") or {}).get("reason") == "UnexpectedAdmissionError":
                self.refused.add(p["metadata"].get("uid", ""))
            if started(p) and node not in drivers_ready:
                self.violations.append(
                    f"GPU pod {p['metadata']['namespace']}/{name_of(p)} running on {node} "
                    f"({states.get(node)}) while its driver is not running"
                )


def _gpu_node(node: Object) -> bool:
    return labels_of(node).get("feature.node.kubernetes.io/pci-10de.present") == "true"


def _node_ready(node: Object) -> bool:
    return all(
        c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready"
    )


class Watch:
    """Informers on nodes and pods of the simulated cluster, in the test process."""

    def __init__(self, api: Any) -> None:
        transport = Transport(api)
        mapper = RESTMapper(transport)
        self.cache = Cache(transport, mapper)
        self.client = Client(transport, mapper, self.cache, field_manager="e2e")
        self.nodes = self.cache.informer(NODE)
        self.pods = self.cache.informer(POD)

    async def start(self) -> None:
        await self.cache.start()
        await self.cache.wait_for_sync(60)

    def invariants(
        self, max_parallel: int, max_unavailable: int, allowed_cordoned: set[str]
    ) -> Invariants:
        inv = Invariants(self.cache, max_parallel, max_unavailable, set(allowed_cordoned))
        self.nodes.add_handler(inv)
        self.pods.add_handler(inv)
        return inv

    def drop(self, inv: Invariants) -> None:
        inv.armed = False
        self.nodes.remove_handler(inv)
        self.pods.remove_handler(inv)

    def gpu_nodes(self) -> list[Object]:
        return sorted((n for n in self.cache.list(NODE) if _gpu_node(n)), key=name_of)

    def states(self) -> dict[str, str]:
        return {name_of(n): labels_of(n).get(STATE_LABEL, "") for n in self.gpu_nodes()}

    def drivers(self) -> list[Object]:
        return [
            p
            for p in self.cache.list(POD, namespace=NAMESPACE)
            if is_driver(p) and not p["metadata"].get("deletionTimestamp")
        ]


@pytest.fixture(scope="module")
def upgrade_cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(UPGRADE_CLUSTER) as sim:
        asyncio.run(_install(sim))
        yield sim


async def _install(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        core = client.CoreV1Api(api)
        for name in (NAMESPACE, "work"):
            await core.create_namespace({"metadata": {"name": name}})


@pytest.fixture(scope="module")
def operator(upgrade_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        upgrade_cluster.kubeconfig, upgrade_cluster.workdir / "logs" / "gpu-operator.log"
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="package")
def validating_cluster() -> Iterator[SimulatedCluster]:
    """One 20-node cluster for `test_rollback.py` and then `test_rollout_safety.py` (one
    start instead of two): the rollback leaves every node on the good driver, its
    workload gone, no version failing and no rollback asked for, so the first rollout of
    `test_rollout_safety.py` finds every node in sync, as on a fresh cluster."""
    with SimulatedCluster(UPGRADE_CLUSTER) as sim:
        asyncio.run(_install(sim))
        yield sim


@pytest.fixture(scope="package")
def validating_operator(validating_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    """The operator on `validating_cluster`, its validation timeout cut to seconds."""
    process = OperatorProcess(
        validating_cluster.kubeconfig,
        validating_cluster.workdir / "logs" / "gpu-operator.log",
        env={**os.environ, VALIDATION_TIMEOUT_ENV: str(VALIDATION_SECONDS)},
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@contextlib.asynccontextmanager
async def watching(sim: SimulatedCluster) -> AsyncIterator[Watch]:
    """A started `Watch` on `sim` for one test (the invariant checker's events included)."""
    async with sim.api_client() as api:
        w = Watch(api)
        await w.start()
        try:
            yield w
        finally:
            await w.cache.stop()


@pytest.fixture
async def watch(upgrade_cluster: SimulatedCluster) -> AsyncIterator[Watch]:
    async with watching(upgrade_cluster) as w:
        yield w


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        args = item.funcargs
        attach_logs(report, [args.get("operator")], args.get("upgrade_cluster"))
    return report  # type: ignore[return-value]
