"""A way back from a bad driver rollout: the admin's request, where the operator keeps what
it needs, and which driver image a rolled-back DaemonSet runs.

The request is an annotation on the ClusterPolicy or NVIDIADriver, `ROLLBACK_ANNOTATION`
(`failed`: the nodes that failed the rollout go back; `all`: every node of it does), not a
field: the spec belongs to whoever applies it (GitOps), and a field there is either
reverted by the next sync or, committed to Git, a rollback that never ends. An annotation
is an imperative request that a sync leaves alone, and that the operator can consume.

The operator binds the request to the spec it was made against by writing the policy's
`metadata.generation` next to it (`ROLLBACK_GENERATION`): the rollback holds while the
spec stays the same, and ends (both annotations removed) once the spec changes, whatever
version it then asks for. The failing version is therefore never re-admitted by the
operator on its own.

What the operator keeps, all in the cluster so a restarted operator carries on:

* each node's last good driver image (`LAST_GOOD_IMAGE`), written with transitions the
  walk writes anyway: a node found in sync at first sight, a node done on a driver when
  that driver becomes outdated, a node validated at the end of a walk;
* the nodes the rollback walks back (`ROLLBACK_NODE`), marked before the request is bound
  and cleared when the rollback ends.

One DaemonSet per pool is enough: its pods are `OnDelete`, so while the rollback holds the
renderer gives that DaemonSet the last good image of its nodes (`pinned_image`) and only
the pods the walk deletes take it; a node that stays on the new driver keeps its pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from reconciler import Object, annotations_of, generation_of, name_of

ROLLBACK_ANNOTATION: Final = "nvidia.com/driver-rollback"
"""On a ClusterPolicy or NVIDIADriver: `failed` or `all` (the admin's request)."""
ROLLBACK_GENERATION: Final = "nvidia.com/driver-rollback.generation"
"""Written by the operator: the policy's generation the request holds for."""
ROLLBACK_SINCE: Final = "nvidia.com/driver-rollback.since"
"""Written by the operator with `ROLLBACK_GENERATION`: when the rollback began (RFC 3339)."""
LAST_GOOD_IMAGE: Final = "nvidia.com/gpu-driver-upgrade.last-good-image"
"""On a node: the driver image it last ran in sync and healthy."""
ROLLBACK_NODE: Final = "nvidia.com/gpu-driver-upgrade.rollback"
"""On a node: `true` while the rollback walks it back to its last good driver."""


class RollbackMode(StrEnum):
    FAILED = "failed"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class RollbackRequest:
    """A policy's rollback request as its annotations say."""

    mode: RollbackMode | None = None
    """None: no request, or one that is not valid (`problem`)."""
    problem: str = ""
    stamp: str | None = None
    """`ROLLBACK_GENERATION` as it is (None when absent)."""
    generation: str = ""
    since: str = ""
    """`ROLLBACK_SINCE` as it is."""

    @property
    def active(self) -> bool:
        """A valid request bound to the policy's current spec."""
        return self.mode is not None and self.stamp == self.generation

    @property
    def to_stamp(self) -> bool:
        """A valid request the operator has not bound to a spec yet."""
        return self.mode is not None and self.stamp is None

    @property
    def ended(self) -> bool:
        """Bound to a spec that has since changed (or withdrawn): to be cleared."""
        return self.stamp is not None and not self.active


def rollback_request(policy: Object) -> RollbackRequest:
    annotations = annotations_of(policy)
    raw = annotations.get(ROLLBACK_ANNOTATION)
    stamp = annotations.get(ROLLBACK_GENERATION)
    generation = str(generation_of(policy) or "")
    since = annotations.get(ROLLBACK_SINCE, "")
    if raw is None:
        return RollbackRequest(stamp=stamp, generation=generation, since=since)
    try:
        mode = RollbackMode(raw.strip())
    except ValueError:
        allowed = ", ".join(m.value for m in RollbackMode)
        return RollbackRequest(
            problem=f"annotation {ROLLBACK_ANNOTATION}: {raw!r} is not one of: {allowed}",
            stamp=stamp,
            generation=generation,
            since=since,
        )
    return RollbackRequest(mode=mode, stamp=stamp, generation=generation, since=since)


def rollback_images(policy: Object, nodes: Iterable[Object]) -> dict[str, str]:
    """Each node's last good driver image while the policy's rollback holds (empty when
    it does not): what the renderer pins the driver DaemonSets back to."""
    if not rollback_request(policy).active:
        return {}
    found: dict[str, str] = {}
    for node in nodes:
        image = annotations_of(node).get(LAST_GOOD_IMAGE)
        if image:
            found[name_of(node)] = image
    return found


def pinned_image(image: str, nodes: Iterable[str], last_good: Mapping[str, str]) -> str:
    """The image one driver DaemonSet runs: `image` (the spec's), or while a rollback holds
    the last good image most of its nodes had before it (ties: by name), so the pods the
    rollback deletes come back on it. Nodes whose last good image is the spec's own (they
    were walked to it and stayed healthy) do not vote."""
    votes = Counter(last_good[n] for n in nodes if last_good.get(n) and last_good[n] != image)
    if not votes:
        return image
    return min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
