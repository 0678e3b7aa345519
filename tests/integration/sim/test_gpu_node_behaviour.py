"""The simulated node software as a controller on our engine, against a real API server.

No kubelets here: the tests bind pods to nodes and mark them Running themselves, which is
all the node software watches for, so what is checked is the controller's wiring (caches,
predicates, queue, requeue after a delay, writes) rather than the model's rules, which the
unit tests cover.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gpusim import gpu_node, node_manifest
from gpusim.gpu_node_behaviour import GpuNodeBehaviour
from reconciler import Client, Manager
from reconciler.errors import ReconcilerError
from reconciler.kinds import NODE, POD
from tests.polling import eventually

pytestmark = pytest.mark.integration

NAMESPACE = "gpu-operator"


@pytest.fixture
async def manager(api_client: Any) -> AsyncIterator[Manager]:
    manager = Manager(api_client, field_manager="gpu-node-behaviour-test", bind_address=None)
    GpuNodeBehaviour(manager, mig_reconfigure_seconds=0.2, workers=2)
    running = asyncio.create_task(manager.run())
    await manager.wait_leading()
    with contextlib.suppress(ReconcilerError):
        await manager.client.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    yield manager
    manager.stop()
    await running


async def _node(client: Client, **spec: Any) -> str:
    name = f"gpu-{uuid.uuid4().hex[:8]}"
    await client.create(node_manifest(gpu_node(name, **spec), index=0))
    return name


async def _running_pod(client: Client, node: str, app: str, image: str = "busybox") -> str:
    name = f"{app}-{uuid.uuid4().hex[:6]}"
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
        }
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    await client.patch(POD, name, {"status": status}, namespace=NAMESPACE, subresource="status")
    return name


async def _serving_node(client: Client, gpus: int) -> tuple[str, str]:
    """A GPU node whose driver and device plugin pods run, once it advertises its GPUs:
    the node and the device plugin pod."""
    node = await _node(client, gpus=gpus)
    await _running_pod(client, node, "nvidia-driver-daemonset", "nvcr.io/nvidia/driver:580.95.05")
    plugin = await _running_pod(client, node, "nvidia-device-plugin-daemonset")
    await eventually(
        lambda: _capacity(client, node) == {"nvidia.com/gpu": str(gpus)},
        f"{gpus} GPUs advertised",
    )
    return node, plugin


def _capacity(client: Client, node: str) -> dict[str, str]:
    obj = client.get(NODE, node) or {}
    return dict((obj.get("status") or {}).get("capacity") or {})


def _labels(client: Client, node: str) -> dict[str, str]:
    obj = client.get(NODE, node) or {}
    return dict((obj.get("metadata") or {}).get("labels") or {})


async def test_device_plugin_pod_brings_gpus_and_its_deletion_takes_them(
    manager: Manager,
) -> None:
    client = manager.client
    node, plugin = await _serving_node(client, gpus=4)
    await _running_pod(client, node, "gpu-feature-discovery")
    await eventually(
        lambda: _labels(client, node).get("nvidia.com/cuda.driver.major") == "580",
        "GFD labels from the driver pod's version",
    )
    await client.delete(POD, plugin, namespace=NAMESPACE, grace_period_seconds=0)
    await eventually(lambda: "nvidia.com/gpu" not in _capacity(client, node), "GPUs withdrawn")


async def test_mig_reconfiguration_goes_pending_then_success_after_its_delay(
    manager: Manager,
) -> None:
    client = manager.client
    node = await _node(client, gpus=2, mig_capable=True)
    await _running_pod(client, node, "nvidia-driver-daemonset")
    await _running_pod(client, node, "nvidia-mig-manager")
    await client.patch(
        NODE, node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}}
    )
    states: list[str] = []

    def state() -> bool:
        value = _labels(client, node).get("nvidia.com/mig.config.state", "")
        if value and (not states or states[-1] != value):
            states.append(value)
        return value == "success"

    await eventually(state, "the MIG layout applied", interval=0.02)
    assert states == ["pending", "success"]


async def _gpu_pod(client: Client, node: str, name: str, gpus: int) -> str:
    limits = {"nvidia.com/gpu": str(gpus)}
    await client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits}}],
            },
        }
    )
    return name


async def _admission(client: Client, name: str) -> dict[str, Any] | None:
    """The pod's status once its kubelet decided: admitted (annotated) or failed."""
    pod = await client.get_live(POD, name, namespace=NAMESPACE)
    annotations = pod["metadata"].get("annotations") or {}
    if annotations.get("sim.gpu-operator.io/admitted") == "true":
        return {"admitted": True}
    status: dict[str, Any] = pod.get("status") or {}
    return status if status.get("phase") == "Failed" else None


async def test_gpu_pods_are_admitted_while_the_node_has_gpus_and_refused_beyond(
    manager: Manager,
) -> None:
    client = manager.client
    node, plugin = await _serving_node(client, gpus=2)
    first = await _gpu_pod(client, node, f"first-{uuid.uuid4().hex[:6]}", 2)
    assert await eventually(lambda: _admission(client, first), "the first pod") == {
        "admitted": True
    }
    # Both GPUs are the first pod's: the next one finds none free.
    second = await _gpu_pod(client, node, f"second-{uuid.uuid4().hex[:6]}", 1)
    refused = await eventually(lambda: _admission(client, second), "the second pod")
    assert refused["reason"] == "UnexpectedAdmissionError"
    assert refused["message"] == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable "
        "for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
    )
    # The device plugin gone: nothing to allocate from, even with the first pod gone too.
    await client.delete(POD, plugin, namespace=NAMESPACE, grace_period_seconds=0)
    await client.delete(POD, first, namespace=NAMESPACE, grace_period_seconds=0)
    await eventually(lambda: "nvidia.com/gpu" not in _capacity(client, node), "GPUs withdrawn")
    third = await _gpu_pod(client, node, f"third-{uuid.uuid4().hex[:6]}", 1)
    refused = await eventually(lambda: _admission(client, third), "the third pod")
    assert refused["message"] == (
        "Pod was rejected: Allocate failed due to no healthy devices present; "
        "cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
    )
