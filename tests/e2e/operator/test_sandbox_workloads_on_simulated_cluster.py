"""Sandbox (VM) workloads on a simulated cluster, as an admin running KubeVirt sees them:
a GPU node switched to `vm-passthrough` gets the VM stack, loses the container stack, and
offers its GPUs as the resource a KubeVirt VM asks for; the other nodes keep containers.

Its own cluster and operator (the fixtures are per module); tests run in file order.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from gpusim import SimulatedCluster
from tests.e2e.operator._harness import (
    OperatorProcess,
    create_policy,
    operand_pods,
    running,
    wait_counted,
    wait_ready,
)
from tests.polling import eventually

WORKLOAD = "nvidia.com/gpu.workload.config"
DEPLOY = "nvidia.com/gpu.deploy."
#: What KubeVirt's GPU device plugin calls the simulated H100 bound to vfio-pci.
VM_RESOURCE = "nvidia.com/NVIDIA_H100_80GB_HBM3"
VM_APPS = {
    "nvidia-vfio-manager",
    "nvidia-sandbox-device-plugin-daemonset",
    "nvidia-sandbox-validator",
}
CONTAINER_APPS = {
    "nvidia-container-toolkit-daemonset",
    "nvidia-device-plugin-daemonset",
    "nvidia-dcgm-exporter",
    "gpu-feature-discovery",
    "nvidia-operator-validator",
}


def _container_app(app: str) -> bool:
    return app in CONTAINER_APPS or app.startswith("nvidia-driver-daemonset")


async def _apps_on(kube: Any, node: str) -> set[str]:
    """The `app` of every operand pod running on `node` (pods on their way out left out)."""
    return {
        p.metadata.labels.get("app", "")
        for p in await operand_pods(kube)
        if p.spec.node_name == node and running(p) and not p.metadata.deletion_timestamp
    }


async def test_a_node_switched_to_passthrough_gets_the_vm_stack_instead(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    assert operator_cluster.config.product == "NVIDIA-H100-80GB-HBM3"
    core = client.CoreV1Api(kube)
    await create_policy(kube, {"sandboxWorkloads": {"enabled": True}})
    await wait_ready(kube)
    vm_node, *container_nodes = operator_cluster.gpu_nodes

    # Default workload: containers everywhere, nvidia.com/gpu on every GPU node.
    async def container_stack(node: str) -> set[str] | None:
        apps = await _apps_on(kube, node)
        return apps if apps >= CONTAINER_APPS and not VM_APPS & apps else None

    async def offering(node: str) -> Any:
        # The node software advertises the GPUs once it sees the device plugin's pod run:
        # a moment after the pods, which are all the stack's wait looks at.
        item = await core.read_node(node)
        return item if item.status.allocatable.get("nvidia.com/gpu") == "4" else None

    for node in operator_cluster.gpu_nodes:
        await eventually(lambda n=node: container_stack(n), f"the container stack on {node}")
        await eventually(lambda n=node: offering(n), f"{node} offering its 4 GPUs")

    await core.patch_node(vm_node, {"metadata": {"labels": {WORKLOAD: "vm-passthrough"}}})

    async def vm_stack() -> set[str] | None:
        apps = await _apps_on(kube, vm_node)
        has_vm = apps >= VM_APPS
        return apps if has_vm and not any(_container_app(a) for a in apps) else None

    apps = await eventually(vm_stack, f"the VM stack, and only it, on {vm_node}", seconds=240)
    assert "nvidia-kata-manager" not in apps  # not enabled in this policy

    async def offers_vm_gpus() -> Any:
        node = await core.read_node(vm_node)
        allocatable = node.status.allocatable or {}
        gone = "nvidia.com/gpu" not in allocatable
        return node if allocatable.get(VM_RESOURCE) == "4" and gone else None

    node = await eventually(offers_vm_gpus, f"{VM_RESOURCE} instead of nvidia.com/gpu")
    labels = node.metadata.labels
    for key in ("vfio-manager", "sandbox-device-plugin", "sandbox-validator"):
        assert labels.get(DEPLOY + key) == "true", key
    for key in ("driver", "container-toolkit", "device-plugin", "dcgm-exporter"):
        assert DEPLOY + key not in labels, key

    # The other GPU nodes keep the container stack and their nvidia.com/gpu.
    for other in container_nodes:
        assert await container_stack(other), other
        assert (await core.read_node(other)).status.allocatable.get("nvidia.com/gpu") == "4"

    await wait_counted(kube, {"state-vfio-manager": 1, "state-sandbox-device-plugin": 1})


async def test_a_virt_launcher_pod_lands_on_the_passthrough_node(
    operator: OperatorProcess, operator_cluster: SimulatedCluster, kube: Any
) -> None:
    """What KubeVirt does for a VM with `gpus: [{deviceName: <VM_RESOURCE>}]`: a pod
    asking for that resource, which only the passthrough node offers."""
    core = client.CoreV1Api(kube)
    launcher = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "virt-launcher-vm1"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "compute",
                    "image": "quay.io/kubevirt/virt-launcher:v1.5.0",
                    "resources": {"limits": {VM_RESOURCE: 1}},
                }
            ],
        },
    }
    await core.create_namespaced_pod("default", launcher)

    async def scheduled() -> Any:
        pod = await core.read_namespaced_pod("virt-launcher-vm1", "default")
        return pod if running(pod) else None

    pod = await eventually(scheduled, "the virt-launcher pod running", seconds=120)
    assert pod.spec.node_name == operator_cluster.gpu_nodes[0]
    await core.delete_namespaced_pod("virt-launcher-vm1", "default", grace_period_seconds=0)
