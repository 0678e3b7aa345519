"""The README's install paths on a simulated cluster. Helm: `helm install --wait`, then
`helm upgrade` with a new driver version walks every GPU node through the driver upgrade,
then `helm uninstall` leaves no operand behind. kustomize: config/default, then a sample
policy.

kwok runs no containers, so the operator runs as a local process against the cluster (as in
tests/e2e/operator) while the chart's Deployment pod is only marked ready; the hook Jobs'
pods are marked complete the same way (their commands are tested in
tests/integration/deploy/test_hooks.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import yaml

from gpusim import ClusterConfig, SimulatedCluster
from reconciler import GVK, Cache, Client, labels_of
from reconciler.lowlevel import RESTMapper, Transport
from tests.e2e.operator._harness import NAMESPACE, OperatorProcess
from tests.polling import eventually
from tests.tools import CHART, REPO, run

pytestmark = pytest.mark.e2e

CONFIG = ClusterConfig(gpu_nodes=2, cpu_nodes=1, gpus_per_node=2)
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
DAEMONSET = GVK("apps", "v1", "DaemonSet")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
POD = GVK("", "v1", "Pod")
NODE = GVK("", "v1", "Node")
STATE = "nvidia.com/gpu-driver-upgrade-state"
NEW_VERSION = "600.10.01"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(CONFIG) as sim:
        yield sim


@pytest.fixture
async def client(cluster: SimulatedCluster) -> AsyncIterator[Client]:
    async with cluster.api_client() as api:
        transport = Transport(api)
        mapper = RESTMapper(transport)
        cache = Cache(transport, mapper)
        yield Client(transport, mapper, cache, field_manager="helm-e2e")
        await cache.stop()


def helm(cluster: SimulatedCluster, *args: str) -> str:
    return run(
        "helm", *args, "--kubeconfig", str(cluster.kubeconfig), "-n", NAMESPACE, timeout=400
    ).stdout


async def drivers(client: Client) -> list[dict[str, object]]:
    pods = await client.list_live(POD, namespace=NAMESPACE)
    return [p for p in pods if p["metadata"]["name"].startswith("nvidia-driver-daemonset")]


async def test_install_upgrade_uninstall(cluster: SimulatedCluster, client: Client) -> None:
    await client.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": NAMESPACE,
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
            },
        }
    )
    # No prometheus-operator here: without its CRDs a DCGM exporter ServiceMonitor keeps the
    # policy not ready (and Helm 4's --wait waits for the policy's Ready condition).
    helm(
        cluster,
        "install",
        "gpu-operator",
        str(CHART),
        "--set",
        "dcgmExporter.serviceMonitor.enabled=false",
        "--wait",
        "--timeout",
        "5m",
    )
    deployment = await client.get_live(DEPLOYMENT, "gpu-operator", NAMESPACE)
    assert deployment["status"].get("readyReplicas") == 1
    await client.get_live(CLUSTER_POLICY, "cluster-policy")

    operator = OperatorProcess(cluster.kubeconfig, cluster.workdir / "logs" / "gpu-operator.log")
    operator.start()
    try:
        gpu_nodes = len(cluster.gpu_nodes)

        async def drivers_ready() -> bool:
            pods = await drivers(client)
            return len(pods) == gpu_nodes and all(
                p["status"].get("phase") == "Running" for p in pods
            )

        await eventually(drivers_ready, "a driver pod running on every GPU node", 300)

        helm(
            cluster,
            "upgrade",
            "gpu-operator",
            str(CHART),
            "--reuse-values",
            "--set",
            f"driver.version={NEW_VERSION}",
            "--wait",
            "--timeout",
            "5m",
        )

        async def upgraded() -> bool:
            pods = await drivers(client)
            nodes = await client.list_live(NODE)
            states = [labels_of(n).get(STATE) for n in nodes if labels_of(n).get(STATE)]
            return (
                len(pods) == gpu_nodes
                and all(NEW_VERSION in p["spec"]["containers"][0]["image"] for p in pods)
                and len(states) == gpu_nodes
                and all(s == "upgrade-done" for s in states)
            )

        await eventually(upgraded, f"every GPU node walked to driver {NEW_VERSION}", 600)

        helm(cluster, "uninstall", "gpu-operator", "--wait", "--timeout", "5m")

        async def nothing_left() -> bool:
            policies = await client.list_live(CLUSTER_POLICY)
            daemonsets = await client.list_live(DAEMONSET, namespace=NAMESPACE)
            return not policies and not daemonsets

        await eventually(nothing_left, "no ClusterPolicy and no operand DaemonSet left", 300)
    finally:
        operator.stop()
    assert "Traceback" not in operator.log_tail(400)


async def test_kustomize_default_then_a_sample_policy(
    cluster: SimulatedCluster, client: Client
) -> None:
    """The README's kustomize path: `kubectl apply -k config/default` (the same server-side
    apply of what kustomize renders), then the minimal sample policy."""
    rendered = run("kustomize", "build", REPO / "config" / "default").stdout
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in sorted(
        documents, key=lambda d: d["kind"] not in ("Namespace", "CustomResourceDefinition")
    ):
        await client.apply(doc)

    async def deployment_ready() -> bool:
        deployment = await client.get_live(DEPLOYMENT, "gpu-operator", NAMESPACE)
        return (deployment.get("status") or {}).get("readyReplicas") == 1

    await eventually(deployment_ready, "the operator Deployment ready", 180)
    sample = REPO / "config" / "samples" / "nvidia_v1_clusterpolicy_minimal.yaml"
    await client.apply(yaml.safe_load(sample.read_text()))
    operator = OperatorProcess(cluster.kubeconfig, cluster.workdir / "logs" / "kustomize.log")
    operator.start()
    try:

        async def drivers_running() -> bool:
            pods = await drivers(client)
            return len(pods) == len(cluster.gpu_nodes) and all(
                p["status"].get("phase") == "Running" for p in pods
            )

        await eventually(drivers_running, "a driver pod running on every GPU node", 300)
    finally:
        operator.stop()
