"""The operator under the RBAC we ship: in-process, acting as its ServiceAccount
(impersonated, see `tests.integration.components._accounts`) with config/rbac and the
admission policies in force, not as the admin the other tests run it as.

With every operand on, it applies every operand's objects (their RBAC included: what the
API server's escalation check and the gpu-operator-rbac policy judge), labels its namespace
for Pod Security (spec.psa.enabled), deletes the RBAC the reference operator left, prunes
what it no longer wants, and gives an NVIDIADriver RBAC under names of its own; and
nothing it sends is refused. A rule dropped from config/rbac that the operator needs fails
here, as it would in a cluster."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from components.api import POD_SECURITY_LABELS
from components.controllers import Operator, build_operator
from components.plan import plan_policy
from gpusim import apply_crds, load_documents
from reconciler import GVK, Client, Object
from tests.integration.components._accounts import (
    Impersonating,
    client_for,
    install_operator,
    user_of,
)
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    DAEMONSET,
    NAMESPACE,
    NODE,
    NVIDIA_DRIVER,
    REPO,
    clean_slate,
    node_manifest,
    observe_daemonsets,
)
from tests.polling import eventually
from tests.unit.components.operands.test_operand_rbac import EVERYTHING, MPS, every_operand_rbac

pytestmark = pytest.mark.integration

CLUSTER_ROLE = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")
CLUSTER_ROLE_BINDING = GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
WORKLOAD = "nvidia.com/gpu.workload.config"
LEFTOVER = "nvidia-rbac-check-reference-leftover"


@dataclass
class Shipped:
    admin: Client
    namespace: str
    tag: str
    start: Callable[[], Awaitable[Operator]]
    api: Any = None


@pytest.fixture
async def shipped(api_client: client.ApiClient) -> AsyncIterator[Shipped]:
    await apply_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    admin = client_for(api_client, "shipped-rbac")
    tag = f"t{uuid.uuid4().hex[:6]}"
    namespace = f"gpuop-{tag}"
    await clean_slate(admin)
    await install_operator(admin, namespace, prefix=namespace)
    running: list[tuple[Operator, asyncio.Task[None], asyncio.Task[None]]] = []

    async def start() -> Operator:
        account = Impersonating(api_client, user_of(namespace, "gpu-operator"))
        operator = build_operator(account, namespace=namespace, bind_address=None)
        task = asyncio.create_task(operator.manager.run())
        observer = asyncio.create_task(observe_daemonsets(admin, namespace, paused=set()))
        running.append((operator, task, observer))
        await operator.manager.wait_leading()
        return operator

    try:
        yield Shipped(admin, namespace, tag, start, api_client)
    finally:
        for operator, task, observer in running:
            observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await observer
            operator.manager.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 60)
        await clean_slate(admin)
        for node in await admin.list_live(NODE):
            if node["metadata"]["name"].startswith(tag):
                await admin.delete(NODE, node["metadata"]["name"], missing_ok=True)
        for name in (f"{namespace}-gpu-operator",):
            await admin.delete(CLUSTER_ROLE_BINDING, name, missing_ok=True)
            await admin.delete(CLUSTER_ROLE, name, missing_ok=True)
        await admin.delete(NAMESPACE, namespace, missing_ok=True)
        await admin.cache.stop()


def leftovers(owner: Object, namespace: str) -> list[Object]:
    """RBAC the reference operator made for the same policy: owned by it, not labelled."""
    meta = {
        "name": LEFTOVER,
        "ownerReferences": [
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ],
    }
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": LEFTOVER},
         "subjects": [{"kind": "ServiceAccount", "name": LEFTOVER, "namespace": namespace}]},
    ]  # fmt: skip


async def cluster_roles(admin: Client) -> set[str]:
    items = await admin.list_live(
        CLUSTER_ROLE, label_selector="app.kubernetes.io/managed-by=gpu-operator"
    )
    return {i["metadata"]["name"] for i in items}


def problems(status: dict[str, Any]) -> list[str]:
    """Conditions that say the operator could not do something."""
    return [
        f"{c['reason']}: {c['message']}"
        for c in status.get("conditions") or ()
        if c["type"] == "Error" and c["status"] == "True"
    ]


async def test_the_operator_runs_the_whole_stack_under_the_rbac_we_ship(
    shipped: Shipped, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    admin, namespace, tag = shipped.admin, shipped.namespace, shipped.tag
    await admin.create(node_manifest(f"{tag}-gpu", mig=True))
    await admin.create(node_manifest(f"{tag}-vm", labels={WORKLOAD: "vm-passthrough"}))
    await admin.create(node_manifest(f"{tag}-vgpu", labels={WORKLOAD: "vm-vgpu"}))
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "plugin-config", "namespace": namespace},
            "data": {"mps": MPS},
        }
    )
    spec = {**EVERYTHING, "psa": {"enabled": True}}
    policy = await admin.create(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": f"{tag}-policy"},
            "spec": spec,
        }
    )
    name = policy["metadata"]["name"]
    for obj in leftovers(policy, namespace):
        await admin.create(obj)
    await shipped.start()

    # Every operand's RBAC applied; the namespace labelled; the reference's RBAC gone.
    wanted = {
        o["metadata"]["name"] for o in every_operand_rbac(namespace) if o["kind"] == "ClusterRole"
    }

    async def applied() -> bool:
        return wanted <= await cluster_roles(admin)

    await eventually(applied, "every operand's ClusterRole", 120)

    async def labelled() -> bool:
        labels = (await admin.get_live(NAMESPACE, namespace))["metadata"].get("labels") or {}
        return all(labels.get(k) == v for k, v in POD_SECURITY_LABELS.items())

    await eventually(labelled, "the namespace's Pod Security labels")

    async def swept() -> bool:
        names = {i["metadata"]["name"] for i in await admin.list_live(CLUSTER_ROLE_BINDING)}
        return LEFTOVER not in names and LEFTOVER not in {
            i["metadata"]["name"] for i in await admin.list_live(CLUSTER_ROLE)
        }

    await eventually(swept, "the reference operator's ClusterRole and binding deleted")
    status = (await admin.get_live(CLUSTER_POLICY, name)).get("status") or {}
    assert problems(status) == []

    # Pruned when no longer wanted.
    await admin.patch(CLUSTER_POLICY, name, {"spec": {"nodeAgent": {"enabled": False}}})

    async def pruned() -> bool:
        return "gpu-operator-node-agent" not in await cluster_roles(admin)

    await eventually(pruned, "the node agent's ClusterRole pruned")

    # An NVIDIADriver's RBAC, under names of its own.
    await admin.patch(CLUSTER_POLICY, name, {"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    await admin.create(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": f"{tag}-drv"},
            "spec": {"default": True},
        }
    )
    account = f"nvidia-gpu-driver-{tag}-drv-ubuntu22.04"

    async def per_driver() -> bool:
        return account in await cluster_roles(admin)

    await eventually(per_driver, f"ClusterRole {account}", 120)
    # Its pool emptied (no node matches it now): its RBAC for that OS is pruned.
    selector = {"default": False, "nodeSelector": {"kubernetes.io/hostname": "nowhere"}}
    await admin.patch(NVIDIA_DRIVER, f"{tag}-drv", {"spec": selector})

    async def let_go() -> bool:
        return account not in await cluster_roles(admin)

    await eventually(let_go, f"ClusterRole {account} pruned", 120)

    status = (await admin.get_live(CLUSTER_POLICY, name)).get("status") or {}
    assert problems(status) == []
    # No reconcile failed (and was retried) on the way: each is a WARNING of the controller.
    failed = [r.getMessage() for r in caplog.records if r.name == "reconciler.controller"]
    assert failed == []


async def test_the_plan_needs_no_more_than_the_operators_rbac(shipped: Shipped) -> None:
    """`gpu-operator plan` as the operator's ServiceAccount: every read, and every write
    it sends as a dry run, is allowed by config/rbac; it sees the change and changes
    nothing."""
    admin, namespace, tag = shipped.admin, shipped.namespace, shipped.tag
    await admin.create(node_manifest(f"{tag}-gpu"))
    name = f"{tag}-policy"
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name}}
    await admin.create({**policy, "spec": {}})
    await shipped.start()

    async def driver_applied() -> bool:
        return any("driver" in n for n in await daemonset_names(admin, namespace))

    await eventually(driver_applied, "the driver DaemonSet", 120)
    before = await admin.list_live(DAEMONSET, namespace=namespace)

    account = Impersonating(shipped.api, user_of(namespace, "gpu-operator"))
    spec = {"daemonsets": {"labels": {"team": "ml"}}}
    plan = await plan_policy(account, {**policy, "spec": spec}, namespace=namespace)

    assert plan.changes
    changed = {c.name for c in plan.objects if c.kind == "DaemonSet"}
    assert changed == set(await daemonset_names(admin, namespace))
    after = await admin.list_live(DAEMONSET, namespace=namespace)
    assert [d["spec"] for d in after] == [d["spec"] for d in before]  # dry runs only


async def daemonset_names(admin: Client, namespace: str) -> list[str]:
    return [d["metadata"]["name"] for d in await admin.list_live(DAEMONSET, namespace=namespace)]


GPU_CLUSTER = GVK("nvidia.com", "v1alpha1", "GPUCluster")
DEVICE_CLASS = GVK("resource.k8s.io", "v1", "DeviceClass")
SLICE_POLICY = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
SLICE_BINDING = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding")
GPU_CLUSTER_SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"


async def test_the_operator_runs_the_dra_stack_under_the_rbac_we_ship(
    shipped: Shipped, caplog: pytest.LogCaptureFixture
) -> None:
    """The reference's GPUCluster sample as the operator's account: every object of the
    DRA stack (its ClusterRoles, the compute-domain daemon's included, its DeviceClasses,
    the ResourceSlice policy, the Deployment) applied, the finalizer set, the namespace
    labelled for admin-access claims; and the finalizer let go on deletion."""
    caplog.set_level(logging.WARNING)
    admin, namespace, tag = shipped.admin, shipped.namespace, shipped.tag
    await admin.create(node_manifest(f"{tag}-gpu"))
    sample = yaml.safe_load(GPU_CLUSTER_SAMPLE.read_text())
    await admin.create(sample)
    try:
        await shipped.start()
        wanted = {
            "nvidia-dra-driver-kubeletplugin",
            "nvidia-dra-driver-controller",
            "compute-domain-daemon",
            "nvidia-dcgm-exporter-read-pods",
        }

        async def applied() -> bool:
            names = {
                d["metadata"]["name"] for d in await admin.list_live(DAEMONSET, namespace=namespace)
            }
            return (
                wanted <= await cluster_roles(admin)
                and {
                    "nvidia-dra-driver-kubelet-plugin",
                    "nvidia-dra-validator",
                }
                <= names
            )

        await eventually(applied, "the DRA stack's ClusterRoles and DaemonSets", 120)
        classes = {d["metadata"]["name"] for d in await admin.list_live(DEVICE_CLASS)}
        assert "gpu.nvidia.com" in classes
        assert await admin.get_live(SLICE_POLICY, "resourceslices-policy-nvidia-dra-driver")
        assert await admin.get_live(SLICE_BINDING, "resourceslices-policy-nvidia-dra-driver")
        labels = (await admin.get_live(NAMESPACE, namespace))["metadata"].get("labels") or {}
        assert labels.get("resource.kubernetes.io/admin-access") == "true"
        obj = await admin.get_live(GPU_CLUSTER, "gpu-cluster")
        assert "gpucluster.nvidia.com/dra-resourceclaim" in obj["metadata"]["finalizers"]
        assert problems(obj.get("status") or {}) == []
        await admin.delete(GPU_CLUSTER, "gpu-cluster")

        async def released() -> bool:
            return not await admin.list_live(GPU_CLUSTER)

        await eventually(released, "the GPUCluster released", 60)
        failed = [r.getMessage() for r in caplog.records if r.name == "reconciler.controller"]
        assert failed == []
    finally:
        for gvk in (GPU_CLUSTER, DEVICE_CLASS, SLICE_POLICY, SLICE_BINDING):
            for obj in await admin.list_live(gvk, label_selector=None):
                if gvk == GPU_CLUSTER:
                    await admin.patch(
                        gvk, obj["metadata"]["name"], {"metadata": {"finalizers": None}}
                    )
                elif (obj["metadata"].get("labels") or {}).get(
                    "app.kubernetes.io/managed-by"
                ) != "gpu-operator":
                    continue
                await admin.delete(gvk, obj["metadata"]["name"], missing_ok=True)
