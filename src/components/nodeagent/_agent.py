"""One node agent: look at the GPUs, decide, publish what changed.

`NodeAgent.step` is the whole job once: read the node (its allocatable and labels), read
NVML and the host root, turn that into conditions (`_report`) and the GPU process list,
and write only what differs from what the node already says: the conditions with one
strategic-merge status patch (kubelet's conditions stay as they are), the process list
as one annotation. A step that finds nothing new sends no write.

The same class runs in the agent's process (`components.nodeagent.run`, real NVML) and in
the simulated cluster (`gpusim`, simulated NVML per node): only the `Nvml` it opens and the
host root it reads differ.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from components.api import (
    DRIVER_UPGRADE_STATE_LABEL,
    GPU_PROCESSES_ANNOTATION,
    REBOOT_RESULT_ANNOTATION,
    RESET_RESULT_ANNOTATION,
)
from components.nodeagent._host import HostRoot
from components.nodeagent._metrics import AgentMetrics
from components.nodeagent._nvml import GpuReading, Nvml, NvmlUnavailable, XidEvent
from components.nodeagent._remediation import (
    FAILED,
    SUCCEEDED,
    WAITING,
    WRITTEN,
    GpuResetter,
    ResetFailed,
    answered,
    holders,
    reboot_request,
    reset_request,
    write_sentinel,
)
from components.nodeagent._report import (
    CONDITION_TYPES,
    Observation,
    Verdict,
    critical,
    verdicts,
)
from reconciler import (
    Client,
    Object,
    PatchType,
    annotations_of,
    labels_of,
    name_of,
    namespace_of,
    uid_of,
)
from reconciler.kinds import NODE

log = logging.getLogger("components.nodeagent")

PROCESSES_ANNOTATION: Final = GPU_PROCESSES_ANNOTATION
REPLICAS_LABEL: Final = "nvidia.com/gpu.replicas"
GPU_RESOURCE_PREFIXES: Final = ("nvidia.com/gpu", "nvidia.com/mig-")
RESTART_STATES: Final = frozenset(
    {"wait-for-jobs-required", "pod-deletion-required", "drain-required", "pod-restart-required"}
)
"""Upgrade states in which the driver is about to be, or is being, replaced: the agent
closes NVML so the old kernel module can unload (a process holding the GPU open blocks
it), and opens it again once the walk moves on."""


class NodeApi(Protocol):
    """What the agent reads and writes of its own node through the API server."""

    async def read_node(self) -> Object: ...

    async def pods_on_node(self) -> list[Object]: ...

    async def patch_status(self, body: Object) -> Object: ...

    async def patch_metadata(self, body: Object) -> Object: ...


class ClusterNodeApi:
    """`NodeApi` through our engine's client (no cache: one node, read when needed)."""

    def __init__(self, client: Client, node: str) -> None:
        self.client = client
        self.node = node

    async def read_node(self) -> Object:
        return await self.client.request("GET", f"/api/v1/nodes/{self.node}")

    async def pods_on_node(self) -> list[Object]:
        doc = await self.client.request(
            "GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={self.node}"}
        )
        items: list[Object] = doc.get("items") or []
        return items

    async def patch_status(self, body: Object) -> Object:
        return await self._patch("/status", body, PatchType.STRATEGIC_MERGE)

    async def patch_metadata(self, body: Object) -> Object:
        return await self._patch("", body, PatchType.MERGE)

    async def _patch(self, subresource: str, body: Object, patch_type: PatchType) -> Object:
        """A patch of this node (or its `subresource`) as the agent's field manager."""
        return await self.client.request(
            "PATCH",
            f"/api/v1/nodes/{self.node}{subresource}",
            params={"fieldManager": "gpu-operator-node-agent"},
            body=json.dumps(body).encode(),
            content_type=patch_type,
        )


class WatchedNodeApi(ClusterNodeApi):
    """`ClusterNodeApi` that reads its node from a watch of that one node: a quiet node
    costs the API server nothing between changes (a GET per step from every agent was
    hundreds of requests a second at 5,000 nodes). Until the watch has listed, and if the
    node is not there, it asks the server."""

    def __init__(self, client: Client, node: str) -> None:
        super().__init__(client, node)
        self._informer = client.cache.informer(NODE, field_selector=f"metadata.name={node}")

    async def start(self) -> None:
        await self.client.cache.start()

    async def stop(self) -> None:
        await self.client.cache.stop()

    async def read_node(self) -> Object:
        if self._informer.has_synced:
            cached = self.client.cache.get(NODE, self.node)
            if cached is not None:
                return cached
        return await super().read_node()


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU and the pod it runs in (empty when outside any pod)."""

    gpu_uuid: str
    gpu_index: int
    pid: int
    mig_uuid: str | None
    pod_uid: str
    pod: str
    """`namespace/name`, or "" when no pod on the node has that UID."""
    unrequested: bool = False
    """The pod requests no GPU resource (it sees the GPUs through its environment): the
    scheduler and every clearing by resources miss it, yet it holds the driver open."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpu": self.gpu_uuid,
            "index": self.gpu_index,
            "pid": self.pid,
            "mig": self.mig_uuid,
            "podUID": self.pod_uid,
            "pod": self.pod,
        }
        if self.unrequested:
            out["unrequested"] = True  # only when so: the list stays as short as before
        return out


def process_list(processes: Sequence[GpuProcess]) -> str | None:
    """The annotation's value: one JSON list ordered by GPU and PID; None when empty."""
    if not processes:
        return None
    ordered = sorted(processes, key=lambda p: (p.gpu_index, p.pid))
    return json.dumps([p.to_dict() for p in ordered], separators=(",", ":"))


def _requests_gpu(pod: Object) -> bool:
    """Whether any container of `pod` asks for a GPU resource (limits or requests)."""
    spec = pod.get("spec") or {}
    return any(
        str(name).startswith(GPU_RESOURCE_PREFIXES)
        for key in ("containers", "initContainers")
        for c in spec.get(key) or []
        for part in ("limits", "requests")
        for name in (c.get("resources") or {}).get(part) or {}
    )


def advertised_resources(node: Object) -> int:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    total = 0
    for key, value in allocatable.items():
        if key.startswith(GPU_RESOURCE_PREFIXES):
            try:
                total += int(value)
            except (TypeError, ValueError):
                continue
    return total


def _replicas(labels: Mapping[str, str]) -> int:
    try:
        return max(int(labels.get(REPLICAS_LABEL, "1")), 1)
    except ValueError:
        return 1


def condition_patch(
    current: Sequence[Mapping[str, Any]], wanted: Sequence[Verdict], now: str
) -> list[dict[str, Any]]:
    """The conditions of ours that differ from the node's (`lastTransitionTime` moves only
    when the status does); empty when the node already says all of it."""
    by_type = {c.get("type"): c for c in current}
    out: list[dict[str, Any]] = []
    for verdict in wanted:
        old = by_type.get(verdict.type)
        if (
            old is not None
            and old.get("status") == verdict.status
            and old.get("reason") == verdict.reason
            and old.get("message") == verdict.message
        ):
            continue
        moved = old is None or old.get("status") != verdict.status
        since = now if moved or old is None else old.get("lastTransitionTime", now)
        out.append(
            {
                "type": verdict.type,
                "status": verdict.status,
                "reason": verdict.reason,
                "message": verdict.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": since,
            }
        )
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeAgent:
    """The agent of one node. `step` looks and publishes; `nvml_opener` opens NVML (the
    real backend, or the simulated one) and may raise `NvmlUnavailable`."""

    def __init__(
        self,
        node: str,
        *,
        nvml_opener: Callable[[], Nvml],
        host: HostRoot,
        api: NodeApi,
        metrics: AgentMetrics | None = None,
        resetter: GpuResetter | None = None,
    ) -> None:
        self.node = node
        self.resetter = resetter
        self._open = nvml_opener
        self._nvml: Nvml | None = None
        self.host = host
        self.api = api
        self.metrics = metrics
        self.xids: dict[str, list[int]] = {}
        self._pods: dict[str, tuple[str, bool]] = {}
        """Pod UID -> (`namespace/name`, whether it requests a GPU resource)."""
        self.last: Observation | None = None

    @property
    def nvml(self) -> Nvml | None:
        return self._nvml

    def release(self) -> None:
        """Close NVML (the agent opens it again on its next step that needs it)."""
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    def record_xids(self, events: Sequence[XidEvent]) -> None:
        """Keep the critical XIDs (an `XidEvent` list from `Nvml.wait_xids`)."""
        for event in events:
            if self.metrics is not None:
                self.metrics.xid(event.gpu_uuid, event.xid)
            if critical(event.xid):
                log.warning("%s: GPU %s raised XID %d", self.node, event.gpu_uuid, event.xid)
                self.xids.setdefault(event.gpu_uuid, []).append(event.xid)

    def observe(self, node: Object) -> Observation:
        """Look at NVML and the host root, given the node as the API server has it."""
        labels: Mapping[str, str] = labels_of(node)
        host = self.host.facts()
        base = Observation(
            node=self.node,
            host=host,
            advertised=advertised_resources(node),
            replicas=_replicas(labels),
        )
        if labels.get(DRIVER_UPGRADE_STATE_LABEL) in RESTART_STATES:
            self.release()
            return replace(base, released=True)
        try:
            if self._nvml is None:
                self._nvml = self._open()
            nvml = self._nvml
            self.record_xids(nvml.wait_xids(0))
            gpus = [nvml.read_gpu(i) for i in range(nvml.device_count())]
            return replace(
                base,
                driver_version=nvml.driver_version(),
                cuda_version=nvml.cuda_driver_version(),
                gpus=tuple(gpus),
                xids={uuid: tuple(x) for uuid, x in self.xids.items()},
            )
        except NvmlUnavailable as exc:
            self.release()
            return replace(base, nvml_error=str(exc))
        except Exception as exc:  # an NVML error mid-read: the driver went away
            log.debug("%s: NVML read failed", self.node, exc_info=True)
            self.release()
            return replace(base, nvml_error=f"NVML stopped answering: {exc}")

    async def step(self) -> Observation:
        """Look once and publish what changed."""
        node = await self.api.read_node()
        obs = self.observe(node)
        if await self._remediate(node, obs):
            obs = self.observe(node)
        self.last = obs
        wanted = verdicts(obs)
        current = [
            c
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") in CONDITION_TYPES
        ]
        changed = condition_patch(current, wanted, _now())
        if changed:
            await self.api.patch_status({"status": {"conditions": changed}})
            for c in changed:
                log.info(
                    "%s: %s=%s (%s) %s",
                    self.node,
                    c["type"],
                    c["status"],
                    c["reason"],
                    c["message"],
                )
        annotations = annotations_of(node)
        # NVML let go for a driver restart sees no process: the list last published stays,
        # for the walk to name what holds the GPU while it clears the node.
        processes = None if obs.released else process_list(await self._owners(obs.gpus))
        if not obs.released and annotations.get(PROCESSES_ANNOTATION) != processes:
            await self.api.patch_metadata(
                {"metadata": {"annotations": {PROCESSES_ANNOTATION: processes}}}
            )
        if self.metrics is not None:
            self.metrics.observe(obs, wanted)
        return obs

    async def _remediate(self, node: Object, obs: Observation) -> bool:
        """Answer the operator's reset and reboot requests (`_remediation`); whether a GPU
        was reset (the caller looks again)."""
        annotations: Mapping[str, str] = annotations_of(node)
        answers: dict[str, str] = {}
        reset = False
        if (reboot := reboot_request(annotations)) is not None:
            try:
                write_sentinel(self.host.root)
                answers[REBOOT_RESULT_ANNOTATION] = f"{reboot}/{WRITTEN}"
                log.info("%s: wrote the reboot sentinel for the GPU remediation", self.node)
            except OSError as exc:
                answers[REBOOT_RESULT_ANNOTATION] = f"{reboot}/{FAILED}/{exc}"
        request = reset_request(annotations)
        if (
            request is not None
            and self.resetter is not None
            and not answered(annotations, RESET_RESULT_ANNOTATION, request.id)
            and obs.nvml_error is None
        ):
            busy = holders(obs.gpus, request.gpu)
            if busy:
                answers[RESET_RESULT_ANNOTATION] = f"{request.id}/{WAITING}/{busy}"
            else:
                self.release()  # our own NVML handle must not hold the GPU either
                try:
                    await self.resetter.reset(request.gpu)
                except ResetFailed as exc:
                    answers[RESET_RESULT_ANNOTATION] = f"{request.id}/{FAILED}/{exc}"
                    log.warning("%s: GPU %d did not reset: %s", self.node, request.gpu, exc)
                else:
                    answers[RESET_RESULT_ANNOTATION] = f"{request.id}/{SUCCEEDED}"
                    log.info("%s: reset GPU %d", self.node, request.gpu)
                    for gpu in obs.gpus:
                        if gpu.index == request.gpu:
                            self.xids.pop(gpu.uuid, None)
                    reset = True
        changed = {k: v for k, v in answers.items() if annotations.get(k) != v}
        if changed:
            await self.api.patch_metadata({"metadata": {"annotations": changed}})
        return reset

    async def _owners(self, gpus: Sequence[GpuReading]) -> list[GpuProcess]:
        """Each GPU process with its pod, from its cgroup; the pods on the node are listed
        only when a UID is not known yet."""
        found: list[tuple[GpuReading, Any, str]] = []
        for gpu in gpus:
            for process in gpu.processes:
                found.append((gpu, process, self.host.pod_uid_of(process.pid) or ""))
        uids = {uid for _, _, uid in found if uid}
        if uids - set(self._pods):
            self._pods = {
                uid_of(p): (f"{namespace_of(p)}/{name_of(p)}", _requests_gpu(p))
                for p in await self.api.pods_on_node()
            }
        return [
            GpuProcess(
                gpu_uuid=gpu.uuid,
                gpu_index=gpu.index,
                pid=process.pid,
                mig_uuid=process.mig_uuid,
                pod_uid=uid,
                pod=self._pods.get(uid, ("", True))[0],
                unrequested=not self._pods.get(uid, ("", True))[1],
            )
            for gpu, process, uid in found
        ]
