"""What the client's writes come back with: the outcome of an apply or an eviction, and
the hash that lets an apply be skipped. Callers branch on these, so they are values, not
exceptions."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler._objects import Object


class Eviction(enum.Enum):
    EVICTED = "evicted"
    BLOCKED = "blocked"
    """Refused, typically by a PodDisruptionBudget: try again later."""
    NOT_FOUND = "not-found"
    """The pod is already gone, which is what we wanted."""


@dataclass(frozen=True)
class EvictionResult:
    outcome: Eviction
    message: str = ""
    retry_after: float | None = None

    @property
    def evicted(self) -> bool:
        return self.outcome is not Eviction.BLOCKED


class Operation(enum.Enum):
    """What an apply did, like controller-runtime's OperationResult."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    """Nothing was sent (the desired hash was already there) or the server changed nothing."""


@dataclass(frozen=True)
class Applied:
    """The object after an apply, and what the apply did to it."""

    object: Object
    operation: Operation

    @property
    def changed(self) -> bool:
        return self.operation is not Operation.UNCHANGED


def desired_hash(obj: Mapping[str, Any]) -> str:
    """A stable hash of what we ask for (key order does not matter)."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]
