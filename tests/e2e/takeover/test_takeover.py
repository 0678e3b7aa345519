"""Migrating from NVIDIA's operator: stop it, start ours with the same ClusterPolicy.

The cluster starts as the reference left it (`gpusim.reference_install`): its DaemonSets
(an MPS control daemon and a MIG manager among them, which this policy does not ask for),
RBAC, ConfigMaps, RuntimeClass and Service, all owned by the policy; its driver on every
GPU node, GPU workloads running on it. Ours must move every node to its own driver through
the upgrade walk, within the policy's limits, never with two driver pods on a node or a GPU
pod on a node whose driver restarts; leave nothing of the reference's behind; and say
`ready` only once every GPU node runs our driver.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from components.api import COMPONENT_LABEL, DRIVER_TAKEOVER_LABEL, is_foreign
from components.upgrade import STATE_LABEL
from gpusim import SimulatedCluster, reference_install
from reconciler import GVK, Cache, Object, labels_of, name_of
from tests.e2e.operator._harness import NAMESPACE, OperatorProcess
from tests.e2e.upgrade.conftest import POD, Watch, is_driver, pod_ready
from tests.polling import eventually

from .conftest import TAKEOVER_CLUSTER

POLICY = "cluster-policy"
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
NODE = GVK("", "v1", "Node")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
MAX_PARALLEL = 2
REFERENCE_KINDS = (
    (GVK("apps", "v1", "DaemonSet"), NAMESPACE),
    (GVK("", "v1", "ConfigMap"), NAMESPACE),
    (GVK("", "v1", "ServiceAccount"), NAMESPACE),
    (GVK("", "v1", "Service"), NAMESPACE),
    (GVK("rbac.authorization.k8s.io", "v1", "Role"), NAMESPACE),
    (GVK("rbac.authorization.k8s.io", "v1", "RoleBinding"), NAMESPACE),
    (GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"), None),
    (GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"), None),
    (GVK("node.k8s.io", "v1", "RuntimeClass"), None),
)


@dataclass
class OneDriverPerNode:
    """Records any moment a node has two live driver pods bound to it."""

    cache: Cache
    violations: list[str] = field(default_factory=list)

    def on_add(self, obj: Object) -> None:
        self.check()

    def on_update(self, old: Object, new: Object) -> None:
        self.check()

    def on_delete(self, obj: Object) -> None:
        self.check()

    def check(self) -> None:
        bound = Counter(
            p["spec"].get("nodeName")
            for p in self.cache.list(POD, namespace=NAMESPACE)
            if is_driver(p)
            and p["spec"].get("nodeName")
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )
        for node, count in bound.items():
            if count > 1:
                self.violations.append(f"{count} driver pods on {node}")


def ours(obj: Object) -> bool:
    return COMPONENT_LABEL in labels_of(obj)


async def _reference_left(watch: Watch, uid: str) -> list[str]:
    left = []
    for gvk, namespace in REFERENCE_KINDS:
        for obj in await watch.client.list_live(gvk, namespace=namespace):
            if is_foreign(obj, uid):
                left.append(f"{gvk.kind} {name_of(obj)}")
    return left


async def _workload(watch: Watch, replicas: int) -> None:
    pod: Object = {
        "metadata": {"labels": {"app": "train"}},
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
    await watch.client.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "train", "namespace": "work"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "train"}},
                "template": pod,
            },
        }
    )

    async def running() -> bool:
        pods = watch.cache.list(POD, namespace="work")
        return len(pods) == replicas and all(pod_ready(p) for p in pods)

    await eventually(running, f"{replicas} GPU pods running on the reference's driver", 180)


async def test_ours_takes_over_a_cluster_the_reference_ran_one_walk_at_a_time(
    operator: OperatorProcess, takeover_cluster: SimulatedCluster, watch: Watch
) -> None:
    spec: dict[str, Any] = {
        "driver": {
            "upgradePolicy": {
                "autoUpgrade": True,
                "maxParallelUpgrades": MAX_PARALLEL,
                "maxUnavailable": "50%",
            }
        },
        "migManager": {"enabled": False},
    }
    await watch.client.create(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": POLICY},
            "spec": spec,
        }
    )
    policy = await watch.client.get_live(CLUSTER_POLICY, POLICY)
    uid = policy["metadata"]["uid"]
    gpu_nodes = takeover_cluster.gpu_nodes
    installed = await reference_install(
        watch.client, policy, namespace=NAMESPACE, gpu_nodes=gpu_nodes
    )
    assert "nvidia-device-plugin-mps-control-daemon" in installed.daemonsets

    async def reference_running() -> bool:
        drivers = [p for p in watch.drivers() if pod_ready(p)]
        capacity = [
            n
            for n in watch.gpu_nodes()
            if ((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu") == "2"
        ]
        return len(drivers) == len(gpu_nodes) and len(capacity) == len(gpu_nodes)

    await eventually(reference_running, "the reference's driver on every GPU node", 180)
    await _workload(watch, replicas=len(gpu_nodes))

    # The reference's status says ready; from here only ours may say so, and not early.
    invariants = watch.invariants(MAX_PARALLEL, len(gpu_nodes) // 2, set())
    one_driver = OneDriverPerNode(watch.cache)
    watch.pods.add_handler(one_driver)
    early: list[str] = []
    operator.start()

    seen: list[str] = []

    async def taken_over() -> bool:
        cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
        status = cp.get("status") or {}
        reference_drivers = [p for p in watch.drivers() if not ours(p)]
        said_ready = status.get("state") == "ready" and "observedGeneration" in status
        if said_ready and reference_drivers:
            early.append(f"ready while {len(reference_drivers)} reference driver pods run")
        drivers = watch.drivers()
        on = Counter(p["spec"].get("nodeName") for p in drivers)
        states = set(watch.states().values())
        labelled = [n for n in watch.gpu_nodes() if DRIVER_TAKEOVER_LABEL in labels_of(n)]
        left = await _reference_left(watch, uid)
        seen[:] = [
            f"policy {status.get('state')}: {status.get('conditions')}",
            f"states {watch.states()}",
            f"drivers {[(name_of(p), p['spec'].get('nodeName'), ours(p)) for p in drivers]}",
            f"labelled {[name_of(n) for n in labelled]}",
            f"reference left {left}",
        ]
        return (
            said_ready
            and all(ours(p) and pod_ready(p) for p in drivers)
            and sorted(on) == sorted(gpu_nodes)
            and set(on.values()) == {1}
            and states <= {"upgrade-done", ""}
            and not labelled
            and not left
        )

    try:
        await eventually(taken_over, "every GPU node on our driver, the policy ready", 420)
    except AssertionError as exc:
        raise AssertionError("\n".join([str(exc), *seen])) from None
    watch.drop(invariants)
    watch.pods.remove_handler(one_driver)

    assert invariants.violations == []
    assert one_driver.violations == []
    assert early == []
    # Each node went through the walk (cordoned), at most MAX_PARALLEL at a time.
    assert invariants.cordons_seen == set(gpu_nodes)
    assert 1 <= invariants.peak_in_progress <= MAX_PARALLEL
    assert {labels_of(n).get(STATE_LABEL) for n in watch.gpu_nodes()} == {"upgrade-done"}
    # What the reference created under names we also use is ours now; the rest is gone.
    daemonsets = {
        name_of(d)
        for d in await watch.client.list_live(GVK("apps", "v1", "DaemonSet"), namespace=NAMESPACE)
    }
    assert "nvidia-device-plugin-mps-control-daemon" not in daemonsets
    assert "nvidia-mig-manager" not in daemonsets

    # The workload kept running (rescheduled off each node in turn). The ReplicaSet
    # controller, the scheduler and kwok bring back what the walk cleared off the last node;
    # our `ready` does not wait for them.
    def workload() -> list[Object] | None:
        ready = [p for p in watch.cache.list(POD, namespace="work") if pod_ready(p)]
        return ready if len(ready) == len(gpu_nodes) else None

    await eventually(workload, f"{len(gpu_nodes)} workload pods running again", 60)
    assert TAKEOVER_CLUSTER.gpu_nodes == len(gpu_nodes)
