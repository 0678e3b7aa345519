"""Kinds and paths."""

from __future__ import annotations

import pytest

from reconciler import (
    GVK,
    Request,
    creation_timestamp_of,
    display_name,
    display_name_of,
    is_deleting,
    labels_of,
    metadata_of,
    owner_reference,
    uid_of,
)
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


def test_accessors_read_what_is_there_and_a_default_for_what_is_not() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "deletionTimestamp": "2026-12-01T11:00:00Z",
        }
    }
    assert (uid_of(pod), is_deleting(pod)) == ("u1", True)
    assert creation_timestamp_of(pod) == "2026-12-01T10:00:00Z"
    assert display_name_of(pod) == "ns/p"
    assert display_name("", "node-1") == "node-1"
    bare: dict[str, object] = {"kind": "Node"}
    assert (uid_of(bare), is_deleting(bare), creation_timestamp_of(bare)) == ("", False, "")
    assert is_deleting({"metadata": {"deletionTimestamp": None}}) is False


def test_metadata_of_is_the_object_s_own_so_a_writer_changes_it_in_place() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}}
    metadata_of(obj)["labels"]["b"] = "2"
    assert labels_of(obj) == {"a": "1", "b": "2"}
    assert metadata_of({"metadata": ["not", "a", "mapping"]}) == {}
