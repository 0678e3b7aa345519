"""The pods informer's schema caches what its drop list would: no controller reads less."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.controllers._cached_shapes import POD_DROP, PodAsRead
from components.upgrade import pod_as_read, pod_view
from reconciler._decode import ObjectDecoder
from reconciler.lowlevel import Trimmer

pytestmark = pytest.mark.unit

META = {
    "name": "nvidia-driver-daemonset-x7k2p",
    "generateName": "nvidia-driver-daemonset-",
    "namespace": "gpu-operator",
    "uid": "5b1c",
    "resourceVersion": "4711",
    "generation": 1,
    "creationTimestamp": "2026-12-01T10:00:00Z",
    "labels": {"app": "nvidia-driver-daemonset", "controller-revision-hash": "7d9c6b5f4"},
    "annotations": {
        "nvidia.com/gpu-driver-kernel": "5.15.0-105-generic",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    },
    "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "9", "controller": True}
    ],
    "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
}
CONTAINER = {
    "name": "driver",
    "image": "nvcr.io/nvidia/driver:570.124.06-ubuntu22.04",
    "env": [{"name": "A", "value": "1"}],
    "volumeMounts": [{"name": "run", "mountPath": "/run/nvidia"}],
    "securityContext": {"privileged": True},
    "resources": {},
}
STATUS = {
    "phase": "Running",
    "hostIP": "10.0.0.1",
    "startTime": "2026-12-01T10:00:01Z",
    "qosClass": "BestEffort",
    "conditions": [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "x"}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ],
    "initContainerStatuses": [
        {"name": "init", "ready": True, "restartCount": 0, "state": {"terminated": {}}}
    ],
    "containerStatuses": [
        {"name": "driver", "ready": False, "restartCount": 12, "image": "x", "started": True}
    ],
}
OPERAND_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": META,
    "spec": {
        "nodeName": "gpu-node-1",
        "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
        "initContainers": [{**CONTAINER, "name": "init"}],
        "containers": [CONTAINER],
        "volumes": [{"name": "run", "hostPath": {"path": "/run/nvidia"}}],
        "tolerations": [{"operator": "Exists"}],
        "affinity": {"nodeAffinity": {}},
        "priorityClassName": "system-node-critical",
    },
    "status": STATUS,
}
GPU_POD_GOING: dict[str, Any] = {
    **OPERAND_POD,
    "metadata": {
        **META,
        "name": "train",
        "namespace": "ml",
        "deletionTimestamp": "2026-12-01T11:00:00Z",
        "deletionGracePeriodSeconds": 30,
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"kind": "Job", "name": "train", "uid": "j", "controller": True}],
    },
    "spec": {
        **OPERAND_POD["spec"],
        "containers": [
            {**CONTAINER, "name": "cuda", "resources": {"limits": {"nvidia.com/gpu": 2}}},
            {**CONTAINER, "name": "sidecar"},
        ],
    },
}
PENDING_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": META,
    "spec": {"containers": [CONTAINER]},
    "status": {"phase": "Pending", "conditions": None},
}


def _cached(pod: dict[str, Any], schema: Any) -> dict[str, Any]:
    trimmer = Trimmer(POD_DROP, pod_as_read, schema=schema)
    decoder = ObjectDecoder(trimmer.decoder_paths, schema)
    event = json.dumps({"type": "MODIFIED", "object": pod}).encode()
    return trimmer(decoder.event(event)[1])


@pytest.mark.parametrize(
    "pod", [OPERAND_POD, GPU_POD_GOING, PENDING_POD], ids=["operand", "gpu-going", "pending"]
)
def test_the_schema_caches_what_the_drop_list_caches(pod: dict[str, Any]) -> None:
    assert _cached(pod, PodAsRead) == _cached(pod, None)


def test_what_the_schema_keeps_of_a_gpu_pod_being_deleted() -> None:
    cached = _cached(GPU_POD_GOING, PodAsRead)
    assert cached["spec"]["containers"] == [
        {"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": 2}}}
    ]
    assert cached["metadata"]["finalizers"] == ["example.com/keep"]
    assert "managedFields" not in cached["metadata"]
    view = pod_view(cached)
    assert (view.gpu, view.terminating, view.owner_kind) == (True, True, "Job")
