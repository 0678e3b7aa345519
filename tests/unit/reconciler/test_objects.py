"""Kinds and paths."""

from __future__ import annotations

import pytest

from reconciler import GVK, Request, owner_reference
from reconciler.lowlevel import Resource

pytestmark = pytest.mark.unit


def test_gvk_round_trips_api_version() -> None:
    assert GVK.from_api_version("apps/v1", "DaemonSet") == GVK("apps", "v1", "DaemonSet")
    assert GVK.from_api_version("v1", "Node") == GVK("", "v1", "Node")
    assert GVK("", "v1", "Node").api_version == "v1"
    assert GVK.of({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy"}).group == "nvidia.com"


def test_paths_for_core_grouped_namespaced_and_cluster_scoped() -> None:
    pods = Resource(GVK("", "v1", "Pod"), "pods", True)
    assert pods.path("ns") == "/api/v1/namespaces/ns/pods"
    assert pods.path() == "/api/v1/pods"
    assert pods.path("ns", "p", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    policies = Resource(GVK("nvidia.com", "v1", "ClusterPolicy"), "clusterpolicies", False)
    assert (
        policies.path("ignored", "cp", "status") == "/apis/nvidia.com/v1/clusterpolicies/cp/status"
    )


def test_request_and_owner_reference() -> None:
    owner = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cp", "uid": "u"},
    }
    ref = owner_reference(owner)
    assert ref["controller"] is True and ref["uid"] == "u"
    assert Request.of({"metadata": {"name": "n"}}) == Request("", "n")
    assert str(Request("a", "b")) == "a/b"
