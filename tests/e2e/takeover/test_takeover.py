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
from gpusim import REFERENCE_DRIVER_DAEMONSET, SimulatedCluster, reference_install
from reconciler import GVK, Cache, Object, labels_of, name_of
from tests.e2e.operator._harness import NAMESPACE, OperatorProcess
from tests.e2e.upgrade.conftest import POD, Watch, is_driver, is_gpu_pod, pod_ready
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


async def _start_from_the_reference(
    watch: Watch, gpu_nodes: list[str], upgrade_policy: dict[str, Any], driver_daemonset: str
) -> str:
    """The policy, the reference's install for it with GPU workloads running on its driver
    on every GPU node (one each); the policy's uid."""
    spec: dict[str, Any] = {
        "driver": {"upgradePolicy": upgrade_policy},
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
    installed = await reference_install(
        watch.client,
        policy,
        namespace=NAMESPACE,
        gpu_nodes=gpu_nodes,
        driver_daemonset=driver_daemonset,
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
    return str(policy["metadata"]["uid"])


def _said_ready(watch: Watch, policy: Object, early: list[str]) -> bool:
    """Whether ours says the policy is `ready` (the reference's status has no
    observedGeneration); `early` gets it when a reference driver pod still runs."""
    status = policy.get("status") or {}
    said = status.get("state") == "ready" and "observedGeneration" in status
    reference_drivers = [p for p in watch.drivers() if not ours(p)]
    if said and reference_drivers:
        early.append(f"ready while {len(reference_drivers)} reference driver pods run")
    return said


async def _taken_over(watch: Watch, uid: str, gpu_nodes: list[str], early: list[str]) -> None:
    """Wait until every GPU node runs our driver, nothing of the reference's is left and
    the policy says `ready`; `early` gets any moment it said so before."""
    seen: list[str] = []

    async def taken_over() -> bool:
        cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
        status = cp.get("status") or {}
        said_ready = _said_ready(watch, cp, early)
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


async def test_ours_takes_over_a_cluster_the_reference_ran_one_walk_at_a_time(
    operator: OperatorProcess, takeover_cluster: SimulatedCluster, watch: Watch
) -> None:
    gpu_nodes = takeover_cluster.gpu_nodes
    uid = await _start_from_the_reference(
        watch,
        gpu_nodes,
        {"autoUpgrade": True, "maxParallelUpgrades": MAX_PARALLEL, "maxUnavailable": "50%"},
        REFERENCE_DRIVER_DAEMONSET,
    )

    # The reference's status says ready; from here only ours may say so, and not early.
    invariants = watch.invariants(MAX_PARALLEL, len(gpu_nodes) // 2, set())
    one_driver = OneDriverPerNode(watch.cache)
    watch.pods.add_handler(one_driver)
    early: list[str] = []
    operator.start()
    await _taken_over(watch, uid, gpu_nodes, early)
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


RENAMED_DRIVER = "nvidia-driver-daemonset-ubuntu22.04"
"""The reference's driver DaemonSet under another name than ours (per-OS or precompiled
drivers, NVIDIADriver pools, a rename): fenced and handed over, not adopted."""
TAKEOVER_CONDITION = "DriverTakeover"


@dataclass
class ReferenceDriverDeletions:
    """Every reference driver pod seen going (deletion begun or deleted), by name with its
    node, and those that went while a GPU pod was live on their node."""

    cache: Cache
    deleted: dict[str, str] = field(default_factory=dict)
    under_gpu_pods: list[str] = field(default_factory=list)

    def on_add(self, obj: Object) -> None:
        self.check(obj, gone=False)

    def on_update(self, old: Object, new: Object) -> None:
        self.check(new, gone=False)

    def on_delete(self, obj: Object) -> None:
        self.check(obj, gone=True)

    def check(self, pod: Object, *, gone: bool) -> None:
        if not is_driver(pod) or ours(pod) or name_of(pod) in self.deleted:
            return
        if not gone and not pod["metadata"].get("deletionTimestamp"):
            return
        node = str(pod["spec"].get("nodeName") or "")
        self.deleted[name_of(pod)] = node
        live = [
            name_of(p)
            for p in self.cache.list(POD)
            if p["spec"].get("nodeName") == node
            and is_gpu_pod(p)
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") in ("Pending", "Running")
        ]
        if live:
            self.under_gpu_pods.append(f"{name_of(pod)} on {node} under GPU pods {live}")


async def _as_the_reference_left_it(operator: OperatorProcess, watch: Watch) -> None:
    """Back to a cluster without an operator or a policy (the module's first test took it
    over): ours stopped, the policy and what it owned garbage collected, the workload gone.
    The nodes keep their labels; the reference's install sets its own again."""
    operator.stop()
    await watch.client.delete(DEPLOYMENT, "train", namespace="work", missing_ok=True)
    uid = ""
    for cp in await watch.client.list_live(CLUSTER_POLICY):
        uid = str(cp["metadata"]["uid"])
        await watch.client.delete(CLUSTER_POLICY, name_of(cp), missing_ok=True)

    left: list[str] = []

    async def cleared() -> bool:
        policies = await watch.client.list_live(CLUSTER_POLICY)
        left[:] = [f"ClusterPolicy {name_of(cp)}" for cp in policies]
        for gvk, namespace in REFERENCE_KINDS:
            for obj in await watch.client.list_live(gvk, namespace=namespace):
                refs = obj["metadata"].get("ownerReferences") or ()
                if uid and any(r.get("uid") == uid for r in refs):
                    left.append(f"{gvk.kind} {name_of(obj)}")
        left.extend(name_of(p) for p in watch.cache.list(POD, namespace=NAMESPACE))
        left.extend(name_of(p) for p in watch.cache.list(POD, namespace="work"))
        return not left

    try:
        await eventually(cleared, "the policy, what it owned and every pod gone", 120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; left: {left}") from None


def _condition(policy: Object, kind: str) -> dict[str, Any] | None:
    for c in (policy.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


async def test_with_auto_upgrade_off_the_reference_drivers_stay_until_the_admin_moves_them(
    operator: OperatorProcess, takeover_cluster: SimulatedCluster, watch: Watch
) -> None:
    """A takeover of a renamed reference driver DaemonSet with `autoUpgrade: false`, GPU jobs
    running: no reference driver pod goes by itself (its DaemonSet is `OnDelete`, as the
    reference's is); the admin moves one node by draining it and deleting its driver pod,
    then all the others by turning auto upgrade on, which walks them within the limits."""
    await _as_the_reference_left_it(operator, watch)
    gpu_nodes = takeover_cluster.gpu_nodes
    limits = {"maxParallelUpgrades": 1, "maxUnavailable": 1}
    uid = await _start_from_the_reference(
        watch, gpu_nodes, {"autoUpgrade": False, **limits}, RENAMED_DRIVER
    )
    invariants = watch.invariants(1, 1, set())
    deletions = ReferenceDriverDeletions(watch.cache)
    one_driver = OneDriverPerNode(watch.cache)
    watch.pods.add_handler(deletions)
    watch.pods.add_handler(one_driver)
    early: list[str] = []
    operator.start()

    # Ours fences the reference's driver DaemonSet to the labelled nodes, applies its own,
    # and says in the policy's status that the nodes wait for the admin.
    seen: list[str] = []

    async def held() -> bool:
        cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
        _said_ready(watch, cp, early)
        waiting = _condition(cp, TAKEOVER_CONDITION)
        labelled = [n for n in watch.gpu_nodes() if DRIVER_TAKEOVER_LABEL in labels_of(n)]
        seen[:] = [f"condition {waiting}", f"labelled {[name_of(n) for n in labelled]}"]
        return bool(deletions.deleted) or (
            waiting is not None
            and waiting.get("reason") == "AutoUpgradeOff"
            and f"{len(gpu_nodes)} nodes still run" in str(waiting.get("message"))
            and len(labelled) == len(gpu_nodes)
        )

    try:
        await eventually(held, "the takeover waiting for the admin", 120)
    except AssertionError as exc:
        raise AssertionError("\n".join([str(exc), *seen])) from None
    assert deletions.deleted == {}, (
        f"{len(deletions.deleted)} of {len(gpu_nodes)} reference driver pods deleted with "
        f"auto upgrade off: {deletions.deleted}; under GPU pods: {deletions.under_gpu_pods}"
    )
    assert sorted(p["spec"]["nodeName"] for p in watch.drivers() if not ours(p)) == gpu_nodes

    # The admin moves one node as they would restart an OnDelete driver: drain, delete the
    # driver pod. Ours arrives there; every other node keeps the reference's.
    first = gpu_nodes[0]
    await watch.client.patch(NODE, first, {"spec": {"unschedulable": True}})
    for p in watch.cache.list(POD, namespace="work"):
        if p["spec"].get("nodeName") == first:
            await watch.client.delete(POD, name_of(p), namespace="work")

    def drained() -> bool:
        return not [p for p in watch.cache.list(POD) if p["spec"].get("nodeName") == first
                    and is_gpu_pod(p)]  # fmt: skip

    await eventually(drained, f"no GPU pod left on {first}", 60)
    (reference,) = [p for p in watch.drivers() if p["spec"].get("nodeName") == first]
    # Ours is stopped meanwhile, so what it finds is not the deletion but the pod the
    # reference's (fenced, OnDelete) DaemonSet put back: that one must give way too.
    operator.pause()
    try:
        await watch.client.delete(POD, name_of(reference), namespace=NAMESPACE)

        def put_back() -> bool:
            on_first = [p for p in watch.cache.list(POD, namespace=NAMESPACE)
                        if is_driver(p) and p["spec"].get("nodeName") == first]  # fmt: skip
            return len(on_first) == 1 and name_of(on_first[0]) != name_of(reference)

        await eventually(put_back, f"the reference's driver pod put back on {first}", 60)
    finally:
        operator.resume()

    async def moved() -> bool:
        node = next(n for n in watch.gpu_nodes() if name_of(n) == first)
        on_first = [p for p in watch.drivers() if p["spec"].get("nodeName") == first]
        cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
        _said_ready(watch, cp, early)
        waiting = _condition(cp, TAKEOVER_CONDITION) or {}
        seen[:] = [f"drivers on {first}: {[name_of(p) for p in on_first]}", f"{waiting}"]
        return (
            DRIVER_TAKEOVER_LABEL not in labels_of(node)
            and len(on_first) == 1
            and ours(on_first[0])
            and pod_ready(on_first[0])
            and f"{len(gpu_nodes) - 1} nodes still run" in str(waiting.get("message"))
        )

    try:
        await eventually(moved, f"our driver on {first}, the condition counting the rest", 120)
    except AssertionError as exc:
        raise AssertionError("\n".join([str(exc), *seen])) from None
    await watch.client.patch(NODE, first, {"spec": {"unschedulable": False}})
    assert set(deletions.deleted.values()) == {first}
    others = sorted(p["spec"]["nodeName"] for p in watch.drivers() if not ours(p))
    assert others == gpu_nodes[1:]

    # All the others: auto upgrade on walks them, one at a time.
    patch = {"spec": {"driver": {"upgradePolicy": {"autoUpgrade": True, **limits}}}}
    await watch.client.patch(CLUSTER_POLICY, POLICY, patch)
    await _taken_over(watch, uid, gpu_nodes, early)
    watch.drop(invariants)
    watch.pods.remove_handler(deletions)
    watch.pods.remove_handler(one_driver)

    assert invariants.violations == []
    assert deletions.under_gpu_pods == []
    assert one_driver.violations == []
    assert early == []
    assert set(deletions.deleted.values()) == set(gpu_nodes)
    assert invariants.cordons_seen == set(gpu_nodes)
    assert invariants.peak_in_progress == 1
    cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
    assert _condition(cp, TAKEOVER_CONDITION) is None
