"""The operator running in-process on a real kube-apiserver, and a small kit for tests.

Each test gets its own operator namespace, creates its nodes and policies under names of
its own, and leaves nothing behind: the control plane is shared by the whole session, and
without kube-controller-manager there is no garbage collector to clean up after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.controllers import Operator, build_operator
from components.controllers._readiness import nodes_to_serve
from components.controllers.clusterpolicy import _controller as clusterpolicy_module
from gpusim import apply_crds, load_documents
from reconciler import GVK, Client, Object, Request
from reconciler.errors import NotFound
from tests.polling import eventually

REPO = Path(__file__).resolve().parents[4]
NFD = "feature.node.kubernetes.io/"
OS_ID = NFD + "system-os_release.ID"
OS_VERSION = NFD + "system-os_release.VERSION_ID"
KERNEL = NFD + "kernel-version.full"
PCI_NVIDIA = NFD + "pci-10de.present"
MANAGED = "app.kubernetes.io/managed-by=gpu-operator"

NODE = GVK("", "v1", "Node")
NAMESPACE = GVK("", "v1", "Namespace")
EVENT = GVK("", "v1", "Event")
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
NVIDIA_DRIVER = GVK("nvidia.com", "v1alpha1", "NVIDIADriver")
DAEMONSET = GVK("apps", "v1", "DaemonSet")

NAMESPACED_KINDS = (
    GVK("", "v1", "ServiceAccount"),
    GVK("", "v1", "ConfigMap"),
    GVK("", "v1", "Service"),
    GVK("rbac.authorization.k8s.io", "v1", "Role"),
    GVK("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    DAEMONSET,
)
CLUSTER_KINDS = (
    GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    GVK("node.k8s.io", "v1", "RuntimeClass"),
)


def node_manifest(
    name: str,
    *,
    os_id: str = "ubuntu",
    os_version: str = "22.04",
    kernel: str | None = "5.15.0-105-generic",
    gpu: bool = True,
    mig: bool = False,
    runtime: str = "containerd://1.7.20",
    labels: dict[str, str] | None = None,
) -> Object:
    """A Node as a kubelet with NFD would register it (status included)."""
    node_labels = {"kubernetes.io/hostname": name, OS_ID: os_id, OS_VERSION: os_version}
    if kernel is not None:
        node_labels[KERNEL] = kernel
    if gpu:
        node_labels[PCI_NVIDIA] = "true"
    if mig:
        node_labels["nvidia.com/mig.capable"] = "true"
    node_labels.update(labels or {})
    info = dict.fromkeys(
        (
            "architecture",
            "bootID",
            "kernelVersion",
            "kubeProxyVersion",
            "kubeletVersion",
            "machineID",
            "operatingSystem",
            "osImage",
            "systemUUID",
        ),
        "",
    )
    info.update(containerRuntimeVersion=runtime, kernelVersion=kernel or "", architecture="amd64")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "status": {"nodeInfo": info},
    }


def subset(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where `actual` lacks or differs from what `expected` says (server defaults allowed)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        out: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                if value not in ("", [], {}, None):  # the server omits empty values
                    out.append(f"{path}.{key}: missing")
            else:
                out += subset(value, actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out += subset(e, a, f"{path}[{i}]")
        return out
    return [] if expected == actual else [f"{path}: expected {expected!r}, got {actual!r}"]


@dataclass
class Cluster:
    """The operator and what a test made, with helpers to read and wait."""

    operator: Operator
    api: client.ApiClient
    namespace: str
    tag: str
    nodes: list[str] = field(default_factory=list)
    crds: list[str] = field(default_factory=list)
    unobserved: set[str] = field(default_factory=set)
    """DaemonSets (by name) the DaemonSet controller's stand-in leaves alone."""

    @property
    def client(self) -> Client:
        return self.operator.manager.client

    def name(self, suffix: str) -> str:
        return f"{self.tag}-{suffix}"

    # -- making things -------------------------------------------------------------------

    async def add_node(self, suffix: str, **kwargs: Any) -> str:
        name = self.name(suffix)
        await self.client.create(node_manifest(name, **kwargs))
        self.nodes.append(name)
        return name

    async def label_node(self, name: str, labels: dict[str, str | None]) -> None:
        await self.client.patch(NODE, name, {"metadata": {"labels": labels}})

    async def create_policy(self, suffix: str, spec: dict[str, Any] | None = None) -> Object:
        return await self.client.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": self.name(suffix)},
                "spec": spec or {},
            }
        )

    async def patch_policy(self, name: str, spec: dict[str, Any]) -> None:
        await self.client.patch(CLUSTER_POLICY, name, {"spec": spec})

    async def create_driver(self, suffix: str, spec: dict[str, Any]) -> Object:
        return await self.client.create(
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "NVIDIADriver",
                "metadata": {"name": self.name(suffix)},
                "spec": spec,
            }
        )

    # -- reading -------------------------------------------------------------------------

    async def get(self, gvk: GVK, name: str, namespace: str = "") -> Object | None:
        try:
            return await self.client.get_live(gvk, name, namespace)
        except NotFound:
            return None

    async def node_labels(self, name: str, prefix: str = "nvidia.com/") -> dict[str, str]:
        node = await self.client.get_live(NODE, name)
        labels: dict[str, str] = node["metadata"].get("labels") or {}
        return {k: v for k, v in labels.items() if k.startswith(prefix)}

    async def owned(self) -> list[Object]:
        """Every object the operator made (live): in our namespace, and cluster-scoped."""
        out: list[Object] = []
        for gvk in NAMESPACED_KINDS:
            out += await self.client.list_live(
                gvk, namespace=self.namespace, label_selector=MANAGED
            )
        for gvk in CLUSTER_KINDS:
            out += await self.client.list_live(gvk, label_selector=MANAGED)
        return out

    async def daemonsets(self) -> dict[str, Object]:
        items = await self.client.list_live(DAEMONSET, namespace=self.namespace)
        return {d["metadata"]["name"]: d for d in items}

    async def status(self, name: str, gvk: GVK = CLUSTER_POLICY) -> dict[str, Any]:
        obj = await self.get(gvk, name)
        assert obj is not None, f"{gvk.kind} {name} is gone"
        status: dict[str, Any] = obj.get("status") or {}
        return status

    async def condition(self, name: str, type_: str = "Ready", gvk: GVK = CLUSTER_POLICY) -> Any:
        for cond in (await self.status(name, gvk)).get("conditions") or ():
            if cond["type"] == type_:
                return cond
        return None

    async def events(self, name: str) -> list[Object]:
        items = await self.client.list_live(EVENT, namespace="default")
        return [e for e in items if e["involvedObject"].get("name") == name]

    def metric(self, name: str, **labels: str) -> float | None:
        value: float | None = self.operator.manager.registry.get_sample_value(name, labels)
        return value

    # -- waiting -------------------------------------------------------------------------

    async def settle(self, quiet_polls: int = 5, *, delayed_counts: bool = True) -> None:
        """Wait until no controller has work queued, waiting or in progress, and no pool's
        `status.upgrade` write is either (those run off the queues), several polls in a row
        (watch events of the last writes arrive in between). Without `delayed_counts`, work
        waiting for a later turn (pacing, backoff) does not count."""
        quiet = 0

        upgrade = self.operator.upgrade

        def idle() -> bool:
            nonlocal quiet
            busy = any(
                len(c.queue)
                or (delayed_counts and c.queue.waiting)
                or self.metric("controller_runtime_active_workers", controller=c.name)
                for c in self.operator.controllers
            ) or (upgrade is not None and upgrade.status_writes_pending())
            quiet = 0 if busy else quiet + 1
            return quiet >= quiet_polls

        await eventually(idle, "the controllers to go idle")

    async def versions(self) -> dict[tuple[str, str, str], str]:
        """resourceVersion of everything the controllers write: what they own, the
        ClusterPolicies and NVIDIADrivers (status), and our nodes (labels)."""
        objects = [
            *await self.owned(),
            *await self.client.list_live(CLUSTER_POLICY),
            *await self.client.list_live(NVIDIA_DRIVER),
            *[await self.client.get_live(NODE, n) for n in self.nodes],
        ]
        return {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"][
                "resourceVersion"
            ]
            for o in objects
        }

    async def assert_second_reconcile_writes_nothing(self) -> None:
        await self.settle()
        before = await self.versions()
        events = len(await self.client.list_live(EVENT, namespace="default"))
        await self.reconcile_everything()
        await self.settle()
        assert await self.versions() == before
        assert len(await self.client.list_live(EVENT, namespace="default")) == events

    async def reconcile_everything(self) -> None:
        """Run each controller's reconcile once for everything it handles, directly."""
        for policy in await self.client.list_live(CLUSTER_POLICY):
            await self.operator.cluster_policy.reconcile(Request("", policy["metadata"]["name"]))
        for driver in await self.client.list_live(NVIDIA_DRIVER):
            await self.operator.nvidia_driver.reconcile(Request("", driver["metadata"]["name"]))
        for node in self.nodes:
            await self.operator.node_labels.reconcile(Request("", node))


async def delete_all(c: Client, gvk: GVK, *, namespace: str | None = None) -> None:
    for obj in await c.list_live(gvk, namespace=namespace, label_selector=None):
        await c.delete(
            gvk,
            obj["metadata"]["name"],
            namespace=obj["metadata"].get("namespace") or "",
            missing_ok=True,
        )


async def clean_slate(c: Client) -> None:
    """No ClusterPolicy, NVIDIADriver or cluster-scoped operand object from before."""
    await delete_all(c, CLUSTER_POLICY)
    await delete_all(c, NVIDIA_DRIVER)
    for gvk in CLUSTER_KINDS:
        for obj in await c.list_live(gvk, label_selector=MANAGED):
            await c.delete(gvk, obj["metadata"]["name"], missing_ok=True)
    for gvk in (CLUSTER_POLICY, NVIDIA_DRIVER):
        await eventually(lambda gvk=gvk: _empty(c, gvk), f"every {gvk.kind} to be gone", 30)


async def observe_daemonsets(c: Client, namespace: str, *, paused: set[str]) -> None:
    """What kube-controller-manager's DaemonSet controller does that these tests need (there
    is none beside a bare API server): each DaemonSet's spec marked observed and the nodes it
    must serve counted, every one available (no kubelet runs here, and no pod is made). It
    counts with the operator's own rule (`nodes_to_serve`), so it stands for a controller
    whose node cache has caught up. A DaemonSet whose status a test has written since is the
    test's; one named in `paused` is not looked at."""
    written: dict[str, dict[str, int]] = {}
    while True:
        nodes = await c.list_live(NODE)
        for ds in await c.list_live(DAEMONSET, namespace=namespace):
            meta = ds["metadata"]
            status = ds.get("status") or {}
            mine = written.get(meta["uid"])
            if meta["name"] in paused or (mine is not None and not _shows(status, mine)):
                continue
            count = len(nodes_to_serve(ds, nodes))
            want = {
                "observedGeneration": meta["generation"],
                "desiredNumberScheduled": count,
                "currentNumberScheduled": count,
                "updatedNumberScheduled": count,
                "numberReady": count,
                "numberAvailable": count,
                "numberMisscheduled": 0,
            }
            if _shows(status, want):
                written[meta["uid"]] = want
                continue
            with contextlib.suppress(NotFound):
                await c.patch(
                    DAEMONSET,
                    meta["name"],
                    {"status": want},
                    namespace=namespace,
                    subresource="status",
                    quiet=True,
                )
                written[meta["uid"]] = want
        await asyncio.sleep(0.2)


def _shows(status: dict[str, Any], counts: dict[str, int]) -> bool:
    """The status carries these counts (the API server leaves out some zeros)."""
    return all(int(status.get(k) or 0) == v for k, v in counts.items())


async def _empty(c: Client, gvk: GVK) -> bool:
    return not await c.list_live(gvk)


@pytest.fixture
def reconciles_an_hour_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy's reconciles paced an hour apart (set before the operator is built), so
    that only the events allowed to skip the pacing can move its status or its objects."""
    monkeypatch.setattr(clusterpolicy_module, "PACE_SECONDS", 3600.0)
    monkeypatch.setattr(clusterpolicy_module, "PACE_MAX_SECONDS", 3600.0)


@pytest.fixture
async def cluster(api_client: client.ApiClient) -> AsyncIterator[Cluster]:
    await apply_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    tag = f"t{uuid.uuid4().hex[:6]}"
    namespace = f"gpuop-{tag}"
    operator = build_operator(api_client, namespace=namespace, bind_address=None)
    c = operator.manager.client
    await clean_slate(c)
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    task = asyncio.create_task(operator.manager.run())
    made = Cluster(operator, api_client, namespace, tag)
    observer = asyncio.create_task(observe_daemonsets(c, namespace, paused=made.unobserved))
    await operator.manager.wait_leading()
    try:
        yield made
    finally:
        observer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await observer
        operator.manager.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 60)
        await clean_slate(c)
        for name in made.nodes:
            await c.delete(NODE, name, missing_ok=True)
        for gvk in NAMESPACED_KINDS:
            for obj in await c.list_live(gvk, namespace=namespace, label_selector=MANAGED):
                await c.delete(gvk, obj["metadata"]["name"], namespace=namespace, missing_ok=True)
        await c.delete(NAMESPACE, namespace, missing_ok=True)
        for crd in made.crds:
            await c.delete(
                GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), crd, missing_ok=True
            )
