"""One operator, ours or NVIDIA's, on a fresh simulated cluster with one policy, until the
policy is ready and what it made has settled; then every object it made, read back from
the API server and normalised (`_compare.normalise`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpusim import (
    ClusterConfig,
    SimulatedCluster,
    load_documents,
    reference_policy,
    start_reference,
    stop_reference,
)
from reconciler.lowlevel import Transport
from tests.e2e.fidelity._compare import Key, normalise
from tests.e2e.operator._harness import OperatorProcess
from tests.monitoring import SERVICE_MONITOR_CRD
from tests.tools import REPO

NAMESPACE = "gpu-operator"
POLICY_PATH = "/apis/nvidia.com/v1/clusterpolicies"

READ_BACK: tuple[tuple[str, str, bool], ...] = (
    ("/apis/apps/v1", "daemonsets", True),
    ("/apis/apps/v1", "deployments", True),
    ("/api/v1", "serviceaccounts", True),
    ("/api/v1", "configmaps", True),
    ("/api/v1", "services", True),
    ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    ("/apis/monitoring.coreos.com/v1", "servicemonitors", True),
)
"""(group path, resource, namespaced): what the comparison reads, in the operator's
namespace or cluster-wide. Whatever was there before the operator started is left out."""

_T = TypeVar("_T")
READY_SECONDS = 240.0
SETTLE_SECONDS = 3.0
"""What an operator made counts as settled once two reads this far apart are equal."""


@dataclass(frozen=True)
class Case:
    """One policy of the matrix, on its cluster."""

    id: str
    policy: Callable[[], dict[str, Any]]
    """The ClusterPolicy (read when the case runs: some need helm)."""
    cluster: ClusterConfig
    objects: Sequence[dict[str, Any]] = ()
    """Created in the operator's namespace before the policy (a ConfigMap it names)."""
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """Set on every GPU node before the operator starts."""


def _crds() -> list[dict[str, Any]]:
    """Ours, and the ServiceMonitor's: both operators make ServiceMonitors where it exists
    (NVIDIA's fails the DCGM exporter's state where the policy asks for one and it does
    not)."""
    return [*load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))), SERVICE_MONITOR_CRD]


async def _list(transport: Transport, group: str, resource: str, namespaced: bool) -> list[Any]:
    where = f"/namespaces/{NAMESPACE}" if namespaced else ""
    listed = await transport.request("GET", f"{group}{where}/{resource}")
    kind = str(listed["kind"]).removesuffix("List")
    items: list[Any] = listed.get("items") or []
    for item in items:  # a list's items carry no kind of their own
        item["kind"] = kind
        item["apiVersion"] = listed["apiVersion"]
    return items


async def read_back(
    transport: Transport, leave_out: frozenset[Key] = frozenset()
) -> dict[Key, Any]:
    """Every object of `READ_BACK` but those in `leave_out`, normalised, by (kind, name)."""
    out: dict[Key, Any] = {}
    for group, resource, namespaced in READ_BACK:
        for item in await _list(transport, group, resource, namespaced):
            key = (item["kind"], item["metadata"]["name"])
            if key not in leave_out:
                out[key] = normalise(item)
    return out


async def _prepare(sim: SimulatedCluster, case: Case) -> frozenset[Key]:
    """The namespace, the case's objects and node labels; returns what is there before the
    operator starts (left out of the comparison)."""
    async with sim.api_client() as api:
        transport = Transport(api)
        await transport.request(
            "POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}}
        )
        for obj in case.objects:
            await transport.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", body=obj)
        before = frozenset(await read_back(transport))
        await transport.close()
    for node in sim.gpu_nodes:
        if case.node_labels:
            await sim.set_node_labels(node, dict(case.node_labels))
    return before


async def _ready_and_settled(
    sim: SimulatedCluster, policy: dict[str, Any], before: frozenset[Key]
) -> dict[Key, Any]:
    name = policy["metadata"]["name"]
    async with sim.api_client() as api:
        transport = Transport(api)
        await transport.request("POST", POLICY_PATH, body=policy)
        deadline = time.monotonic() + READY_SECONDS
        status: dict[str, Any] = {}
        while status.get("state") != "ready":
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"ClusterPolicy {name} not ready within {READY_SECONDS:.0f}s: its status "
                    f"said {status or 'nothing'}"
                )
            await asyncio.sleep(1.0)
            status = (await transport.request("GET", f"{POLICY_PATH}/{name}")).get("status") or {}
        seen = await read_back(transport, before)
        while True:
            await asyncio.sleep(SETTLE_SECONDS)
            again = await read_back(transport, before)
            if again == seen:
                break
            seen = again
        await transport.close()
    return seen


def run_reference(case: Case, folder: Path, images: Mapping[str, str]) -> dict[Key, Any]:
    """NVIDIA's operator (built into `folder`) with `images` in its environment."""
    with SimulatedCluster(case.cluster, crds=_crds()) as sim:
        before = asyncio.run(_prepare(sim, case))
        process = start_reference(sim, folder, namespace=NAMESPACE, images=images)
        try:
            policy = reference_policy(case.policy())
            return _kept_logs(sim, f"{case.id}-reference", _ready_and_settled(sim, policy, before))
        finally:
            stop_reference(process)


def run_ours(case: Case) -> dict[Key, Any]:
    """Ours, as its own process, with no image in its environment: its own defaults."""
    with SimulatedCluster(case.cluster, crds=_crds()) as sim:
        before = asyncio.run(_prepare(sim, case))
        log = sim.workdir / "logs" / "gpu-operator.log"
        process = OperatorProcess(sim.kubeconfig, log, env=_without_images(os.environ))
        process.start()
        try:
            return _kept_logs(
                sim, f"{case.id}-ours", _ready_and_settled(sim, case.policy(), before)
            )
        finally:
            process.stop()


def _kept_logs(sim: SimulatedCluster, run: str, read: Coroutine[Any, Any, _T]) -> _T:
    """`read`'s result; if it fails, the cluster's logs (the operator's among them) are
    copied to .test-logs/ first, as the cluster's folder goes with it."""
    try:
        return asyncio.run(read)
    except BaseException:
        target = REPO / ".test-logs" / f"fidelity-{run}-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.copytree(sim.workdir / "logs", target, dirs_exist_ok=True)
        print(f"\nthe cluster's logs are kept in {target}", file=sys.stderr)
        raise


def _without_images(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not k.endswith("_IMAGE")}
