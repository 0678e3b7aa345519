"""What the pod cache trims away and a decision needs: whether a workload pod keeps data in
an emptyDir volume (the pod informer drops `spec.volumes`), and the `DRIVER_CONFIG_DIGEST`
env of a driver pod without its annotation twin (the informer drops `env`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from components.upgrade._model import spec_digest
from components.upgrade._names import POD
from components.upgrade._pods import PodView
from reconciler import Client
from reconciler.errors import NotFound

MAX_REMEMBERED = 10_000


class PodVolumes:
    """Reads a pod's volumes from the server once (a pod's volumes never change) and
    remembers whether it has local storage."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._local_storage: dict[str, bool] = {}

    async def with_local_storage(self, pods: list[PodView]) -> list[PodView]:
        """`pods` with `local_storage` known; pods gone from the server are left out. The
        reads go out together: admission waits for them, and a node with many workload
        pods would otherwise hold the pool's reconcile for one round trip a pod."""

        def trimmed(pod: PodView) -> bool:
            return not (pod.volumes_known or not pod.active or pod.daemonset or pod.terminating)

        if len(self._local_storage) > MAX_REMEMBERED:
            self._local_storage.clear()
        unknown = [p for p in pods if trimmed(p) and p.uid not in self._local_storage]
        read = await asyncio.gather(*(self._read(p) for p in unknown))
        for pod, local in zip(unknown, read, strict=True):
            if local is not None:
                self._local_storage[pod.uid] = local
        out = []
        for pod in pods:
            if not trimmed(pod):
                out.append(pod)
                continue
            local = self._local_storage.get(pod.uid)
            if local is None:
                continue  # gone from the server
            out.append(replace(pod, local_storage=local, volumes_known=True))
        return out

    async def _read(self, pod: PodView) -> bool | None:
        """Whether `pod` has an emptyDir volume, from the server; None when it is gone."""
        try:
            live = await self.client.get_live(POD, pod.name, pod.namespace)
        except NotFound:
            return None
        return any("emptyDir" in v for v in (live.get("spec") or {}).get("volumes") or [])


class ConfigDigests:
    """Reads a driver pod's `DRIVER_CONFIG_DIGEST` env from the server once (a pod's env
    never changes), for a pod without the annotation that carries it: one created from the
    template of an operator before restart-only, which set the env alone. Asked only when
    a walk starts (admission) and while a node restarts in place, so a rollout reads each
    such pod once, and none once the pods carry the annotation."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._digests: dict[str, str | None] = {}

    async def with_digest(self, pod: PodView) -> PodView:
        if pod.config_digest is not None or not pod.uid:
            return pod
        if pod.uid not in self._digests:
            if len(self._digests) > MAX_REMEMBERED:
                self._digests.clear()
            try:
                live = await self.client.get_live(POD, pod.name, pod.namespace)
            except NotFound:
                return pod
            self._digests[pod.uid] = spec_digest(live.get("spec") or {})
        return replace(pod, config_digest=self._digests[pod.uid])
