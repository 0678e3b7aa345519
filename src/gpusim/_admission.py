"""The kubelet's device admission, simulated: which GPU pods a node may start.

kwok has no device manager: left alone it runs every pod bound to its nodes, so a GPU pod
that a scheduler bound from a stale view would run on a node whose device plugin is gone
(a driver being replaced, say). A real kubelet refuses it. Before any container starts,
its device manager allocates each container's device-plugin resources from the plugin's
healthy devices; when that fails the pod is rejected: `status.phase: Failed`, reason
`UnexpectedAdmissionError`, message `Pod was rejected: Allocate failed due to <why>, which
is unexpected` (and a Warning event), and it never runs.

The simulation splits that in two, so it has no race with kwok:

* kwok's `pod-ready` stage (what makes a pod Running) is amended with `STAGE_GATE`: a pod
  that asks for no `nvidia.com/` resource goes through as before, one that does only once
  it carries `ANNOTATION_ADMITTED`. kwok never starts a GPU pod nobody admitted.
* the GPU node behaviour admits each such pod bound to a node, one node at a time (its
  work queue never runs two reconciles of one node at once), against what the node's
  simulated device plugins offer at that moment, minus what the pods admitted there
  before hold: it writes the annotation, or fails the pod as the kubelet does.

The arithmetic is the device manager's (`allocate`): init containers first, in order,
then the app containers; a container takes devices an earlier (non-restartable) init
container held before new ones, a restartable init container (a sidecar) and an app
container keep theirs. A pod thus holds, per resource, max(largest init container,
sum of app containers + sidecars), as the scheduler counts it too.

Where the simulation is stricter than a real kubelet: the device manager checks only the
resources a device plugin registered on the node (it keeps one for five minutes after its
plugin leaves, with no healthy device), and the kubelet's resource predicate then drops a
resource the node does not list at all; so a pod bound by hand to a node whose plugin
never registered its resource, or left more than five minutes ago, would run there. Here
every `nvidia.com/` resource a node does not offer now is refused as "no healthy devices".
No Event is written. Pure functions: `gpusim.gpu_node_behaviour` does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpusim._nodes import SIM_PREFIX
from reconciler import annotations_of, creation_timestamp_of, name_of, namespace_of, uid_of

ANNOTATION_ADMITTED = SIM_PREFIX + "admitted"
"""Set to `true` on a GPU pod the simulated device manager admitted: kwok may start it."""
DEVICE_PREFIX = "nvidia.com/"
"""The resources the simulated device plugins serve (GPUs, MIG devices, shared GPUs,
GPUs bound to vfio-pci): the ones admission is about."""
REASON = "UnexpectedAdmissionError"

VALIDATOR_APP = "nvidia-operator-validator"
"""The validator pods (`app` label) wait for the gate too: the GPU node behaviour lets them
start unless their node's driver is a failing one (`gpusim._failing_drivers`)."""

STAGE_GATE = (
    f'if (.metadata.labels.app // "") == "{VALIDATOR_APP}"'
    f' then (.metadata.annotations["{ANNOTATION_ADMITTED}"] // "")'
    " elif ([(.spec.containers // [])[], (.spec.initContainers // [])[]"
    " | (.resources.limits // {}), (.resources.requests // {}) | keys[]"
    f' | select(startswith("{DEVICE_PREFIX}"))] | length) == 0'
    f' then "none" else (.metadata.annotations["{ANNOTATION_ADMITTED}"] // "") end'
)
"""A kwok selector key (a jq expression over the pod): `none` for a pod that asks for no
device resource and is no validator, else the value of its admission annotation.
`requests_devices` is the same test in Python."""
STAGE_GATE_VALUES = ("none", "true")
_READY_STAGE = "pod-ready"


def gate_pod_ready(stage: Mapping[str, Any]) -> dict[str, Any] | None:
    """kwok's `pod-ready` stage with `STAGE_GATE` added to its selector; None for any
    other stage."""
    if name_of(stage) != _READY_STAGE:
        return None
    spec = dict(stage.get("spec") or {})
    selector = dict(spec.get("selector") or {})
    gate = {"key": STAGE_GATE, "operator": "In", "values": list(STAGE_GATE_VALUES)}
    requirement = {"jq": gate}
    selector["matchExpressions"] = [*(selector.get("matchExpressions") or []), requirement]
    spec["selector"] = selector
    return {**stage, "spec": spec}


# -- what a pod asks for ---------------------------------------------------------------


def _device_keys(container: Mapping[str, Any]) -> Iterable[str]:
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        for key in resources.get(part) or {}:
            if str(key).startswith(DEVICE_PREFIX):
                yield str(key)


def requests_devices(spec: Mapping[str, Any]) -> bool:
    """Whether any container or init container asks for a device resource (what
    `STAGE_GATE` tests)."""
    return any(
        True
        for part in ("containers", "initContainers")
        for container in spec.get(part) or []
        for _ in _device_keys(container)
    )


def device_limits(container: Mapping[str, Any]) -> dict[str, int]:
    """The container's device resources and how many of each: its limits, which the API
    server makes equal to its requests for these (the device manager reads the limits).
    A quantity that is no whole number counts none."""
    limits = (container.get("resources") or {}).get("limits") or {}
    out: dict[str, int] = {}
    for key, value in limits.items():
        if str(key).startswith(DEVICE_PREFIX):
            try:
                out[str(key)] = int(str(value))
            except ValueError:
                continue
    return out


@dataclass(frozen=True)
class DeviceContainer:
    """One container's device limits, and what kind of container it is."""

    limits: Mapping[str, int] = field(default_factory=dict)
    init: bool = False
    restartable: bool = False
    """An init container with `restartPolicy: Always` (a sidecar): it runs beside the app
    containers, so it keeps its devices."""


@dataclass(frozen=True)
class DevicePod:
    """A pod bound to a node, not finished, that asks for device resources."""

    key: str
    uid: str
    node: str
    created: str
    containers: tuple[DeviceContainer, ...]
    """The init containers in order, then the app containers (the order of allocation)."""
    admitted: bool = False
    """Admitted already: it carries `ANNOTATION_ADMITTED`, or kwok started it."""


def device_pod(pod: Mapping[str, Any]) -> DevicePod | None:
    """The pod as admission sees it, or None (unbound, finished, or asking for no device
    resource)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    phase = status.get("phase")
    if not node or phase in ("Succeeded", "Failed") or not requests_devices(spec):
        return None
    containers = [
        DeviceContainer(device_limits(c), init=True, restartable=c.get("restartPolicy") == "Always")
        for c in spec.get("initContainers") or []
    ]
    containers += [DeviceContainer(device_limits(c)) for c in spec.get("containers") or []]
    annotations = annotations_of(pod)
    return DevicePod(
        key=f"{namespace_of(pod)}/{name_of(pod)}",
        uid=uid_of(pod),
        node=str(node),
        created=creation_timestamp_of(pod),
        containers=tuple(containers),
        admitted=annotations.get(ANNOTATION_ADMITTED) == "true" or phase == "Running",
    )


# -- the device manager's arithmetic ---------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    """Why the kubelet refused a pod, as it writes it on the pod's status."""

    reason: str
    message: str

    @property
    def status(self) -> dict[str, str]:
        """The pod status the kubelet writes for it."""
        return {
            "phase": "Failed",
            "reason": self.reason,
            "message": "Pod was rejected: " + self.message,
        }


def _rejected(why: str) -> Rejection:
    return Rejection(REASON, f"Allocate failed due to {why}, which is unexpected")


def allocate(
    pod: DevicePod, offered: Mapping[str, int] | None, in_use: Mapping[str, int]
) -> dict[str, int] | Rejection:
    """The devices the pod holds once admitted (per resource), or why it is refused.

    `offered`: the healthy devices the node's plugins serve, per resource (None: without
    end, to count what a pod holds); `in_use`: what the pods admitted before hold. Each
    container in turn, as the device manager allocates: a resource with no healthy device
    is refused at once; otherwise devices an earlier init container held are reused first,
    then free ones are taken, and too few free is refused with the count still needed."""
    reusable: dict[str, int] = {}
    held: dict[str, int] = {}
    for container in pod.containers:
        reused: dict[str, int] = {}
        fresh: dict[str, int] = {}
        # The real manager walks a Go map (no order); sorted, the message is stable.
        for resource, required in sorted(container.limits.items()):
            if offered is not None and offered.get(resource, 0) <= 0:
                return _rejected(
                    f"no healthy devices present; cannot allocate unhealthy devices {resource}"
                )
            reused[resource] = min(reusable.get(resource, 0), required)
            needed = required - reused[resource]
            if needed <= 0:
                continue
            if offered is not None:
                busy = in_use.get(resource, 0) + held.get(resource, 0)
                available = max(offered.get(resource, 0) - busy, 0)
                if available < needed:
                    return _rejected(
                        f"requested number of devices unavailable for {resource}. "
                        f"Requested: {needed}, Available: {available}"
                    )
            fresh[resource] = needed
            held[resource] = held.get(resource, 0) + needed
        for resource in container.limits:
            if container.init and not container.restartable:
                # Its devices join the pool the next containers take from first.
                reusable[resource] = reusable.get(resource, 0) + fresh.get(resource, 0)
            else:
                reusable[resource] = reusable.get(resource, 0) - reused.get(resource, 0)
    return held


def holds(pod: DevicePod) -> dict[str, int]:
    """The devices an admitted pod holds, per resource."""
    result = allocate(pod, None, {})
    assert not isinstance(result, Rejection)  # nothing is refused from an endless supply
    return result


@dataclass
class Admission:
    """What the simulated device manager decides for the pods waiting on one node."""

    admitted: list[DevicePod] = field(default_factory=list)
    rejected: list[tuple[DevicePod, Rejection]] = field(default_factory=list)


def admit(
    offered: Mapping[str, int], pods: Iterable[DevicePod], *, admitted: Iterable[str] = ()
) -> Admission:
    """Admit or refuse each pod on one node that waits for it, oldest first as the kubelet
    takes them, against `offered` less what the admitted pods hold (`admitted`: uids
    admitted whose annotation the caller has not seen yet)."""
    already = set(admitted)
    pods = list(pods)
    in_use: dict[str, int] = {}
    for pod in pods:
        if pod.admitted or pod.uid in already:
            for resource, count in holds(pod).items():
                in_use[resource] = in_use.get(resource, 0) + count
    decision = Admission()
    waiting = [p for p in pods if not (p.admitted or p.uid in already)]
    for pod in sorted(waiting, key=lambda p: (p.created, p.key)):
        result = allocate(pod, offered, in_use)
        if isinstance(result, Rejection):
            decision.rejected.append((pod, result))
            continue
        decision.admitted.append(pod)
        for resource, count in result.items():
            in_use[resource] = in_use.get(resource, 0) + count
    return decision


def offered_counts(resources: Mapping[str, str]) -> dict[str, int]:
    """`nvidia.com/` resources as the node's plugins offer them (quantities as written on
    the node) -> counts."""
    out: dict[str, int] = {}
    for key, value in resources.items():
        if key.startswith(DEVICE_PREFIX):
            try:
                out[key] = int(value)
            except ValueError:
                continue
    return out
