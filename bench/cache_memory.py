"""Cache memory per Node and per Pod at 5,000 nodes, offline (no API server).

Builds the informer's store exactly as a list would (JSON bytes -> decode, skipping the
dropped paths -> trim and intern -> store with the default indices and one label index)
and measures what stays allocated, with tracemalloc. Also reports the untrimmed figure
for comparison. Target: <= 8 KB per trimmed Node. `bench/list_sync.py` measures the same
against a real API server.

Then the operator's own informers (`components.controllers._informers`: the trims the
controllers run with) on Nodes and on operand Pods as the DaemonSet controller and the
kubelet make them (from the full sample ClusterPolicy's rendered DaemonSets: each
template, the per-node affinity and the tolerations the DaemonSet controller adds, the
kubelet's status, managedFields): bytes per cached object, untrimmed and trimmed.
"""

from __future__ import annotations

import copy
import gc
import json
import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml

from _common import finish
from _nodes import NODE_DROP, gpu_node
from components.api import ClusterPolicy
from components.controllers._cached_shapes import NODE_DROP as OPERATOR_NODE_DROP
from components.controllers._cached_shapes import POD_DROP
from components.operands import OPERANDS, ClusterView, GPUNode
from components.upgrade import pod_as_read
from reconciler import by_label, by_owner_uid
from reconciler._decode import ObjectDecoder
from reconciler.lowlevel import DEFAULT_DROP, Store, Trimmer, by_namespace

NODES = 5000
PODS = 5000
REPO = Path(__file__).resolve().parent.parent
SAMPLE_POLICY = REPO / "config" / "samples" / "nvidia_v1_clusterpolicy_full.yaml"


def retained_per_node(payloads: list[bytes], trimmer: Trimmer | None) -> tuple[float, Store]:
    """Bytes kept per node after decoding as an informer does (skipping dropped paths)."""
    decoder = ObjectDecoder(trimmer.paths if trimmer else ())
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = Store(
        {
            "namespace": by_namespace,
            "owner": by_owner_uid,
            "label:nvidia.com/gpu.present": by_label("nvidia.com/gpu.present"),
        }
    )
    for payload in payloads:
        obj: dict[str, Any] = decoder.object(payload)
        store.upsert(trimmer(obj) if trimmer else obj)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / len(payloads), store


def operand_daemonsets() -> list[dict[str, Any]]:
    """Every DaemonSet the full sample policy renders for one node, as rendered."""
    policy = ClusterPolicy.from_dict(yaml.safe_load(SAMPLE_POLICY.read_text()))
    view = ClusterView(
        namespace="gpu-operator",
        gpu_nodes=[GPUNode.from_node(gpu_node(0))],
        has_service_monitor_crd=False,
        owner=None,
    )
    return [
        obj
        for operand in OPERANDS
        if operand.enabled(policy)
        for obj in operand.render(policy, view).objects
        if obj.get("kind") == "DaemonSet"
    ]


def operand_templates() -> list[dict[str, Any]]:
    """The pod templates of every DaemonSet the full sample policy renders for one node."""
    return [ds["spec"]["template"] for ds in operand_daemonsets()]


def _ts(i: int) -> str:
    return f"2026-11-30T12:{i % 60:02d}:{(i * 7) % 60:02d}Z"


def daemonset_pod(template: dict[str, Any], index: int) -> dict[str, Any]:
    """A pod of `template` on node `index`, Running, as the API server returns it."""
    node = f"gpu-node-{index:05d}"
    spec = copy.deepcopy(template["spec"])
    spec["nodeName"] = node
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    spec["tolerations"] = [*spec.get("tolerations", [])] + [
        {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": effect}
        for t, effect in (
            ("not-ready", "NoExecute"),
            ("unreachable", "NoExecute"),
            ("disk-pressure", "NoSchedule"),
            ("memory-pressure", "NoSchedule"),
            ("pid-pressure", "NoSchedule"),
            ("unschedulable", "NoSchedule"),
        )
    ]
    for key in ("dnsPolicy", "restartPolicy", "schedulerName", "serviceAccount"):
        spec.setdefault(key, "Default")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    name = f"{template['metadata']['labels'].get('app', 'pod')}-{index:05x}"

    def container_status(c: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": c["name"],
            "ready": True,
            "restartCount": 0,
            "started": True,
            "image": c.get("image", ""),
            "imageID": f"{c.get('image', '')}@sha256:{uuid.uuid4().hex}{uuid.uuid4().hex}",
            "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
            "state": {"running": {"startedAt": _ts(index)}},
        }

    def init_status(c: dict[str, Any]) -> dict[str, Any]:
        done = {"exitCode": 0, "reason": "Completed", "startedAt": _ts(index)}
        return {**container_status(c), "started": False, "state": {"terminated": done}}

    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _ts(index)}
        for t in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]
    managed = [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": _ts(index),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {f"f:{k}": {} for k in spec}},
        }
        for manager in ("kube-controller-manager", "kubelet")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": name[:-5],
            "namespace": "gpu-operator",
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(10_000 + index),
            "creationTimestamp": _ts(index),
            "labels": {
                **template["metadata"].get("labels", {}),
                "controller-revision-hash": "7d9c6b5f4",
                "pod-template-generation": "1",
            },
            "annotations": template["metadata"].get("annotations", {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": name[:-6],
                    "uid": "0b7a8f0e-3a51-4c8e-9b8e-3d1f2c4b5a69",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": managed,
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": "100.64.0.7",
            "podIPs": [{"ip": "100.64.0.7"}],
            "startTime": _ts(index),
            "qosClass": "BestEffort",
            "initContainerStatuses": [init_status(c) for c in spec.get("initContainers", [])],
            "containerStatuses": [container_status(c) for c in spec.get("containers", [])],
        },
    }


def operator_figures() -> dict[str, Any]:
    """Bytes per cached Node and Pod with the operator's own informer trims."""
    nodes = [json.dumps(gpu_node(i)).encode() for i in range(NODES)]
    templates = operand_templates()
    pods = [
        json.dumps(daemonset_pod(templates[i % len(templates)], i)).encode() for i in range(PODS)
    ]
    out: dict[str, Any] = {}
    for kind, payloads, drop in (("node", nodes, OPERATOR_NODE_DROP), ("pod", pods, POD_DROP)):
        untrimmed, keep = retained_per_node(payloads, Trimmer(intern=False))
        del keep
        before, keep = retained_per_node(payloads, Trimmer(PREVIOUS_DROP[kind]))
        del keep
        transform = pod_as_read if kind == "pod" else None
        trimmed, keep = retained_per_node(payloads, Trimmer(drop, transform))
        del keep
        out[kind] = {
            "json_bytes": round(sum(map(len, payloads)) / len(payloads)),
            "cached_bytes_default_trim": round(untrimmed),
            "cached_bytes_previous_trim": round(before),
            "cached_bytes_operator_trim": round(trimmed),
        }
        print(
            f"operator's {kind} informer, bytes per cached {kind} ({len(payloads)}): JSON "
            f"{out[kind]['json_bytes']}, default trim {round(untrimmed)}, previous trim "
            f"{round(before)}, now {round(trimmed)}"
        )
    return out


PREVIOUS_DROP: dict[str, tuple[tuple[str, ...], ...]] = {
    "node": (("status", "images"), ("status", "volumesAttached"), ("status", "volumesInUse")),
    "pod": (("spec", "volumes"),),
}
"""The operator's trims before issue 14 (images and volumes only), for comparison."""


def main() -> None:
    payloads = [json.dumps(gpu_node(i)).encode() for i in range(NODES)]
    raw_json = sum(map(len, payloads)) / NODES
    full, keep_full = retained_per_node(payloads, None)
    del keep_full
    managed_only, keep_m = retained_per_node(payloads, Trimmer(intern=False))
    del keep_m
    images_only, keep_i = retained_per_node(payloads, Trimmer([("status", "images")]))
    del keep_i
    trimmed, store = retained_per_node(payloads, Trimmer(NODE_DROP))
    assert len(store) == NODES
    rows = [
        ("JSON per node as the server sends it", raw_json),
        ("cached as decoded, untrimmed", full),
        (f"minus the {len(DEFAULT_DROP)} default paths (managedFields...)", managed_only),
        ("... and status.images, strings interned", images_only),
        ("trimmed for a GPU operator (bench/_nodes.py NODE_DROP)", trimmed),
    ]
    print(f"{NODES} nodes, bytes retained per node:")
    for label, value in rows:
        print(f"  {label:<58} {value / 1024:6.1f} KiB")
    print(f"  cache total at {NODES} nodes, trimmed: {trimmed * NODES / 2**20:.1f} MiB")
    operator = operator_figures()
    finish(
        "cache_memory",
        {
            "operator_informers": operator,
            "nodes": NODES,
            "json_bytes_per_node": round(raw_json),
            "untrimmed_bytes_per_node": round(full),
            "default_trim_no_intern_bytes_per_node": round(managed_only),
            "trim_images_interned_bytes_per_node": round(images_only),
            "trimmed_bytes_per_node": round(trimmed),
            "trimmed_total_mib": round(trimmed * NODES / 2**20, 1),
        },
    )


if __name__ == "__main__":
    main()
