"""The README's install paths on a simulated cluster. Helm: `helm install --wait`, then
`helm upgrade` with a new driver version walks every GPU node through the driver upgrade,
then the pre-delete hook's command deletes the release's ClusterPolicy and returns only once
the garbage collector has deleted every object it owned, and `helm uninstall` leaves no
operand behind. Helm again with the GPUCluster instead of the ClusterPolicy: the DRA stack
goes ready. kustomize: config/default, then a sample policy.

kwok runs no containers, so the operator runs as a local process against the cluster (as in
tests/e2e/operator) while the chart's Deployment pod is only marked ready; the hook Jobs'
pods are marked complete the same way, so the pre-delete hook's command is run here as a
local process with the Job's arguments (both commands are also tested in
tests/integration/deploy/test_hooks.py).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
import yaml

from gpusim import ANNOTATION_HOST_DRIVER, ClusterConfig, SimulatedCluster
from reconciler import GVK, Cache, Client, PatchType, labels_of, owner_references_of
from reconciler.errors import ApiError, NotFound
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
# Where the operands live: what the operator creates for a policy, owned by it.
OPERAND_KINDS = (
    *(
        (GVK(group, "v1", kind), NAMESPACE)
        for group, kind in (
            ("apps", "DaemonSet"),
            ("", "ServiceAccount"),
            ("", "ConfigMap"),
            ("", "Service"),
            ("rbac.authorization.k8s.io", "Role"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
        )
    ),
    *(
        (GVK(group, "v1", kind), None)
        for group, kind in (
            ("rbac.authorization.k8s.io", "ClusterRole"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            ("node.k8s.io", "RuntimeClass"),
        )
    ),
)
GPU_CLUSTER = GVK("nvidia.com", "v1alpha1", "GPUCluster")
RESOURCE_SLICE = GVK("resource.k8s.io", "v1", "ResourceSlice")
OPERATOR_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
}
NEW_VERSION = "600.10.01"
HOLD = "e2e.test/hold"


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


async def owned_by(client: Client, uid: str) -> list[str]:
    """Kind/name of every object the policy `uid` owns, and of those objects' pods."""
    found: list[str] = []
    owners: set[str] = {uid}
    for gvk, namespace in OPERAND_KINDS:
        for obj in await client.list_live(gvk, namespace=namespace):
            if any(r.get("uid") == uid for r in owner_references_of(obj)):
                found.append(f"{gvk.kind}/{obj['metadata']['name']}")
                owners.add(obj["metadata"]["uid"])
    for pod in await client.list_live(POD, namespace=NAMESPACE):
        if any(r.get("uid") in owners for r in owner_references_of(pod)):
            found.append(f"Pod/{pod['metadata']['name']}")
    return found


async def policy_uid(client: Client) -> str | None:
    try:
        return str((await client.get_live(CLUSTER_POLICY, "cluster-policy"))["metadata"]["uid"])
    except NotFound:
        return None


async def release(client: Client, daemonset: str) -> bool:
    """Take our finalizer off `daemonset` (and only ours: the garbage collector's
    `foregroundDeletion` may be beside it); False to try again."""
    live = await client.get_live(DAEMONSET, daemonset, NAMESPACE)
    finalizers = live["metadata"].get("finalizers") or []
    if HOLD not in finalizers:
        return True
    at = f"/metadata/finalizers/{finalizers.index(HOLD)}"
    try:
        await client.patch(
            DAEMONSET,
            daemonset,
            [{"op": "test", "path": at, "value": HOLD}, {"op": "remove", "path": at}],
            namespace=NAMESPACE,
            patch_type=PatchType.JSON,
        )
    except ApiError:
        return False
    return True


async def run_pre_delete_hook(cluster: SimulatedCluster) -> None:
    """`gpu-operator` with the arguments of the release's pre-delete Job (`helm get hooks`),
    against the cluster; it must succeed."""
    hooks = yaml.safe_load_all(helm(cluster, "get", "hooks", "gpu-operator"))
    (job,) = [
        h
        for h in hooks
        if h and h["kind"] == "Job" and h["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    ]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "components.cli",
        *args,
        f"--kubeconfig={cluster.kubeconfig}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()


async def test_install_upgrade_uninstall(cluster: SimulatedCluster, client: Client) -> None:
    await client.apply(OPERATOR_NAMESPACE)
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

        # The pre-delete hook's command as the chart renders it (kwok runs no container: its
        # Job's pod is only marked complete), here against the cluster's garbage collector.
        # One operand is slow to go (held by a finalizer of another controller, say): the
        # policy must outlast it, and the hook wait for both.
        uid = (await client.get_live(CLUSTER_POLICY, "cluster-policy"))["metadata"]["uid"]
        owned = await owned_by(client, uid)
        assert sum(o.startswith("DaemonSet/") for o in owned) >= 3, owned
        assert sum(o.startswith("Pod/") for o in owned) >= gpu_nodes, owned
        held = next(o.removeprefix("DaemonSet/") for o in owned if o.startswith("DaemonSet/"))
        hold = {"metadata": {"finalizers": [HOLD]}}
        await client.patch(DAEMONSET, held, hold, namespace=NAMESPACE)
        hook = asyncio.create_task(run_pre_delete_hook(cluster))

        async def held_deleted() -> bool:
            ds = await client.get_live(DAEMONSET, held, NAMESPACE)
            return bool(ds["metadata"].get("deletionTimestamp"))

        await eventually(held_deleted, f"the garbage collector deleting DaemonSet {held}")
        assert await policy_uid(client) == uid, "the policy went before an object it owned"
        assert not hook.done(), "the hook returned while the policy was there"
        await eventually(lambda: release(client, held), f"DaemonSet {held} released")
        await hook
        assert await owned_by(client, uid) == []
        assert await policy_uid(client) is None

        helm(cluster, "uninstall", "gpu-operator", "--wait", "--timeout", "5m")

        async def nothing_left() -> bool:
            policies = await client.list_live(CLUSTER_POLICY)
            daemonsets = await client.list_live(DAEMONSET, namespace=NAMESPACE)
            return not policies and not daemonsets

        await eventually(nothing_left, "no ClusterPolicy and no operand DaemonSet left", 300)
    finally:
        operator.stop()
    assert "Traceback" not in operator.log_tail(400)


async def test_install_with_the_gpucluster_instead_of_the_clusterpolicy(
    cluster: SimulatedCluster, client: Client
) -> None:
    """`gpuCluster.deployCR=true, clusterPolicy.deployCR=false`: the release's GPUCluster
    goes ready and every GPU node publishes its GPUs as a ResourceSlice. The nodes get what a
    GPUCluster does not deploy (a driver on the host), taken away again for the next test; no
    `nvidia` RuntimeClass, which only a container toolkit brings."""
    gpu_nodes = cluster.gpu_nodes
    await client.apply(OPERATOR_NAMESPACE)
    for node in gpu_nodes:
        await client.patch(
            NODE, node, {"metadata": {"annotations": {ANNOTATION_HOST_DRIVER: "580.95.05"}}}
        )
    helm(
        cluster,
        "install",
        "gpu-operator",
        str(CHART),
        "--set",
        "gpuCluster.deployCR=true",
        "--set",
        "clusterPolicy.deployCR=false",
        "--set",
        "dcgmExporter.serviceMonitor.enabled=false",
        "--wait",
        "--timeout",
        "5m",
    )
    assert await client.list_live(CLUSTER_POLICY) == []
    operator = OperatorProcess(cluster.kubeconfig, cluster.workdir / "logs" / "helm-dra.log")
    operator.start()
    try:
        last: dict[str, object] = {}

        async def ready() -> bool:
            found = await client.get_live(GPU_CLUSTER, "gpu-cluster")
            last.update(found.get("status") or {})
            return last.get("state") == "ready"

        try:
            await eventually(ready, "the release's GPUCluster ready", 240)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its status said last: {last}") from None
        slices = await client.list_live(RESOURCE_SLICE)
        assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(gpu_nodes)
        # The pre-delete hook deletes the GPUCluster while the operator still runs to
        # release its finalizer (Helm's own deletion would remove the operator with it).
        await run_pre_delete_hook(cluster)
        assert await client.list_live(GPU_CLUSTER) == [], "the hook returned before it went"
        helm(cluster, "uninstall", "gpu-operator", "--wait", "--timeout", "5m")

        async def nothing_left() -> bool:
            clusters = await client.list_live(GPU_CLUSTER)
            daemonsets = await client.list_live(DAEMONSET, namespace=NAMESPACE)
            return not clusters and not daemonsets

        await eventually(nothing_left, "no GPUCluster and no operand DaemonSet left", 300)
    finally:
        operator.stop()
        for node in gpu_nodes:
            await client.patch(
                NODE, node, {"metadata": {"annotations": {ANNOTATION_HOST_DRIVER: None}}}
            )
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
