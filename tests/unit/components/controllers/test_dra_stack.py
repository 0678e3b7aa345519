"""A GPUCluster beside a ClusterPolicy, and the node labels of the DRA stack: which of
the two is acted on (the one that came first), and what a GPU node is labelled with while
a GPUCluster is the cluster's stack (the reference's GPUCluster deploy labels)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from components.controllers import LabelPolicy, node_label_patch
from components.controllers._policies import Stacks, cluster_first
from reconciler import Client

pytestmark = pytest.mark.unit

NFD_GPU = {"feature.node.kubernetes.io/pci-10de.present": "true"}
DEPLOY = "nvidia.com/gpu.deploy."
DRA_SET = {
    DEPLOY + n for n in ("driver", "dra-driver", "dra-validator", "dcgm-dra", "dcgm-exporter-dra")
}
DRA = LabelPolicy(dra=True)


def obj(kind: str, name: str, created: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "metadata": {"name": name, "creationTimestamp": created}}
    if status is not None:
        out["status"] = status
    return out


class Cache:
    """What `Stacks` reads: the cached ClusterPolicies and GPUClusters."""

    def __init__(self, policies: list[Any], clusters: list[Any] | None) -> None:
        self.policies = policies
        self.clusters = clusters

    def list(self, gvk: Any) -> list[Any]:
        if gvk.kind == "ClusterPolicy":
            return self.policies
        assert self.clusters is not None, "GPUClusters are not watched without their CRD"
        return self.clusters


def stacks_of(policies: list[Any], clusters: list[Any] | None, served: bool = True) -> Stacks:
    return Stacks(cast(Client, Cache(policies, clusters)), served=served)


def apply(labels: dict[str, str], patch: dict[str, str | None]) -> dict[str, str]:
    out = dict(labels)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def test_a_gpu_node_of_the_dra_stack_gets_its_deploy_labels_only() -> None:
    patch = node_label_patch(NFD_GPU, DRA)
    assert {k for k in patch if k.startswith(DEPLOY)} == DRA_SET
    assert patch["nvidia.com/gpu.present"] == "true"


def test_moving_between_the_stacks_swaps_the_deploy_labels() -> None:
    on_policy = apply(NFD_GPU, node_label_patch(NFD_GPU, LabelPolicy()))
    assert DEPLOY + "device-plugin" in on_policy
    on_dra = apply(on_policy, node_label_patch(on_policy, DRA))
    assert {k for k in on_dra if k.startswith(DEPLOY)} == DRA_SET
    back = apply(on_dra, node_label_patch(on_dra, LabelPolicy()))
    assert DEPLOY + "dra-driver" not in back and DEPLOY + "device-plugin" in back


def test_a_paused_dra_label_keeps_its_value_and_a_host_driver_is_pre_installed() -> None:
    labels = {**NFD_GPU, DEPLOY + "dra-driver": "paused-for-driver-upgrade"}
    patch = node_label_patch(labels, DRA)
    assert DEPLOY + "dra-driver" not in patch
    assert node_label_patch(NFD_GPU, DRA, host_driver=True)[DEPLOY + "driver"] == "pre-installed"


def test_a_node_without_a_gpu_gets_none() -> None:
    assert node_label_patch({"kubernetes.io/hostname": "cpu"}, DRA) == {}


def test_the_older_one_is_acted_on_and_the_later_refused() -> None:
    policy = obj("ClusterPolicy", "p", "2026-01-01T00:00:01Z")
    cluster = obj("GPUCluster", "gpu-cluster", "2026-01-01T00:00:02Z")
    stacks = stacks_of([policy], [cluster])
    assert stacks.cluster_refused_by(cluster) is policy
    assert stacks.policy_refused_by(policy) is None
    assert stacks.active_gpu_cluster() is None and stacks.active_policy() is policy
    older = obj("GPUCluster", "gpu-cluster", "2026-01-01T00:00:00Z")
    stacks = stacks_of([policy], [older])
    assert stacks.policy_refused_by(policy) is older
    assert stacks.active_gpu_cluster() is older and stacks.active_policy() is None


def test_in_the_same_second_the_one_acted_on_wins() -> None:
    second = "2026-01-01T00:00:00Z"
    acted = {"state": "ready", "conditions": [{"type": "Ready", "reason": "Reconciled"}]}
    refused = {
        "state": "notReady",
        "conditions": [{"type": "Ready", "reason": "GPUClusterExists"}],
    }
    policy = obj("ClusterPolicy", "p", second)
    cluster = obj("GPUCluster", "gpu-cluster", second, acted)
    assert cluster_first(policy, cluster)
    assert not cluster_first(
        obj("ClusterPolicy", "p", second, refused) | {}, obj("GPUCluster", "g", second)
    )
    # Neither acted on yet: the ClusterPolicy, the reference's default.
    assert not cluster_first(policy, obj("GPUCluster", "gpu-cluster", second))


def test_without_the_gpucluster_crd_the_policy_is_never_refused() -> None:
    policy = obj("ClusterPolicy", "p", "2026-01-01T00:00:01Z")
    stacks = stacks_of([policy], None, served=False)
    assert stacks.policy_refused_by(policy) is None and stacks.active_policy() is policy
