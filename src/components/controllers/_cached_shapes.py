"""What the cache keeps of each kind it trims: the drop lists and the `*AsRead` schemas.

The informers (`_informers`) register these; the two halves are kept together per kind so
a controller that starts reading a new field finds, in one place, both what it must take
off the drop list and what it must add to the schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict


def _each(prefix: tuple[str, ...], keys: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    return tuple((*prefix, key) for key in keys)


NODE_DROP = (
    ("status", "images"),
    ("status", "volumesAttached"),
    ("status", "volumesInUse"),
    *_each(
        ("status",),
        ("addresses", "capacity", "config", "daemonEndpoints", "features", "runtimeHandlers"),
    ),
    *_each(
        ("status", "nodeInfo"),
        (
            "architecture",
            "bootID",
            "kernelVersion",
            "kubeProxyVersion",
            "kubeletVersion",
            "machineID",
            "operatingSystem",
            "osImage",
            "swap",
            "systemUUID",
        ),
    ),
    ("status", "conditions", "*", "lastHeartbeatTime"),
    *_each(("spec",), ("podCIDR", "podCIDRs", "providerID", "configSource")),
)
"""What no controller reads of a Node. Kept: metadata whole (labels; annotations, whose
presence a JSON patch must know), `spec.unschedulable` and `taints`, `status.allocatable`,
the conditions' type, status, reason, message and lastTransitionTime (the node agent's
`GPUDriverReady` reason says host driver, `GPUValidated` since when it holds),
`status.nodeInfo.containerRuntimeVersion`. A controller
that starts reading another field of a cached node must take it off this list."""

_CONTAINER_UNREAD = (
    "args",
    "command",
    "env",
    "envFrom",
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "securityContext",
    "startupProbe",
    "imagePullPolicy",
    "stdin",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "volumeMounts",
    "workingDir",
)
_CONTAINER_STATUS_UNREAD = (
    "allocatedResources",
    "containerID",
    "image",
    "imageID",
    "lastState",
    "resources",
    "started",
    "state",
    "user",
    "volumeMounts",
)
POD_DROP = (
    ("spec", "volumes"),
    *_each(
        ("spec",),
        (
            "affinity",
            "automountServiceAccountToken",
            "dnsConfig",
            "dnsPolicy",
            "enableServiceLinks",
            "ephemeralContainers",
            "hostAliases",
            "hostIPC",
            "hostNetwork",
            "hostPID",
            "hostname",
            "imagePullSecrets",
            "os",
            "overhead",
            "preemptionPolicy",
            "priority",
            "priorityClassName",
            "readinessGates",
            "restartPolicy",
            "runtimeClassName",
            "schedulerName",
            "securityContext",
            "serviceAccount",
            "serviceAccountName",
            "setHostnameAsFQDN",
            "shareProcessNamespace",
            "subdomain",
            "terminationGracePeriodSeconds",
            "tolerations",
            "topologySpreadConstraints",
        ),
    ),
    *_each(("spec", "containers", "*"), _CONTAINER_UNREAD),
    *_each(("spec", "initContainers", "*"), _CONTAINER_UNREAD),
    *_each(("status",), ("hostIP", "hostIPs", "podIP", "podIPs", "qosClass", "startTime")),
    *_each(("status", "containerStatuses", "*"), _CONTAINER_STATUS_UNREAD),
    *_each(("status", "initContainerStatuses", "*"), _CONTAINER_STATUS_UNREAD),
    *_each(
        ("status", "conditions", "*"),
        ("lastProbeTime", "lastTransitionTime", "message", "reason"),
    ),
    ("status", "ephemeralContainerStatuses"),
)
"""What no controller reads of a Pod (every pod of the cluster bound to a node is cached,
DaemonSet pods with a per-node affinity each). Kept: metadata whole, `nodeName`, `nodeSelector`, the
containers that ask for a GPU with their name and resources, the phase, the Ready
condition's type and status (those two by `components.upgrade.pod_as_read`), each
container status's name, ready and restartCount. A controller that starts
reading another field of a cached pod must take it off this list, and add it to
`PodAsRead`. Volumes are read from the server for the few pods a drain must judge
(`components.upgrade`)."""
REVISION_DROP = (("data",),)


class _ObjectMeta(TypedDict, total=False):
    """ObjectMeta whole but `managedFields` (half of a pod's bytes), for pods, nodes and
    DaemonSets."""

    name: Any
    generateName: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any


class _PodContainer(TypedDict, total=False):
    name: Any
    resources: Any
    image: Any  # a driver pod's (`components.upgrade.pod_as_read`): a rollback's last good


class _PodSpec(TypedDict, total=False):
    nodeName: Any
    nodeSelector: Any
    containers: list[_PodContainer] | None
    initContainers: list[_PodContainer] | None


class _PodCondition(TypedDict, total=False):
    type: Any
    status: Any


class _PodContainerStatus(TypedDict, total=False):
    name: Any
    ready: Any
    restartCount: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: list[_PodCondition] | None
    containerStatuses: list[_PodContainerStatus] | None
    initContainerStatuses: list[_PodContainerStatus] | None


class PodAsRead(TypedDict, total=False):
    """A pod as the cache keeps it, decoded so (`reconciler.ObjectDecoder`'s schema): the
    fields `POD_DROP` leaves that a controller reads, and nothing else. msgspec skips the
    rest in C; a pod event's decode and trim cost 42 us so against 12 us this way (the
    full sample policy's operand pods, bench/decode_events.py). A controller that starts
    reading another field of a cached pod must add it here as well as take it off
    `POD_DROP`."""

    apiVersion: Any
    kind: Any
    metadata: _ObjectMeta
    spec: _PodSpec
    status: _PodStatus


class _NodeSpec(TypedDict, total=False):
    unschedulable: Any
    taints: Any


class _NodeCondition(TypedDict, total=False):
    type: Any
    status: Any
    reason: Any
    message: Any
    lastTransitionTime: Any


class _NodeInfo(TypedDict, total=False):
    containerRuntimeVersion: Any


class _NodeStatus(TypedDict, total=False):
    allocatable: Any
    conditions: list[_NodeCondition] | None
    nodeInfo: _NodeInfo


class NodeAsRead(TypedDict, total=False):
    """A node as the cache keeps it, decoded so (`reconciler.ObjectDecoder`'s schema): what
    `NODE_DROP` says is kept, and nothing else. msgspec skips the rest in C: a node event's
    decode and trim cost 43 us by the drop list and 21 us this way (a kubelet's GPU node of
    24 KB, bench/decode_events.py), and every node changes about four times in a rollout.
    A controller that starts reading another field of a cached node must add it here as
    well as take it off `NODE_DROP`."""

    apiVersion: Any
    kind: Any
    metadata: _ObjectMeta
    spec: _NodeSpec
    status: _NodeStatus


class DaemonSetAsRead(TypedDict, total=False):
    """A DaemonSet as the cache keeps it: whole but `managedFields` (which every informer
    drops), decoded in one pass in C. Without a schema, the decoder split each DaemonSet
    into raw members in Python to skip `managedFields`, and the 2,250 DaemonSet status
    events of a 1,000-node rollout made that split 2.6% of the operator's CPU."""

    apiVersion: Any
    kind: Any
    metadata: _ObjectMeta
    spec: Any
    status: Any
