"""Which policy governs the ClusterPolicy's drivers, and whether it upgrades them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.operands.readiness import pod_ready
from components.upgrade import pod_as_read, pod_view
from components.upgrade._reader import ClusterReader

pytestmark = pytest.mark.unit


class ListedPolicies:
    """Stands in for the cache: the reader only lists ClusterPolicies here."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = list(objects)

    def list(self, gvk: Any, **_: Any) -> list[dict[str, Any]]:
        return self.objects if gvk.kind == "ClusterPolicy" else []


def policy(name: str, created: str, **spec: Any) -> dict[str, Any]:
    driver = {"upgradePolicy": {"autoUpgrade": True}}
    return {
        "metadata": {"name": name, "uid": name, "generation": 1, "creationTimestamp": created},
        "spec": {"driver": driver, **spec},
    }


def pool_of(*objects: dict[str, Any]) -> Any:
    return ClusterReader(ListedPolicies(*objects), "gpu-operator").cluster_policy_pool()  # type: ignore[arg-type]


def test_the_active_cluster_policy_governs() -> None:
    pool = pool_of(policy("young", "2026-02-01T00:00:00Z"), policy("old", "2026-01-01T00:00:00Z"))
    assert pool is not None and pool.name == "old" and pool.enabled


def test_sandbox_workloads_turn_driver_upgrades_off() -> None:
    sandbox = {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"}}
    pool = pool_of(policy("p", "2026-01-01T00:00:00Z", **sandbox))
    assert pool is not None and not pool.enabled
    off = {"sandboxWorkloads": {"enabled": False}}
    pool = pool_of(policy("p", "2026-01-01T00:00:00Z", **off))
    assert pool is not None and pool.enabled


def _kwok_pod(ready: str) -> dict[str, Any]:
    """A Running pod as kwok reports some stages: no container statuses, conditions only."""
    kinds = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": ready if t in ("Ready", "ContainersReady") else "True"}
                for t in kinds
            ],
        },
    }


@pytest.mark.parametrize("ready", ["True", "False"])
def test_the_pod_transform_keeps_what_readiness_is_judged_from(ready: str) -> None:
    """The shared pod informer keeps only the Ready condition: every reader of a pod's
    readiness (the upgrade's pod view, operand readiness) judges it as before."""
    before = _kwok_pod(ready)
    after = pod_as_read(copy.deepcopy(before))
    assert after["status"]["conditions"] == [{"type": "Ready", "status": ready}]
    assert pod_view(after).ready is pod_view(before).ready is (ready == "True")
    assert pod_ready(after) is pod_ready(before) is (ready == "True")
    assert pod_as_read({"metadata": {"name": "pending"}}) == {"metadata": {"name": "pending"}}


@pytest.mark.parametrize("gpu", [True, False])
def test_the_pod_transform_keeps_the_containers_that_ask_for_a_gpu(gpu: bool) -> None:
    """Operand pods lose their container list (nothing reads it); a GPU pod keeps the
    containers that ask for a GPU, so the walk still finds it among the node's pods."""
    limits = {"nvidia.com/gpu": 1} if gpu else {"cpu": "1"}
    before = _kwok_pod("True")
    before["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    before["spec"]["containers"] = [
        {"name": "sidecar", "image": "envoy"},
        {"name": "cuda", "image": "cuda", "resources": {"limits": limits}},
    ]
    after = pod_as_read(copy.deepcopy(before))
    assert pod_view(after).gpu is pod_view(before).gpu is gpu
    assert "initContainers" not in after["spec"]
    if gpu:
        assert after["spec"]["containers"] == [{"name": "cuda", "resources": {"limits": limits}}]
    else:
        assert "containers" not in after["spec"]


def test_the_pool_follows_each_version_of_the_policy() -> None:
    """Built once per version (every node reconcile asks), rebuilt when the policy changes."""
    cp = policy("p", "2026-01-01T00:00:00Z")
    cp["metadata"]["resourceVersion"] = "1"
    policies = ListedPolicies(cp)
    reader = ClusterReader(policies, "gpu-operator")  # type: ignore[arg-type]
    first = reader.cluster_policy_pool()
    assert first is not None and first.enabled
    assert reader.cluster_policy_pool() is first
    off = copy.deepcopy(cp)
    off["metadata"].update(resourceVersion="2", generation=2)
    off["spec"]["driver"]["upgradePolicy"]["autoUpgrade"] = False
    policies.objects = [off]
    second = reader.cluster_policy_pool()
    assert second is not None and not second.enabled and second.obj is off
