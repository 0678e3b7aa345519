"""The nodes where an operand whose pods are not cached is not ready, named by one LIST.

The pod informer leaves those pods out (`components.kinds.PODS_NOT_CACHED_OF`): at 1,000
GPU nodes they brought two thirds of a rollout's pod events, and their DaemonSet's counts
alone say whether the operand is ready. The counts do not say where it is not. Names help an
admin when a rollout stalls, not while it moves, and one LIST of a DaemonSet's pods costs
about what its pods' events would: so a DaemonSet not ready whose counts have stood still
for `STALL_SECONDS` has its pods listed once, and the names stand until its counts change
(the DaemonSet controller recounts on every pod that turns ready or unready)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from components.controllers._constants import CONTROLLER_REVISION
from components.controllers._daemonset_pods import daemonset_uid, live_pod_facts
from components.operands.readiness import daemonset_pods_ready
from reconciler import OWNER_INDEX, Client, Object, generation_of, name_of, namespace_of

log = logging.getLogger("components.controllers.clusterpolicy")

STALL_SECONDS: Final = 5.0
"""How long a DaemonSet not ready keeps the same counts before its pods are listed."""

_COUNTS: Final = (
    "observedGeneration",
    "desiredNumberScheduled",
    "currentNumberScheduled",
    "updatedNumberScheduled",
    "numberReady",
    "numberAvailable",
    "numberUnavailable",
    "numberMisscheduled",
)


def _counts(ds: Object) -> tuple[Any, ...]:
    status = ds.get("status") or {}
    return (generation_of(ds), *(status.get(key) for key in _COUNTS))


@dataclass(slots=True)
class _Stall:
    counts: tuple[Any, ...]
    since: float
    names: list[str] | None = None


class UnreadyNames:
    """Per DaemonSet (by uid), the counts last seen, since when, and the names listed."""

    def __init__(self, client: Client, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
        self._stalls: dict[str, _Stall] = {}

    def names(self, ds: Object) -> list[str]:
        """The nodes named for the cached `ds`'s current counts (none until listed)."""
        stall = self._stalls.get(daemonset_uid(ds))
        if stall is None or stall.names is None or stall.counts != _counts(ds):
            return []
        return stall.names

    async def refresh(self, daemonsets: Iterable[Object]) -> float | None:
        """List the pods of each of `daemonsets` (cached copies) that is not ready and has
        kept its counts for `STALL_SECONDS` unnamed; the seconds until the next one will
        have, or None when none waits. DaemonSets not passed are forgotten."""
        now = self.clock()
        kept: dict[str, _Stall] = {}
        waits: list[float] = []
        for ds in daemonsets:
            ready, _ = daemonset_pods_ready(ds, None, ())
            status = ds.get("status") or {}
            if ready or int(status.get("observedGeneration") or 0) < generation_of(ds):
                continue  # nothing to name, or counts of an older spec
            uid, counts = daemonset_uid(ds), _counts(ds)
            stall = self._stalls.get(uid)
            if stall is None or stall.counts != counts:
                stall = _Stall(counts, now)
            kept[uid] = stall
            if stall.names is not None:
                continue
            left = stall.since + STALL_SECONDS - now
            if left > 0:
                waits.append(left)
                continue
            pods = await live_pod_facts(self.client, ds)
            revisions = self.client.list(
                CONTROLLER_REVISION, namespace=namespace_of(ds), index=(OWNER_INDEX, uid)
            )
            stall.names = daemonset_pods_ready(ds, pods, revisions)[1]
            log.debug("DaemonSet %s not ready on %d nodes (listed)", name_of(ds), len(stall.names))
        self._stalls = kept
        return min(waits) if waits else None
