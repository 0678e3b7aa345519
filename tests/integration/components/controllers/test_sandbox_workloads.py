"""The sandbox (VM) stack on a real API server: each node gets the deploy labels of its
workload, every VM operand applies cleanly with server-side apply and is what the renderer
wants, a second reconcile writes nothing, and a node moved back to containers loses the
VM labels."""

from __future__ import annotations

from typing import Any

import pytest

from components.api import ClusterPolicy
from components.operands import OPERANDS, VM_PASSTHROUGH, VM_VGPU, ClusterView, GPUNode
from reconciler import owner_reference
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    NODE,
    Cluster,
    subset,
)
from tests.polling import eventually

pytestmark = pytest.mark.integration

WORKLOAD = "nvidia.com/gpu.workload.config"
DEPLOY = "nvidia.com/gpu.deploy."
CONTAINER_STACK = {
    DEPLOY + k
    for k in (
        "driver",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "gpu-feature-discovery",
        "operator-validator",
        "node-status-exporter",
        "node-agent",
    )
}
PASSTHROUGH_STACK = {
    DEPLOY + k
    for k in ("sandbox-device-plugin", "sandbox-validator", "vfio-manager", "kata-manager")
} | {DEPLOY + "cc-manager"}
VGPU_STACK = {
    DEPLOY + k
    for k in ("sandbox-device-plugin", "sandbox-validator", "vgpu-manager", "vgpu-device-manager")
} | {DEPLOY + "cc-manager"}
VM_DAEMONSETS = {
    "nvidia-vfio-manager",
    "nvidia-sandbox-device-plugin-daemonset",
    "nvidia-sandbox-validator",
    "nvidia-vgpu-manager-daemonset",
    "nvidia-vgpu-device-manager",
    "nvidia-kata-manager",
    "nvidia-cc-manager",
}
#: The operands that serve a VM workload, by what the registry says each serves.
VM_OPERANDS = [op for op in OPERANDS if op.workloads & {VM_PASSTHROUGH, VM_VGPU}]
SPEC = {
    "sandboxWorkloads": {"enabled": True},
    "vgpuManager": {"enabled": True, "repository": "registry.example/nvidia", "version": "595.58"},
    "vgpuDeviceManager": {"config": {"name": "vgpu-devices"}},
    "kataManager": {
        "enabled": True,
        "config": {
            "runtimeClasses": [
                {"name": "kata-nvidia-gpu", "artifacts": {"url": "nvcr.io/nvidia/kata:1"}}
            ]
        },
    },
    "ccManager": {"enabled": True, "defaultMode": "on"},
}


def deploy_labels(labels: dict[str, str]) -> set[str]:
    return {k for k, v in labels.items() if k.startswith(DEPLOY) and v == "true"} - {
        DEPLOY + "client"
    }


async def test_each_node_gets_its_workloads_stack_and_the_vm_operands_apply(
    cluster: Cluster,
) -> None:
    passthrough = await cluster.add_node("gpu-pt", labels={WORKLOAD: "vm-passthrough"})
    vgpu = await cluster.add_node("gpu-vgpu", labels={WORKLOAD: "vm-vgpu"})
    plain = await cluster.add_node("gpu-c", os_id="rhel", os_version="9.4")
    policy = (await cluster.create_policy("sandbox", SPEC))["metadata"]["name"]

    async def labelled() -> dict[str, set[str]] | None:
        got = {n: deploy_labels(await cluster.node_labels(n)) for n in (passthrough, vgpu, plain)}
        want = {passthrough: PASSTHROUGH_STACK, vgpu: VGPU_STACK, plain: CONTAINER_STACK}
        return got if got == want else None

    await eventually(labelled, "each node labelled for its workload")

    async def vm_daemonsets() -> dict[str, Any] | None:
        sets = await cluster.daemonsets()
        return sets if set(sets) >= VM_DAEMONSETS else None

    sets = await eventually(vm_daemonsets, "the VM operands' DaemonSets")
    # What the server holds is what the renderers want, object by object.
    live_policy = await cluster.get(CLUSTER_POLICY, policy)
    assert live_policy is not None
    nodes = [GPUNode.from_node(await cluster.client.get_live(NODE, n)) for n in cluster.nodes]
    view = ClusterView(
        namespace=cluster.namespace,
        gpu_nodes=sorted(nodes, key=lambda n: n.name),
        has_service_monitor_crd=False,
        owner=owner_reference(live_policy),
    )
    parsed = ClusterPolicy.from_dict(live_policy)
    owned = {(o["kind"], o["metadata"]["name"]): o for o in await cluster.owned()}
    checked = 0
    for operand in VM_OPERANDS:
        rendered = operand.render(parsed, view)
        assert rendered.conditions == [], operand.name
        for wanted in rendered.objects:
            key = (wanted["kind"], wanted["metadata"]["name"])
            assert key in owned, f"{operand.name}: {key} not applied"
            assert subset(wanted, owned[key]) == [], key
            checked += 1
    assert checked >= 2 * len(VM_OPERANDS)
    assert ("RuntimeClass", "kata-nvidia-gpu") in owned
    assert sets["nvidia-vgpu-manager-daemonset"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] == ("registry.example/nvidia/vgpu-manager:595.58-ubuntu22.04")
    conditions = str((await cluster.status(policy)).get("conditions"))
    assert "Unsupported" not in conditions
    await cluster.assert_second_reconcile_writes_nothing()

    # Back to containers: the VM labels go, the container stack comes.
    await cluster.label_node(passthrough, {WORKLOAD: "container"})

    async def container_again() -> set[str] | None:
        got = deploy_labels(await cluster.node_labels(passthrough))
        return got if got == CONTAINER_STACK else None

    await eventually(container_again, "the node back on the container stack")


async def test_with_sandbox_workloads_off_the_label_is_not_read(cluster: Cluster) -> None:
    node = await cluster.add_node("gpu-pt", labels={WORKLOAD: "vm-passthrough"})
    await cluster.create_policy("containers", {"vfioManager": {"enabled": True}})

    async def labelled() -> set[str] | None:
        got = deploy_labels(await cluster.node_labels(node))
        return got if got == CONTAINER_STACK else None

    await eventually(labelled, "the container stack's labels")
    assert not VM_DAEMONSETS & set(await cluster.daemonsets())
    await cluster.assert_second_reconcile_writes_nothing()
