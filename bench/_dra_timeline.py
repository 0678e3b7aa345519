"""Where a DRA run's time goes (`scale.py --dra`): each milestone from the clock's start, seen
by watches of the benchmark's own, so the floor's run and the GPUCluster run are timed alike.

Milestones: the GPUCluster's finalizer and each status state (the GPUCluster run only), each
DRA object first seen (namespace, RBAC, DeviceClasses, admission policy, DaemonSets, ...),
and per GPU node the deploy label the kubelet plugin's DaemonSet selects on, its plugin pod
created and Ready, and its `gpu.nvidia.com` ResourceSlice, as [p50, max] seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from gpusim import DRA_DRIVER
from reconciler import GVK, Cache, Object, labels_of, name_of, namespace_of
from reconciler.lowlevel import RESTMapper, Transport

NAMESPACE = "gpu-operator"
PLUGIN_LABEL = "nvidia.com/gpu.deploy.dra-driver"
"""The label the kubelet plugin's DaemonSet selects on (both stacks' DaemonSets)."""
GPU_CLUSTER = GVK("nvidia.com", "v1alpha1", "GPUCluster")
NODE = GVK("", "v1", "Node")
POD = GVK("", "v1", "Pod")
SLICE = GVK("resource.k8s.io", "v1", "ResourceSlice")
_STACK_KINDS = (
    (GVK("", "v1", "Namespace"), None),
    (GVK("", "v1", "ServiceAccount"), NAMESPACE),
    (GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"), None),
    (GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"), None),
    (GVK("rbac.authorization.k8s.io", "v1", "Role"), NAMESPACE),
    (GVK("rbac.authorization.k8s.io", "v1", "RoleBinding"), NAMESPACE),
    (GVK("resource.k8s.io", "v1", "DeviceClass"), None),
    (GVK("resource.k8s.io", "v1", "ResourceClaimTemplate"), NAMESPACE),
    (GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy"), None),
    (GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"), None),
    (GVK("apps", "v1", "DaemonSet"), NAMESPACE),
    (GVK("apps", "v1", "Deployment"), NAMESPACE),
)
_POD_DROP = [("spec", "containers"), ("spec", "volumes"), ("spec", "affinity")]


class _Handler:
    def __init__(self, seen: Callable[[Object], None]) -> None:
        self._seen = seen

    def on_add(self, obj: Object) -> None:
        self._seen(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._seen(new)

    def on_delete(self, obj: Object) -> None:
        pass


def _ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _spread(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "first": round(min(values), 2),
        "p50": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


class Timeline:
    """The milestones of one run; `start()` once the watches have listed, then `begin()` at
    the clock's start (what was there before counts as at 0)."""

    def __init__(self, gpu_nodes: set[str], *, gpu_cluster: bool) -> None:
        self.gpu_nodes = gpu_nodes
        self.gpu_cluster = gpu_cluster
        self.began: float | None = None
        self.events: dict[str, float] = {}
        self.labelled: dict[str, float] = {}
        self.pod_created: dict[str, float] = {}
        self.pod_ready: dict[str, float] = {}
        self.other_pods: dict[str, dict[str, float]] = {}
        """The other DaemonSets' pods: first seen, per DaemonSet."""
        self.published: dict[str, float] = {}
        self._cache: Cache | None = None

    def _now(self) -> float:
        return 0.0 if self.began is None else round(time.monotonic() - self.began, 3)

    def _once(self, key: str) -> None:
        if self.began is not None:  # what was there before the clock is no milestone
            self.events.setdefault(key, self._now())

    async def start(self, transport: Transport) -> None:
        cache = Cache(transport, RESTMapper(transport))
        for gvk, namespace in _STACK_KINDS:
            cache.informer(gvk, namespace=namespace, drop=[("spec",)]).add_handler(
                _Handler(self._object)
            )
        cache.informer(NODE, drop=[("status",), ("spec",)]).add_handler(_Handler(self._node))
        cache.informer(POD, namespace=NAMESPACE, drop=_POD_DROP).add_handler(_Handler(self._pod))
        cache.informer(SLICE, drop=[("spec", "devices")]).add_handler(_Handler(self._slice))
        if self.gpu_cluster:
            cache.informer(GPU_CLUSTER).add_handler(_Handler(self._cluster))
        await cache.start()
        await cache.wait_for_sync(600)
        self._cache = cache

    def begin(self) -> None:
        self.began = time.monotonic()

    async def stop(self) -> None:
        if self._cache is not None:
            await self._cache.stop()

    def _object(self, obj: Object) -> None:
        where = f"{namespace_of(obj)}/" if namespace_of(obj) else ""
        self._once(f"{obj.get('kind')} {where}{name_of(obj)}")

    def _cluster(self, obj: Object) -> None:
        self._once("GPUCluster seen")
        if (obj.get("metadata") or {}).get("finalizers"):
            self._once("GPUCluster finalizer")
        state = (obj.get("status") or {}).get("state")
        if state:
            self._once(f"GPUCluster state {state}")

    def _node(self, node: Object) -> None:
        name = name_of(node)
        if name in self.gpu_nodes and labels_of(node).get(PLUGIN_LABEL) == "true":
            self.labelled.setdefault(name, self._now())

    def _pod(self, pod: Object) -> None:
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        daemonset = next((str(o["name"]) for o in owners if o.get("kind") == "DaemonSet"), None)
        if daemonset is None:
            return
        if "kubelet-plugin" not in daemonset:
            self.other_pods.setdefault(daemonset, {}).setdefault(name_of(pod), self._now())
            return
        node = str((pod.get("spec") or {}).get("nodeName") or name_of(pod))
        self.pod_created.setdefault(name_of(pod), self._now())
        if _ready(pod):
            self.pod_ready.setdefault(node, self._now())

    def _slice(self, obj: Object) -> None:
        spec = obj.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName"):
            self.published.setdefault(str(spec["nodeName"]), self._now())

    def summary(self) -> dict[str, Any]:
        return {
            "milestones": dict(sorted(self.events.items(), key=lambda kv: kv[1])),
            "nodes_labelled": _spread(list(self.labelled.values())),
            "plugin_pods_created": _spread(list(self.pod_created.values())),
            "plugin_pods_ready": _spread(list(self.pod_ready.values())),
            "slices_published": _spread(
                [t for n, t in self.published.items() if n in self.gpu_nodes]
            ),
            "other_pods_created": {
                ds: _spread(list(pods.values())) for ds, pods in sorted(self.other_pods.items())
            },
        }


def describe(summary: dict[str, Any]) -> str:
    """The timeline as lines to print."""
    lines = [f"  {t:7.2f}s  {what}" for what, t in summary["milestones"].items()]
    for key in ("nodes_labelled", "plugin_pods_created", "plugin_pods_ready", "slices_published"):
        s = summary[key]
        if s["count"]:
            lines.append(
                f"  {key}: {s['count']} first {s['first']}s p50 {s['p50']}s max {s['max']}s"
            )
        else:
            lines.append(f"  {key}: none")
    for ds, s in summary["other_pods_created"].items():
        lines.append(f"  {ds} pods created: {s['count']} p50 {s['p50']}s max {s['max']}s")
    return "\n".join(lines)
