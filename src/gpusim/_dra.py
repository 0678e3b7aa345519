"""NVIDIA's DRA kubelet plugin on simulated nodes: where its pod runs, the node's GPUs are
published as a ResourceSlice of driver `gpu.nvidia.com` (`gpusim._dra_slice` builds it).

The slice is written the way the real plugin writes it: as the plugin pod's own
ServiceAccount, with a token bound to that pod (a TokenRequest, as the kubelet mounts one).
Such a token carries the node the pod runs on (`authentication.kubernetes.io/node-name`),
so an admission policy that lets each node's plugin write only its own node's slices sees
exactly what it would see on a real cluster. What the plugin needs for that (its RBAC, the
policy) is whatever the cluster has: a refusal is logged and retried, as the plugin would.

The plugin publishes only once a driver is loaded (a driver on the host, or a Ready
driver pod): the real pod's init container waits for the driver until then. When the
plugin pod goes (deleted, its node unlabelled), the slice goes, as the kubelet removes the
slices of a plugin that unregistered; with the node, the garbage collector removes it
(the Node owns it).

Nothing of this needs a flag on the simulated control plane (Kubernetes 1.37): the
`resource.k8s.io/v1` API, ValidatingAdmissionPolicy, the node name in pod-bound tokens
(ServiceAccountTokenPodNodeInfo) and the scheduler's DynamicResourceAllocation are GA and
always on there; kube-controller-manager runs `resourceclaim-controller` for the claims of
ResourceClaimTemplates (`gpusim._components`).
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from gpusim._dra_slice import DRIVER, resource_slice, slice_devices, slice_spec
from gpusim._node_agents import node_facts
from gpusim._node_model import driver_version
from gpusim._node_software import (
    NodeSoftware,
    PodInfo,
    node_info,
    pod_info,
    trim_node,
    trim_pod,
)
from reconciler import (
    GVK,
    Funcs,
    Manager,
    Object,
    Request,
    Result,
    enqueue_mapped,
    enqueue_object,
    name_of,
    resource_version_of,
    uid_of,
)
from reconciler.errors import NotFound
from reconciler.kinds import NODE, POD

log = logging.getLogger("gpusim.dra")

RESOURCE_SLICE = GVK("resource.k8s.io", "v1", "ResourceSlice")
SLICES_BY_NODE = "gpusim.dra.node"
PLUGIN_PODS_BY_NODE = "gpusim.dra.plugin-node"
TOKEN_SECONDS = 3600
_TOKEN_RENEW_BEFORE = 600.0
_CREATE_SHOWS_WITHIN = 30.0
_SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class PluginWriteRefused(Exception):
    """The API server refused a write made as the plugin (its status code and message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ApiEndpoint:
    """Where the plugin pods reach the API server: its URL and the CA that signs it."""

    host: str
    ca_file: str | None


@dataclass(frozen=True)
class _Token:
    """The token the plugin pod `pod` (namespace/name) holds."""

    pod: str
    token: str
    expires: float


def _slice_node(obj: Object) -> Iterable[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return (str(node),) if node else ()


def _plugin_node(pod: Object) -> Iterable[str]:
    info = pod_info(pod)
    wanted = (NodeSoftware.DRA_KUBELET_PLUGIN, NodeSoftware.DRIVER)
    return (info.node,) if info is not None and info.software in wanted else ()


def _node_requests(pod: Object) -> list[Request]:
    return [Request("", node) for node in _plugin_node(pod)]


def _slice_requests(obj: Object) -> list[Request]:
    return [Request("", node) for node in _slice_node(obj)]


def _hardware_changed(old: Object, new: Object) -> bool:
    """The simulated hardware or its MIG mode changed (all the slice is made of)."""
    return node_info(old).annotations != node_info(new).annotations


def _plugin_changed(old: Object, new: Object) -> bool:
    return pod_info(old) != pod_info(new)


def loaded_driver(hardware_driver: str, pods: Sequence[PodInfo]) -> str | None:
    """The driver version the plugin finds: the host's, else a Ready driver pod's."""
    if hardware_driver:
        return hardware_driver
    pod = next((p for p in pods if p.software is NodeSoftware.DRIVER and p.ready), None)
    return driver_version(pod.image) if pod is not None else None


class DraKubeletPlugins:
    """Publishes each node's ResourceSlice while a DRA kubelet-plugin pod runs on it.

    Registers on `manager` (the GPU node behaviour's): the pod and node informers it
    shares, one on `gpu.nvidia.com` ResourceSlices, and its own controller. `endpoint` is
    how the plugin pods' requests reach the API server.
    """

    def __init__(self, manager: Manager, endpoint: ApiEndpoint, *, workers: int = 8) -> None:
        self._client = manager.client
        self._endpoint = endpoint
        self._tokens: dict[str, _Token] = {}
        """By node: the token of the plugin pod running there."""
        self._created: dict[str, tuple[str, float]] = {}
        """By node: the slice last created there and when, until the cache shows it."""
        self._session: aiohttp.ClientSession | None = None
        self.writes = 0
        nodes = manager.informer(NODE, transform=trim_node)
        pods = manager.informer(
            POD, transform=trim_pod, indexers={PLUGIN_PODS_BY_NODE: _plugin_node}
        )
        slices = manager.informer(
            RESOURCE_SLICE,
            field_selector=f"spec.driver={DRIVER}",
            indexers={SLICES_BY_NODE: _slice_node},
        )
        controller = manager.controller(
            "dra-kubelet-plugin", self.reconcile, max_concurrent_reconciles=workers
        )
        controller.watch(nodes, enqueue_object, Funcs(update=_hardware_changed))
        controller.watch(pods, enqueue_mapped(_node_requests), Funcs(update=_plugin_changed))
        controller.watch(slices, enqueue_mapped(_slice_requests))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        node = self._client.get(NODE, name)
        slices = sorted(
            self._client.list(RESOURCE_SLICE, index=(SLICES_BY_NODE, name)), key=name_of
        )
        if node is None:
            self._tokens.pop(name, None)
            self._created.pop(name, None)
            return None  # the garbage collector removes what the Node owned
        pods = [
            info
            for info in map(pod_info, self._client.list(POD, index=(PLUGIN_PODS_BY_NODE, name)))
            if info is not None
        ]
        plugin = next(
            (p for p in pods if p.software is NodeSoftware.DRA_KUBELET_PLUGIN and p.ready), None
        )
        info = node_info(node)
        hardware = info.hardware
        devices: list[dict[str, Any]] = []
        if plugin is not None and hardware is not None:
            facts = node_facts(
                info,
                hardware,
                driver=loaded_driver(hardware.host_driver, pods),
                driver_container=False,
                toolkit=False,
                workloads=(),
            )
            devices = slice_devices(name, facts)
        if plugin is None:
            self._tokens.pop(name, None)
        if plugin is None or not devices:
            for old in slices:
                await self._remove(old)
            return None
        # The event of our own create may be on its way (a second create would make two
        # slices), unless it was deleted before the cache saw it.
        created = self._created.get(name)
        if (
            created is not None
            and all(name_of(s) != created[0] for s in slices)
            and time.monotonic() - created[1] < _CREATE_SHOWS_WITHIN
        ):
            return Result(requeue_after=1.0)
        self._created.pop(name, None)
        for extra in slices[1:]:
            await self._remove(extra)
        token = await self._token(plugin)
        if token is None:
            return None  # the pod is gone: its events follow
        try:
            await self._publish(node, slices[0] if slices else None, devices, token)
        except PluginWriteRefused as refused:
            if refused.status == 401:
                self._tokens.pop(name, None)  # its pod was replaced: a new token
            raise
        return None

    async def _publish(
        self, node: Object, current: Object | None, devices: list[dict[str, Any]], token: str
    ) -> None:
        name = name_of(node)
        if current is None:
            # The cache keeps no uid: the owner reference needs the live Node's.
            live = await self._client.request("GET", f"/api/v1/nodes/{name}")
            body = resource_slice(name, uid_of(live), devices)
            created = await self._as_plugin(token, "POST", _SLICES_PATH, body)
            self._created[name] = (name_of(created), time.monotonic())
            log.info(
                "%s: published ResourceSlice %s (%d devices)", name, name_of(created), len(devices)
            )
            return
        spec = current.get("spec") or {}
        generation = int((spec.get("pool") or {}).get("generation") or 1)
        if spec == slice_spec(name, devices, generation):
            return
        updated = dict(current)
        updated["spec"] = slice_spec(name, devices, generation + 1)
        await self._as_plugin(token, "PUT", f"{_SLICES_PATH}/{name_of(current)}", updated)
        log.info("%s: updated ResourceSlice %s (%d devices)", name, name_of(current), len(devices))

    async def _remove(self, obj: Object) -> None:
        """As the kubelet, once the plugin unregistered: its slices go."""
        await self._client.delete(
            RESOURCE_SLICE,
            name_of(obj),
            resource_version=resource_version_of(obj) or None,
            missing_ok=True,
        )
        self.writes += 1

    async def _token(self, plugin: PodInfo) -> str | None:
        """A token of the pod's ServiceAccount bound to the pod, as the kubelet mounts one
        (renewed before it expires); None when the pod is gone."""
        cached = self._tokens.get(plugin.node)
        fresh = cached is not None and cached.expires - time.monotonic() > _TOKEN_RENEW_BEFORE
        if cached is not None and fresh and cached.pod == plugin.key:
            return cached.token
        namespace, _, pod_name = plugin.key.partition("/")
        try:
            pod = await self._client.request(
                "GET", f"/api/v1/namespaces/{namespace}/pods/{pod_name}"
            )
        except NotFound:
            self._tokens.pop(plugin.node, None)
            return None
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": TOKEN_SECONDS,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": uid_of(pod),
                },
            },
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        try:
            answer = await self._client.request("POST", path, body=body)
        except NotFound:
            return None
        token = str((answer.get("status") or {}).get("token") or "")
        self._tokens[plugin.node] = _Token(plugin.key, token, time.monotonic() + TOKEN_SECONDS)
        return token

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            context = ssl.create_default_context(cafile=self._endpoint.ca_file)
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))
        return self._session

    async def _as_plugin(self, token: str, method: str, path: str, body: Object) -> Object:
        """One request made as the plugin pod (its token, no client certificate)."""
        url = self._endpoint.host.rstrip("/") + path
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with self._pool().request(
            method, url, data=json.dumps(body), headers=headers
        ) as answer:
            text = await answer.text()
        self.writes += 1
        if not 200 <= answer.status < 300:
            try:
                message = str(json.loads(text).get("message", ""))
            except ValueError:
                message = text[:200]
            raise PluginWriteRefused(answer.status, message)
        result: Object = json.loads(text)
        return result
