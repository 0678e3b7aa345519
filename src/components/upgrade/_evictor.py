"""Clearing a node of pods through the Eviction API, as the MIG-change clearing and the
GPU remediation do it: the node's pods from the cache, whether each has local storage read
from the server once (the cache drops `spec.volumes`), every eviction asked at once, and
the PodDisruptionBudgets read when one was refused (to name the one that refused it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from components.upgrade._model import PdbView, pdb_view
from components.upgrade._names import POD
from components.upgrade._pods import PodView, pod_view
from components.upgrade._reader import POD_NODE_INDEX
from components.upgrade._volumes import PodVolumes
from reconciler import Client, EvictionResult
from reconciler.kinds import PDB


class PodEvictor:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._volumes = PodVolumes(client)

    def pods_on(self, node: str) -> list[PodView]:
        """The cached pods bound to `node`."""
        return [pod_view(p) for p in self.client.list(POD, index=(POD_NODE_INDEX, node))]

    async def readable(self, pods: list[PodView], *, delete_empty_dir: bool) -> list[PodView]:
        """`pods` as a decision on them needs them: unless emptyDir data may go anyway,
        with their local storage known (pods gone from the server left out)."""
        return pods if delete_empty_dir else await self._volumes.with_local_storage(pods)

    async def evict(self, pods: Sequence[PodView]) -> list[tuple[PodView, EvictionResult]]:
        """Each pod with the server's answer, all asked at once."""
        answers = await asyncio.gather(*(self.client.evict(p.name, p.namespace) for p in pods))
        return list(zip(pods, answers, strict=True))

    def budgets(self) -> list[PdbView]:
        return [pdb_view(b) for b in self.client.list(PDB)]
