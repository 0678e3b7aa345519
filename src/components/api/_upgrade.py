"""The driver upgrade policy (`driver.upgradePolicy`, `NVIDIADriver.spec.upgradePolicy`).

Field names, defaults and limits are the reference's (k8s-operator-libs
`DriverUpgradePolicySpec`). Defaults apply both in the CRD (the API server fills them in
when the section is present) and in Python (when it is absent).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from components.api._base import ApiModel, Cel, IntOrString, crd_default

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_percent(value: Any) -> bool:
    if _is_int(value):
        return bool(value >= 0)
    return isinstance(value, str) and bool(_PERCENT.match(value))


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
    Cel.matching(
        "^(([0-9]+)|(100|[1-9]?[0-9])%)$",
        'must be a count (a string of digits, like "1") or a percentage, like 25%',
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


Weekday = Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
WEEKDAYS: tuple[Weekday, ...] = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_CLOCK_OR_MIDNIGHT = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
_ZONE = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"


class MaintenanceWindowSpec(ApiModel):
    """Ours (the reference has no such field): a time, on some days of the week, when nodes
    may be admitted to a driver walk. Wall-clock times in `timeZone`: a window keeps its
    local hours across daylight saving changes (on the change day it is an hour shorter or
    longer when it spans the change)."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (
        Cel(
            rule="self.start != self.end",
            message=(
                "start and end are the same time: a window needs a length (for a whole "
                'day write start: "00:00", end: "24:00")'
            ),
            check=lambda v: isinstance(v, dict) and v.get("start") != v.get("end"),
            field_path=".end",
            reason="FieldValueInvalid",
        ),
    )

    days: list[Weekday] = Field(
        default_factory=list,
        max_length=7,
        description=(
            "Days the window opens on (Mon, Tue, Wed, Thu, Fri, Sat, Sun), in timeZone; "
            "empty: every day. A window that ends past midnight belongs to the day it opens."
        ),
    )
    start: Annotated[
        str,
        Cel.matching(_CLOCK, 'must be a 24-hour time "HH:MM", like "02:00"'),
    ] = Field(max_length=5, description='When the window opens, 24-hour "HH:MM" in timeZone.')
    end: Annotated[
        str,
        Cel.matching(
            _CLOCK_OR_MIDNIGHT,
            'must be a 24-hour time "HH:MM", like "06:00" (or "24:00" for midnight)',
        ),
    ] = Field(
        max_length=5,
        description=(
            'When the window closes, "HH:MM" (or "24:00"); earlier than start: the next day.'
        ),
    )
    time_zone: Annotated[
        str,
        Cel.matching(_ZONE, "must be an IANA time zone name, like Europe/Berlin or UTC"),
    ] = Field(
        default="UTC",
        max_length=64,
        description="IANA time zone of start, end and days (Europe/Berlin); default UTC.",
    )


def time_zone_problem(name: str) -> str:
    """Why `name` is not a time zone this machine knows ("" when it is one). The CRD can
    only check its shape; `validate` and the walk ask zoneinfo."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not a known time zone: use an IANA name, like Europe/Berlin or UTC"
    return ""


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
    maintenance_windows: list[MaintenanceWindowSpec] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Ours: times when nodes may be admitted to a driver walk; outside every window "
            "none is (a node already in the walk finishes). Unset or empty: any time."
        ),
    )


class NVIDIADriverUpgradePolicySpec(DriverUpgradePolicySpec):
    """How driver upgrades roll through the nodes of this NVIDIADriver's pool."""

    auto_upgrade: bool = crd_default(
        True, description="Upgrade drivers automatically; when false the rest is ignored."
    )
