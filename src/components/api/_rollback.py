"""A way back from a bad driver rollout: the admin's request, where the operator keeps what
it needs, and which driver image a rolled-back DaemonSet runs.

The request is an annotation on the ClusterPolicy or NVIDIADriver, `ROLLBACK_ANNOTATION`
(`failed`: the nodes that failed the rollout go back; `all`: every node it walked does), not
a field: the spec belongs to whoever applies it (GitOps), and a field there is either
reverted by the next sync or, committed to Git, a rollback that never ends. An annotation
is an imperative request that a sync leaves alone.

The operator never writes a policy but its status, so it binds the request to the spec it
was made against there: the `RollingBack` condition of `status.upgrade` carries the
policy's generation (`observedGeneration`). The rollback holds while the spec keeps that
generation and ends once it changes (`RollbackEnded`, which stays while the annotation does:
the request is spent; removing the annotation and setting it again asks anew). The failing
version is therefore never re-admitted by the operator on its own.

What the operator keeps, all in the cluster so a restarted operator carries on:

* each node's last good driver image (`LAST_GOOD_IMAGE`), written with transitions the
  walk writes anyway: a node found in sync at first sight, a node done on a driver when
  that driver becomes outdated, a node validated at the end of a walk;
* the nodes the rollback walks back (`ROLLBACK_NODE`: `true`, then `back` once validated
  on their last good driver), marked before the request is bound, cleared when it ends;
* the binding, in the policy's status.

One DaemonSet per pool is enough: its pods are `OnDelete`, so while the rollback holds the
renderer gives that DaemonSet the last good image of its nodes (`pinned_image`) and only
the pods the walk deletes take it; a node that stays on the new driver keeps its pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, cast

from reconciler import Object, annotations_of, generation_of, name_of

ROLLBACK_ANNOTATION: Final = "nvidia.com/driver-rollback"
"""On a ClusterPolicy or NVIDIADriver: `failed` or `all` (the admin's request)."""
ROLLBACK_CONDITION: Final = "RollingBack"
"""The `status.upgrade` condition that says how the rollback goes and binds it to a spec."""
BOUND_REASONS: Final = frozenset({"RollingBack", "RolledBack"})
ROLLBACK_ENDED: Final = "RollbackEnded"
LAST_GOOD_IMAGE: Final = "nvidia.com/gpu-driver-upgrade.last-good-image"
"""On a node: the driver image it last ran in sync and healthy."""
ROLLBACK_NODE: Final = "nvidia.com/gpu-driver-upgrade.rollback"
"""On a node: `true` while the rollback walks it back to its last good driver, `back` once
it is validated on it."""


class RollbackMode(StrEnum):
    FAILED = "failed"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class RollbackRequest:
    """A policy's rollback request as its annotation and its status say."""

    mode: RollbackMode | None = None
    """None: no request, or one that is not valid (`problem`)."""
    problem: str = ""
    generation: str = ""
    bound: str | None = None
    """The generation a `RollingBack` condition binds the rollback to (None: not bound)."""
    spent: bool = False
    """The status says `RollbackEnded`: this request has had its rollback."""

    @property
    def active(self) -> bool:
        """A valid request bound to the policy's current spec."""
        return self.mode is not None and self.bound == self.generation

    @property
    def to_bind(self) -> bool:
        """A valid request the operator has not bound to a spec yet."""
        return self.mode is not None and self.bound is None and not self.spent

    @property
    def ended(self) -> bool:
        """Bound to a spec that has since changed (or withdrawn): to be cleared."""
        return self.bound is not None and not self.active


def rollback_condition(policy: Object) -> Mapping[str, Any] | None:
    upgrade = (policy.get("status") or {}).get("upgrade") or {}
    for c in upgrade.get("conditions") or []:
        if c.get("type") == ROLLBACK_CONDITION:
            return cast(Mapping[str, Any], c)
    return None


def rollback_request(
    policy: Object, condition: Mapping[str, Any] | bool | None = True
) -> RollbackRequest:
    """The request of `policy`, bound by its stored `RollingBack` condition (or by
    `condition` where given: the one the operator wrote last, its cache may lag)."""
    found = rollback_condition(policy) if condition is True else condition
    c = found if isinstance(found, Mapping) else None
    reason = str(c.get("reason") or "") if c is not None else ""
    observed = c.get("observedGeneration") if c is not None else None
    bound = str(observed) if reason in BOUND_REASONS and observed is not None else None
    spent = reason == ROLLBACK_ENDED
    raw = annotations_of(policy).get(ROLLBACK_ANNOTATION)
    generation = str(generation_of(policy) or "")
    if raw is None:
        return RollbackRequest(generation=generation, bound=bound, spent=spent)
    try:
        mode = RollbackMode(raw.strip())
    except ValueError:
        allowed = ", ".join(m.value for m in RollbackMode)
        return RollbackRequest(
            problem=f"annotation {ROLLBACK_ANNOTATION}: {raw!r} is not one of: {allowed}",
            generation=generation,
            bound=bound,
            spent=spent,
        )
    return RollbackRequest(mode=mode, generation=generation, bound=bound, spent=spent)


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
