"""A small cluster and policies for the operand tests, and ways to look into what they render.

The cluster: four GPU nodes on two OS releases and two kernels (one MIG-capable), all on
containerd, plus the operator namespace and the ClusterPolicy's owner reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.api import ClusterPolicy
from components.operands import OPERANDS, ClusterView, GPUNode, Operand, Rendered, read_config

NAMESPACE = "gpu-operator"
OWNER: Mapping[str, Any] = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "name": "cluster-policy",
    "uid": "7d2f1e4c-0000-4000-8000-000000000001",
    "controller": True,
    "blockOwnerDeletion": True,
}
UBUNTU_KERNEL = "5.15.0-105-generic"
RHEL_KERNEL = "5.14.0-427.13.1.el9_4.x86_64"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def gpu_node(
    name: str,
    os_id: str | None = "ubuntu",
    os_version: str | None = "22.04",
    kernel: str | None = UBUNTU_KERNEL,
    *,
    runtime: str = "containerd://2.1.4",
    mig_capable: bool = False,
    labels: Mapping[str, str] | None = None,
    pinned_kernel: str | None = None,
) -> GPUNode:
    return GPUNode(
        name=name,
        labels=dict(labels or {}),
        os_id=os_id,
        os_version=os_version,
        kernel=kernel,
        container_runtime=runtime,
        mig_capable=mig_capable,
        pinned_kernel=pinned_kernel,
    )


CLUSTER: Sequence[GPUNode] = (
    gpu_node("gpu-ubuntu-1"),
    gpu_node("gpu-ubuntu-2"),
    gpu_node("gpu-ubuntu-3", kernel="6.8.0-60-generic", mig_capable=True),
    gpu_node("gpu-rhel-1", "rhel", "9.4", RHEL_KERNEL),
)


def view(
    nodes: Sequence[GPUNode] = CLUSTER,
    *,
    service_monitors: bool = False,
    config_map_keys: Mapping[str, Sequence[str]] | None = None,
    config_map_data: Mapping[str, Mapping[str, str]] | None = None,
) -> ClusterView:
    return ClusterView(
        namespace=NAMESPACE,
        gpu_nodes=list(nodes),
        has_service_monitor_crd=service_monitors,
        owner=OWNER,
        image_env={},
        config_map_keys=dict(config_map_keys or {}),
        config_documents={
            name: {key: read_config(text) for key, text in data.items()}
            for name, data in (config_map_data or {}).items()
        },
    )


def policy(spec: Mapping[str, Any] | None = None) -> ClusterPolicy:
    return ClusterPolicy.from_dict(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy", "uid": OWNER["uid"]},
            "spec": dict(spec or {}),
        }
    )


# --- looking into rendered objects -------------------------------------------------------


def kinds_and_names(rendered: Rendered) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in rendered.objects}


def find(rendered: Rendered, kind: str, name: str) -> dict[str, Any]:
    for obj in rendered.objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind} {name} in {sorted(kinds_and_names(rendered))}")


def daemonsets(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendered.objects if o["kind"] == "DaemonSet"}


def pod(ds: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def container(ds: Mapping[str, Any], name: str | None = None) -> dict[str, Any]:
    """The named container (default: the first, the operand's main one)."""
    containers: list[dict[str, Any]] = pod(ds)["containers"]
    if name is None:
        return containers[0]
    return next(c for c in containers if c["name"] == name)


def init_container(ds: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod(ds).get("initContainers", []) if c["name"] == name)


def env_of(ctr: Mapping[str, Any]) -> dict[str, Any]:
    """name -> value (or the valueFrom dict)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr.get("env", [])}


def volumes(ds: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod(ds)["volumes"]}


def mounts(ctr: Mapping[str, Any]) -> dict[str, str]:
    """mountPath -> volume name."""
    return {m["mountPath"]: m["name"] for m in ctr.get("volumeMounts", [])}


def operand(name: str) -> Operand:
    """The operand with this state name (e.g. `state-driver`)."""
    return next(item for item in OPERANDS if item.name == name)
