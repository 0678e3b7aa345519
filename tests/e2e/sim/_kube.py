"""Small helpers for the simulated-cluster tests: raw-dict API calls and stand-ins.

The DaemonSets here are stand-ins for the operator's operands: only their pod labels (the
reference operator's `app` labels), images and env matter to the GPU node behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from kubernetes_asyncio import client, watch

DRIVER_IMAGE = "nvcr.io/nvidia/driver:580.95.05-ubuntu22.04"
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
MIG_MANAGER_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"
GPU_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"


async def call(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """Call a kubernetes_asyncio method and return the JSON body as plain dicts."""
    response = await method(*args, _preload_content=False, **kwargs)
    try:
        body = await response.read()
    finally:
        response.release()
    if not 200 <= response.status < 300:
        raise AssertionError(f"HTTP {response.status}: {body[:300]!r}")
    return json.loads(body)


@contextlib.asynccontextmanager
async def label_history(api: Any, name: str, key: str) -> AsyncIterator[list[str]]:
    """Every distinct value a node label takes while the block runs, seen through a watch
    (so a state that lasts a moment is never missed)."""
    core = client.CoreV1Api(api)
    start = await node(api, name)
    first = start["metadata"]["labels"].get(key)
    values: list[str] = [first] if first is not None else []
    version = start["metadata"]["resourceVersion"]

    async def follow() -> None:
        stream = watch.Watch()
        async with stream.stream(
            core.list_node,
            field_selector=f"metadata.name={name}",
            resource_version=version,
            timeout_seconds=300,
        ) as events:
            async for event in events:
                value = (event["raw_object"]["metadata"].get("labels") or {}).get(key)
                if value is not None and (not values or values[-1] != value):
                    values.append(value)

    task = asyncio.create_task(follow())
    try:
        yield values
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def nodes(api: Any) -> dict[str, dict[str, Any]]:
    listed = await call(client.CoreV1Api(api).list_node)
    return {item["metadata"]["name"]: item for item in listed["items"]}


async def node(api: Any, name: str) -> dict[str, Any]:
    result: dict[str, Any] = await call(client.CoreV1Api(api).read_node, name)
    return result


async def pods(api: Any, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    listed = await call(
        client.CoreV1Api(api).list_namespaced_pod, namespace, label_selector=selector
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


def running(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def allocatable(item: Mapping[str, Any]) -> dict[str, str]:
    """The node's `nvidia.com/*` allocatable resources."""
    return {
        k: v
        for k, v in (item.get("status", {}).get("allocatable") or {}).items()
        if k.startswith("nvidia.com/")
    }


def capacity(item: Mapping[str, Any]) -> dict[str, str]:
    return {
        k: v
        for k, v in (item.get("status", {}).get("capacity") or {}).items()
        if k.startswith("nvidia.com/")
    }


def daemonset(
    name: str,
    app: str,
    image: str,
    node_selector: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A stand-in operand DaemonSet whose pods carry the reference operator's `app` label."""
    container: dict[str, Any] = {"name": name, "image": image}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "nodeSelector": dict(node_selector),
                    "containers": [container],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


async def create_daemonset(api: Any, namespace: str, body: dict[str, Any]) -> None:
    await call(client.AppsV1Api(api).create_namespaced_daemon_set, namespace, body)


async def delete_daemonset(api: Any, namespace: str, name: str) -> None:
    await call(
        client.AppsV1Api(api).delete_namespaced_daemon_set,
        name,
        namespace,
        propagation_policy="Foreground",
    )


async def pods_running_on(api: Any, namespace: str, app: str, expected: set[str]) -> bool:
    """True once exactly `expected` nodes run a Ready pod of `app` (and no other node has one)."""
    found = await pods(api, namespace, f"app={app}")
    on = {p["spec"].get("nodeName") for p in found}
    return on == expected and all(running(p) for p in found) and len(found) == len(expected)


def gpu_pod(name: str, gpus: int = 1, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu22.04",
                    "resources": {"limits": {resource: str(gpus)}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
