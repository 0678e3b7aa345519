"""The nodes informer's schema caches what its drop list would: no controller reads less."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.controllers._cached_shapes import NODE_DROP, NodeAsRead
from components.operands import GPUNode
from components.upgrade import node_view
from reconciler._decode import ObjectDecoder
from reconciler.lowlevel import Trimmer

pytestmark = pytest.mark.unit

CONDITIONS = [
    {
        "type": t,
        "status": "True" if t == "Ready" else "False",
        "reason": f"Kubelet{t}",
        "message": f"kubelet says {t}",
        "lastHeartbeatTime": "2026-12-05T10:00:00Z",
        "lastTransitionTime": "2026-12-05T09:00:00Z",
    }
    for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
]
KUBELET_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-node-7",
        "uid": "0d6c",
        "resourceVersion": "91823",
        "creationTimestamp": "2026-12-05T08:00:00Z",
        "labels": {
            "kubernetes.io/hostname": "gpu-node-7",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/kernel-version.full": "5.15.0-105-generic",
            "nvidia.com/gpu.deploy.driver": "true",
            "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        },
        "annotations": {"node.alpha.kubernetes.io/ttl": "0", "nvidia.com/gpu-driver-x": "1"},
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {
        "podCIDR": "10.64.7.0/24",
        "podCIDRs": ["10.64.7.0/24"],
        "providerID": "aws:///us-east-1a/i-0abc",
        "unschedulable": True,
        "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    },
    "status": {
        "capacity": {"cpu": "64", "nvidia.com/gpu": "8"},
        "allocatable": {"cpu": "63", "nvidia.com/gpu": "8"},
        "conditions": CONDITIONS,
        "addresses": [{"type": "InternalIP", "address": "172.16.0.8"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "f00",
            "bootID": "b00",
            "kernelVersion": "5.15.0-105-generic",
            "osImage": "Ubuntu 22.04.4 LTS",
            "containerRuntimeVersion": "containerd://1.7.20",
            "kubeletVersion": "v1.33.0",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": [{"names": [f"image-{i}:v1"], "sizeBytes": i} for i in range(40)],
        "runtimeHandlers": [{"name": "nvidia", "features": {"recursiveReadOnlyMounts": True}}],
        "features": {"supplementalGroupsPolicy": True},
        "config": {},
    },
}
FRESH_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "new", "labels": {"kubernetes.io/hostname": "new"}},
    "spec": {},
    "status": {"conditions": None},
}


def _cached(node: dict[str, Any], schema: Any) -> dict[str, Any]:
    trimmer = Trimmer(NODE_DROP, schema=schema)
    decoder = ObjectDecoder(trimmer.decoder_paths, schema)
    event = json.dumps({"type": "MODIFIED", "object": node}, separators=(",", ":")).encode()
    return trimmer(decoder.event(event)[1])


@pytest.mark.parametrize("node", [KUBELET_NODE, FRESH_NODE], ids=["kubelet", "fresh"])
def test_the_schema_caches_what_the_drop_list_caches(node: dict[str, Any]) -> None:
    assert _cached(node, NodeAsRead) == _cached(node, None)


def test_what_the_controllers_read_of_a_cordoned_gpu_node_survives() -> None:
    cached = _cached(KUBELET_NODE, NodeAsRead)
    assert "managedFields" not in cached["metadata"] and "images" not in cached["status"]
    assert cached["spec"] == {
        "unschedulable": True,
        "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    }
    assert GPUNode.from_node(cached) == GPUNode.from_node(KUBELET_NODE)
    assert node_view(cached) == node_view(KUBELET_NODE)
