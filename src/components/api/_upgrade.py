"""The driver upgrade policy (`driver.upgradePolicy`, `NVIDIADriver.spec.upgradePolicy`).

Field names, defaults and limits are the reference's (k8s-operator-libs
`DriverUpgradePolicySpec`). Defaults apply both in the CRD (the API server fills them in
when the section is present) and in Python (when it is absent).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, IntOrString, crd_default

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")
_COUNT_OR_PERCENT = re.compile(r"^(([0-9]+)|(100|[1-9]?[0-9])%)$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_percent(value: Any) -> bool:
    if _is_int(value):
        return bool(value >= 0)
    return isinstance(value, str) and bool(_PERCENT.match(value))


def _count_or_percent(value: Any) -> bool:
    return isinstance(value, str) and bool(_COUNT_OR_PERCENT.match(value))


#: A node count or a percentage of nodes: `5` or `"25%"` (not `"5"`, not `"abc"`).
IntOrPercent = Annotated[
    int | str,
    IntOrString(),
    Cel(
        rule=(
            "type(self) == int ? self >= 0 : "
            "type(self) == string && self.matches('^(100|[1-9]?[0-9])%$')"
        ),
        message="must be a non-negative integer or a percentage from 0% to 100%, like 25%",
        check=_int_or_percent,
    ),
]

#: A node count or a percentage, as a string (`"1"`, `"25%"`): the reference's
#: `daemonsets.rollingUpdate.maxUnavailable` is a string field, so an integer is refused.
CountString = Annotated[
    str,
    Cel(
        rule="self.matches('^(([0-9]+)|(100|[1-9]?[0-9])%)$')",
        message='must be a count (a string of digits, like "1") or a percentage, like 25%',
        check=_count_or_percent,
    ),
]


def scaled_value(value: int | str, total: int) -> int:
    """An int-or-percent resolved against `total`, rounding up (as the reference does)."""
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


class WaitForCompletionSpec(ApiModel):
    """Wait for matching pods (jobs) to finish before upgrading a node's driver."""

    pod_selector: str = Field(
        default="", description="Label selector of the pods to wait for; empty waits for none."
    )
    timeout_seconds: int = crd_default(
        0, ge=0, description="How long to wait before going on anyway; 0 waits forever."
    )


class PodDeletionSpec(ApiModel):
    """Deletion of the pods that use GPUs before a node's driver is upgraded."""

    force: bool = crd_default(False, description="Delete pods not managed by a controller too.")
    timeout_seconds: int = crd_default(
        300, ge=0, description="How long to wait for pod deletion; 0 waits forever."
    )
    delete_empty_dir: bool = crd_default(
        False, description="Delete pods that use emptyDir volumes (their data is lost)."
    )


class DrainSpec(ApiModel):
    """Draining the node before its driver is upgraded."""

    enable: bool = crd_default(False, description="Drain the node during the upgrade.")
    force: bool = crd_default(False, description="Drain pods not managed by a controller too.")
    pod_selector: str = Field(
        default="", description="Label selector of the pods to drain; empty drains all."
    )
    timeout_seconds: int = crd_default(
        300, ge=0, description="How long to wait for the drain; 0 waits forever."
    )
    delete_empty_dir: bool = crd_default(
        False, description="Drain pods that use emptyDir volumes (their data is lost)."
    )


PreflightMode = Literal["Strict", "Warn", "Off"]


class PreflightSpec(ApiModel):
    """Ours (the reference has no such field): before a node's driver walk, ask the image's
    registry whether the image the node will pull exists."""

    mode: PreflightMode = crd_default(
        "Warn",
        description=(
            "Warn: a missing image keeps its nodes out of the walk, an unreachable registry "
            "is reported and the walk goes on; Strict: an unreachable registry blocks too; "
            "Off: no check."
        ),
    )


def _one_way_to_pick(value: Any) -> bool:
    return not (isinstance(value, dict) and value.get("nodes") and value.get("selector"))


class CanarySpec(ApiModel):
    """Ours (the reference has no such field): a few nodes walk a new driver first, and the
    rest wait until those have stayed validated and Ready for a while, so a driver that
    installs but misbehaves stops on the canaries instead of spreading."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (
        Cel(
            rule=(
                "!(has(self.nodes) && self.nodes > 0 && has(self.selector) && self.selector != '')"
            ),
            message="pick the canary nodes one way: nodes (a count) or selector, not both",
            check=_one_way_to_pick,
            field_path=".selector",
            reason="FieldValueForbidden",
        ),
    )

    nodes: int = Field(
        default=0,
        ge=0,
        description="How many nodes are canaries (the first ones by name); 0: none.",
    )
    selector: str = Field(
        default="",
        description="Label selector of the canary nodes (`kubectl get nodes -l` syntax).",
    )
    soak_seconds: int = Field(
        default=300,
        ge=0,
        description=(
            "How long every canary must stay upgraded, validated and Ready before any other "
            "node is admitted."
        ),
    )


def _cap_not_below_start(value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    start, cap = value.get("initialSeconds", 60), value.get("maxSeconds", 3600)
    return not (_is_int(start) and _is_int(cap) and cap < start)


class RetryBackoffSpec(ApiModel):
    """Ours (the reference has no such field, and never retries a failed node by itself):
    how long an `upgrade-failed` node waits before the walk tries its failed step again,
    doubling with each retry up to a bound."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (
        Cel(
            rule=(
                "!has(self.maxSeconds) || "
                "self.maxSeconds >= (has(self.initialSeconds) ? self.initialSeconds : 60)"
            ),
            message="maxSeconds must not be less than initialSeconds",
            check=_cap_not_below_start,
            field_path=".maxSeconds",
            reason="FieldValueInvalid",
        ),
    )

    initial_seconds: int = Field(
        default=60,
        ge=0,
        description="Seconds before the first retry; 0: retry only when what blocked is gone.",
    )
    max_seconds: int = Field(
        default=3600, ge=1, description="The longest wait between two retries, in seconds."
    )


class DriverUpgradePolicySpec(ApiModel):
    """How driver upgrades roll through the nodes."""

    auto_upgrade: bool = crd_default(
        False, description="Upgrade drivers automatically; when false the rest is ignored."
    )
    max_parallel_upgrades: int = crd_default(
        1, ge=0, description="How many nodes may upgrade at once; 0 means no limit."
    )
    max_unavailable: IntOrPercent = crd_default(
        "25%",
        description=(
            "How many driver nodes may be unavailable during the upgrade: a count or a "
            "percentage of the nodes (rounded up)."
        ),
    )
    pod_deletion: PodDeletionSpec = Field(default_factory=PodDeletionSpec)
    wait_for_completion: WaitForCompletionSpec = Field(default_factory=WaitForCompletionSpec)
    drain: DrainSpec = Field(default_factory=DrainSpec)
    preflight: PreflightSpec = Field(
        default_factory=PreflightSpec,
        description="Ours: check that each node's driver image exists before its walk.",
    )
    failure_budget: IntOrPercent | None = Field(
        default=None,
        description=(
            "Ours: how many nodes of the pool (a count, or a percentage rounded up) may fail "
            "the upgrade before no further node is admitted; unset: no budget."
        ),
    )
    canary: CanarySpec | None = Field(
        default=None,
        description="Ours: nodes walked first and soaked before the rest of the pool.",
    )
    retry_backoff: RetryBackoffSpec | None = Field(
        default=None,
        description=(
            "Ours: the wait before a failed node is retried, doubling each time up to "
            "maxSeconds; unset: 60s doubling up to an hour."
        ),
    )


class NVIDIADriverUpgradePolicySpec(DriverUpgradePolicySpec):
    """How driver upgrades roll through the nodes of this NVIDIADriver's pool."""

    auto_upgrade: bool = crd_default(
        True, description="Upgrade drivers automatically; when false the rest is ignored."
    )
