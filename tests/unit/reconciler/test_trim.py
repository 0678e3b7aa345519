"""What is dropped before caching, and what is kept."""

from __future__ import annotations

import sys

import pytest

from reconciler.lowlevel import Trimmer

pytestmark = pytest.mark.unit


def node() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "labels": {"nvidia.com/gpu.present": "true"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {"images": [{"names": ["x"], "sizeBytes": 1}], "nodeInfo": {"osImage": "u"}},
    }


def test_default_drops_managed_fields_and_last_applied() -> None:
    out = Trimmer()(node())
    assert "managedFields" not in out["metadata"]
    assert "annotations" not in out["metadata"], "an annotations map left empty is dropped"
    assert out["metadata"]["labels"] == {"nvidia.com/gpu.present": "true"}
    assert out["status"]["images"], "only what is asked is dropped"


def test_extra_paths_and_transform() -> None:
    def no_node_info(obj: dict[str, object]) -> dict[str, object]:
        obj["status"].pop("nodeInfo")  # type: ignore[attr-defined]
        return obj

    out = Trimmer([("status", "images"), ("spec", "missing", "deep")], no_node_info)(node())
    assert out["status"] == {}


def test_strings_are_shared_between_objects() -> None:
    trim = Trimmer()
    a, b = trim(node()), trim(node())
    key_a = next(iter(a["metadata"]["labels"]))
    key_b = next(iter(b["metadata"]["labels"]))
    assert key_a is key_b
    assert a["status"]["nodeInfo"]["osImage"] is b["status"]["nodeInfo"]["osImage"]
    assert sys.intern("nvidia.com/gpu.present") is key_a


def test_an_update_shares_the_unchanged_parts_of_the_copy_it_replaces() -> None:
    trimmer = Trimmer()
    first = trimmer(
        {
            "metadata": {"name": "n", "resourceVersion": "1", "labels": {"a": "b"}},
            "spec": {"x": ["y"]},
            "status": {"phase": "Pending"},
        }
    )
    second = trimmer(
        {
            "metadata": {"name": "n", "resourceVersion": "2", "labels": {"a": "b"}},
            "spec": {"x": ["y"]},
            "status": {"phase": "Running"},
        },
        first,
    )
    assert second == {
        "metadata": {"name": "n", "resourceVersion": "2", "labels": {"a": "b"}},
        "spec": {"x": ["y"]},
        "status": {"phase": "Running"},
    }
    assert second["spec"] is first["spec"]
    assert second["metadata"]["labels"] is first["metadata"]["labels"]
    assert second["status"] is not first["status"]
    assert first["status"] == {"phase": "Pending"}, "the replaced copy is left as it was"
