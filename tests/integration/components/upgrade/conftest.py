"""The upgrade controller in-process on a real kube-apiserver, and the kit its tests use.

Only the API server and etcd run here: no kubelet, no DaemonSet controller, no scheduler.
`Kubelet` below stands in for the parts the upgrade depends on, through the API like the
real ones: it finishes deleting terminating pods, lets the driver DaemonSet recreate a
deleted driver pod at its newest revision (OnDelete), restarts validator pods, and marks
pods Running and Ready. Nodes, pods, the DaemonSet and its ControllerRevisions are plain
objects the tests create.

`Watcher` sees every change of every test node through a watch (an informer) and checks
the limits at each one, so a limit broken for a moment is never missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import DriverUpgradePolicySpec, UpgradeState
from components.kinds import CACHED_PODS, SCHEDULED_PODS
from components.upgrade import (
    IN_PROGRESS,
    STATE_LABEL,
    VALIDATOR_DEPLOY_LABEL,
    UpgradeController,
    max_unavailable,
    pod_as_read,
)
from gpusim import apply_crds, load_documents
from reconciler import GVK, Cache, Client, Manager, Object, labels_of, name_of
from reconciler.errors import NotFound
from reconciler.lowlevel import RESTMapper, Transport
from tests import polling

REPO = Path(__file__).resolve().parents[4]
NODE = GVK("", "v1", "Node")
POD = GVK("", "v1", "Pod")
NAMESPACE = GVK("", "v1", "Namespace")
EVENT = GVK("", "v1", "Event")
DAEMONSET = GVK("apps", "v1", "DaemonSet")
REVISION = GVK("apps", "v1", "ControllerRevision")
PDB = GVK("policy", "v1", "PodDisruptionBudget")
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
NVIDIA_DRIVER = GVK("nvidia.com", "v1alpha1", "NVIDIADriver")
KERNEL = "feature.node.kubernetes.io/kernel-version.full"
DRIVER_LABELS = {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"}
VALIDATOR_LABELS = {"app": "nvidia-operator-validator"}
DS_NAME = "nvidia-driver-daemonset"
S = UpgradeState


# This layer's waits cover whole upgrade walks, so its guard against a hang is longer.
eventually = functools.partial(polling.eventually, seconds=90.0)


def _ready_status() -> Object:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "c",
                "ready": True,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "state": {"running": {}},
            }
        ],
    }


@dataclass
class Watcher:
    """Every state each test node goes through, and the limits checked at every change."""

    kit: Kit
    max_parallel: int
    max_unavailable: int
    history: dict[str, list[str]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    peak_in_progress: int = 0
    peak_unavailable: int = 0
    initially_unavailable: int = 0

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        pass

    def _seen(self, obj: Object) -> None:
        state = labels_of(obj).get(STATE_LABEL, "")
        seq = self.history.setdefault(name_of(obj), [])
        if not seq or seq[-1] != state:
            seq.append(state)
        nodes = self.kit.watch_cache.list(NODE)
        states = [labels_of(n).get(STATE_LABEL, "") for n in nodes]
        in_progress = sum(1 for s in states if s in {x.value for x in IN_PROGRESS})
        unavailable = sum(
            1
            for n in nodes
            if (n.get("spec") or {}).get("unschedulable")
            or labels_of(n).get(STATE_LABEL) == S.CORDON_REQUIRED.value
        )
        self.peak_in_progress = max(self.peak_in_progress, in_progress)
        self.peak_unavailable = max(self.peak_unavailable, unavailable)
        if self.max_parallel and in_progress > self.max_parallel:
            self.violations.append(f"{in_progress} in progress: {sorted(states)}")
        if unavailable > max(self.max_unavailable, self.initially_unavailable):
            self.violations.append(f"{unavailable} unavailable: {sorted(states)}")


class Kit:
    """What one test made (nodes, pods, a driver DaemonSet, a policy) and the stand-ins."""

    def __init__(self, api: client.ApiClient, tag: str) -> None:
        self.api = api
        self.tag = tag
        self.namespace = f"up-{tag}"
        transport = Transport(api)
        mapper = RESTMapper(transport)
        self.watch_cache = Cache(transport, mapper)
        self.client = Client(transport, mapper, self.watch_cache, field_manager="tests")
        self.nodes: list[str] = []
        self.policies: list[tuple[GVK, str]] = []
        self.ds_uid = ""
        self.revision = 0
        self.newest = ""
        self.recreate_drivers = True
        self.hold_driver_ready: set[str] = set()
        self.failing_revisions: dict[str, set[str]] = {}
        """Per node, the driver revisions that never validate there (a bad driver): while the
        node's driver pod runs one, its validator pods never get ready."""
        self.hold_validator_ready: set[str] = set()
        self.restart_validators = True
        self._kubelet: asyncio.Task[None] | None = None
        self._operator: asyncio.Task[None] | None = None
        self.manager: Manager | None = None
        self.controller: UpgradeController | None = None
        self.created_driver_pods = 0
        self._ids = 0

    # -- objects -------------------------------------------------------------------------

    def _id(self) -> str:
        self._ids += 1
        return f"{self._ids:04d}"

    async def setup(self) -> None:
        await apply_crds(self.api, load_documents(sorted((REPO / "config/crd").glob("*.yaml"))))
        for cp in await self.client.list_live(CLUSTER_POLICY):
            await self.client.delete(CLUSTER_POLICY, name_of(cp), missing_ok=True)
        for nvd in await self.client.list_live(NVIDIA_DRIVER):
            await self.client.delete(NVIDIA_DRIVER, name_of(nvd), missing_ok=True)
        await self.client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        )
        ds = await self.client.create(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": DS_NAME, "namespace": self.namespace},
                "spec": {
                    "selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
                    "updateStrategy": {"type": "OnDelete"},
                    "template": {
                        "metadata": {"labels": DRIVER_LABELS},
                        "spec": {
                            "nodeSelector": {"upgrade-test": self.tag},
                            "containers": [{"name": "c", "image": "driver:1"}],
                        },
                    },
                },
            }
        )
        self.ds_uid = ds["metadata"]["uid"]
        await self.add_revision("rev1")
        self.watch_cache.informer(NODE, label_selector=f"upgrade-test={self.tag}")
        await self.watch_cache.start()
        await self.watch_cache.wait_for_sync(60)

    async def add_revision(self, hash_: str) -> None:
        """What the DaemonSet controller does when the template changes."""
        self.revision += 1
        await self.client.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": f"{DS_NAME}-{hash_}",
                    "namespace": self.namespace,
                    "labels": {"controller-revision-hash": hash_, **DRIVER_LABELS},
                    "ownerReferences": [self._ds_ref()],
                },
                "revision": self.revision,
                "data": {"spec": {"template": {"metadata": {"labels": {"v": hash_}}}}},
            }
        )
        self.newest = hash_
        await self._template_image(hash_)

    async def restore_revision(self, hash_: str) -> None:
        """What the DaemonSet controller does when the template goes back to an earlier one:
        that revision (the same hash) becomes the newest again."""
        self.revision += 1
        await self.client.patch(
            REVISION, f"{DS_NAME}-{hash_}", {"revision": self.revision}, namespace=self.namespace
        )
        self.newest = hash_
        await self._template_image(hash_)

    async def _template_image(self, hash_: str) -> None:
        """The template's image follows its revision (`driver:<hash>`)."""
        container = {"name": "nvidia-driver-ctr", "image": f"driver:{hash_}"}
        template = {"spec": {"containers": [container]}}
        await self.client.patch(
            DAEMONSET, DS_NAME, {"spec": {"template": template}}, namespace=self.namespace
        )

    def _ds_ref(self) -> Object:
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": DS_NAME,
            "uid": self.ds_uid,
            "controller": True,
        }

    async def add_node(
        self, suffix: str, *, cordoned: bool = False, kernel: str = "5.15.0-1", **labels: str
    ) -> str:
        name = f"{self.tag}-{suffix}"
        await self.client.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "upgrade-test": self.tag,
                        KERNEL: kernel,
                        **labels,
                    },
                },
                "spec": {"unschedulable": True} if cordoned else {},
            }
        )
        await self.driver_pod(name)
        await self.validator_pod(name)
        self.nodes.append(name)  # only now does the stand-in kubelet look after it
        return name

    async def pod(
        self,
        name: str,
        node: str,
        labels: dict[str, str],
        *,
        owner: Object | None = None,
        gpu: bool = False,
        ready: bool = True,
        annotations: dict[str, str] | None = None,
        volumes: list[Object] | None = None,
        image: str = "x",
        container_name: str = "c",
    ) -> Object:
        container: Object = {"name": container_name, "image": image}
        if gpu:
            container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        meta: Object = {"name": name, "namespace": self.namespace, "labels": labels}
        if owner is not None:
            meta["ownerReferences"] = [owner]
        if annotations:
            meta["annotations"] = annotations
        spec: Object = {"nodeName": node, "containers": [container]}
        if volumes:
            spec["volumes"] = volumes
        pod = await self.client.create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        )
        if ready:
            await self.set_ready(name)
        return pod

    async def set_ready(self, name: str) -> None:
        await self.client.patch(
            POD, name, {"status": _ready_status()}, namespace=self.namespace, subresource="status"
        )

    async def driver_pod(self, node: str, *, ready: bool = True, **kw: Any) -> Object:
        self.created_driver_pods += 1
        return await self.pod(
            f"driver-{node}-{self._id()}",
            node,
            {**DRIVER_LABELS, "controller-revision-hash": self.newest},
            owner=self._ds_ref(),
            image=f"driver:{self.newest}",
            container_name="nvidia-driver-ctr",
            ready=ready,
            **kw,
        )

    async def validator_pod(self, node: str, *, ready: bool = True) -> Object:
        owner = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "nvidia-operator-validator",
            "uid": "validator-ds",
            "controller": True,
        }
        return await self.pod(
            f"validator-{node}-{self._id()}", node, VALIDATOR_LABELS, owner=owner, ready=ready
        )

    async def gpu_pod(self, suffix: str, node: str, *, managed: bool = True, **kw: Any) -> str:
        owner = (
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "train",
                "uid": "rs-uid",
                "controller": True,
            }
            if managed
            else None
        )
        name = f"gpu-{suffix}"
        await self.pod(name, node, {"app": "train", **kw.pop("labels", {})}, owner=owner,
                       gpu=True, **kw)  # fmt: skip
        return name

    async def cluster_policy(self, upgrade_policy: Object | None, *, status: bool = True) -> str:
        name = f"policy-{self.tag}"
        spec: Object = {"driver": {}}
        if upgrade_policy is not None:
            spec["driver"]["upgradePolicy"] = upgrade_policy
        await self.client.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
        self.policies.append((CLUSTER_POLICY, name))
        if status:
            await self.client.patch(
                CLUSTER_POLICY, name, {"status": {"state": "ready"}}, subresource="status"
            )
        return name

    # -- reading -------------------------------------------------------------------------

    async def node(self, name: str) -> Object:
        return await self.client.get_live(NODE, name)

    async def states(self) -> dict[str, str]:
        return {
            name_of(n): labels_of(n).get(STATE_LABEL, "")
            for n in await self.client.list_live(NODE, label_selector=f"upgrade-test={self.tag}")
        }

    async def pods(self, **labels: str) -> list[Object]:
        selector = ",".join(f"{k}={v}" for k, v in labels.items()) or None
        return await self.client.list_live(POD, namespace=self.namespace, label_selector=selector)

    async def all_done(self) -> bool:
        states = await self.states()
        return bool(states) and all(s == S.UPGRADE_DONE.value for s in states.values())

    async def upgraded(self) -> bool:
        """Every node done, running a driver pod of the DaemonSet's newest revision."""
        if not await self.all_done():
            return False
        drivers = [
            p for p in await self.pods(app="nvidia-driver-daemonset")
            if not p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip
        nodes = {p["spec"]["nodeName"] for p in drivers}
        return nodes == set(self.nodes) and all(
            labels_of(p).get("controller-revision-hash") == self.newest for p in drivers
        )

    async def events(self, name: str) -> list[Object]:
        return [
            e
            for e in await self.client.list_live(EVENT, namespace="default")
            if (e.get("involvedObject") or {}).get("name") == name
        ]

    def watcher(self, policy: Object) -> Watcher:
        spec = DriverUpgradePolicySpec.from_dict(policy)
        watcher = Watcher(
            self,
            spec.max_parallel_upgrades,
            max_unavailable(spec, len(self.nodes)),
        )
        watcher.initially_unavailable = sum(
            1 for n in self.watch_cache.list(NODE) if (n.get("spec") or {}).get("unschedulable")
        )
        self.watch_cache.informer_for(NODE).add_handler(watcher)
        return watcher

    # -- the stand-ins for kubelet and the DaemonSet controller --------------------------

    def start_kubelet(self) -> None:
        self._kubelet = asyncio.create_task(self._kubelet_loop())

    async def _kubelet_loop(self) -> None:
        while True:
            with contextlib.suppress(NotFound, AssertionError):
                await self._kubelet_pass()
            await asyncio.sleep(0.05)

    async def _kubelet_pass(self) -> None:
        pods = await self.client.list_live(POD, namespace=self.namespace)
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                await self.client.delete(
                    POD, meta["name"], namespace=self.namespace, grace_period_seconds=0,
                    missing_ok=True,
                )  # fmt: skip
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        labels = {name_of(n): labels_of(n) for n in await self.client.list_live(NODE)}
        for node in self.nodes:
            on_node = [p for p in live if p["spec"].get("nodeName") == node]
            drivers = [p for p in on_node if labels_of(p).get("app") == "nvidia-driver-daemonset"]
            validators = [p for p in on_node if labels_of(p).get("app") == VALIDATOR_LABELS["app"]]
            if not drivers and self.recreate_drivers:
                await self.driver_pod(node, ready=node not in self.hold_driver_ready)
            failing = self.failing_revisions.get(node, set())
            bad = any(labels_of(d).get("controller-revision-hash") in failing for d in drivers)
            for d in drivers:
                if node not in self.hold_driver_ready and not _is_ready(d):
                    await self.set_ready(name_of(d))
            # As the validator's DaemonSet: off a node whose deploy label is not `true` (a
            # node without the label stands for a cluster that does not label nodes).
            if labels.get(node, {}).get(VALIDATOR_DEPLOY_LABEL, "true") != "true":
                for v in validators:
                    await self.client.delete(POD, name_of(v), namespace=self.namespace)
                continue
            held = node in self.hold_validator_ready or bad
            if not validators and self.restart_validators:
                await self.validator_pod(node, ready=not held)
            for v in validators:
                if not held and not _is_ready(v):
                    await self.set_ready(name_of(v))

    # -- the operator --------------------------------------------------------------------

    async def start_operator(self, *, trim_pods: bool = False, **options: Any) -> UpgradeController:
        self.manager = Manager(self.api, field_manager="gpu-operator", bind_address=None)
        if trim_pods:
            # As the operator's shared pod informer does: volumes never enter the cache, nor
            # pods not bound to a node.
            self.manager.informer(
                POD,
                field_selector=SCHEDULED_PODS,
                label_selector=CACHED_PODS,
                drop=(("spec", "volumes"),),
                transform=pod_as_read,
            )
        options.setdefault("workers", 2)
        self.controller = UpgradeController(self.manager, namespace=self.namespace, **options)
        self._operator = asyncio.create_task(self.manager.run())
        manager = self.manager
        await eventually(lambda: manager.ready and manager.is_leader, "the operator to start")
        return self.controller

    async def kill_operator(self) -> None:
        """Like kill -9: the task is cancelled wherever it is; nothing is drained."""
        if self._operator is not None:
            self._operator.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._operator
            self._operator = None

    async def teardown(self) -> None:
        await self.kill_operator()
        if self._kubelet is not None:
            self._kubelet.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._kubelet
        await self.watch_cache.stop()
        for gvk, name in self.policies:
            await self.client.delete(gvk, name, missing_ok=True)
        for name in self.nodes:
            await self.client.delete(NODE, name, missing_ok=True)
        for pod in await self.client.list_live(POD, namespace=self.namespace):
            await self.client.delete(
                POD, name_of(pod), namespace=self.namespace, grace_period_seconds=0,
                missing_ok=True,
            )  # fmt: skip
        await self.client.delete(NAMESPACE, self.namespace, missing_ok=True)


def _is_ready(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


@pytest.fixture
async def kit(api_client: client.ApiClient) -> AsyncIterator[Kit]:
    k = Kit(api_client, uuid.uuid4().hex[:6])
    await k.setup()
    k.start_kubelet()
    try:
        yield k
    finally:
        await k.teardown()
