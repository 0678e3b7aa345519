"""Maintenance windows: whether admission may start a node's walk now, and if not, when.

A pure function of the policy's `maintenanceWindows` and the wall clock (Unix seconds, so
a test moves it). Each window is wall-clock hours in its own time zone on some weekdays:
`{days: [Sat], start: "22:00", end: "04:00"}` opens Saturday 22:00 and closes Sunday
04:00 (a window ending at or before its start ends the next day; `days` are the days it
opens). The hours are local, so across a daylight saving change a window keeps its clock
times: on the change day it is an hour shorter or longer where it spans the change, and a
start that falls in the skipped hour opens when the clock jumps past it (as Python's
zoneinfo reads a local time that does not exist: with the offset before the change).

Nothing is remembered: the next opening is found by looking at the windows of the days
around `now`, so a restarted operator decides the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from components.api import WEEKDAYS, MaintenanceWindowSpec, time_zone_problem

CONDITION = "UpgradeWaitingForWindow"
WAITING_REASON = "OutsideMaintenanceWindows"
INSIDE_REASON = "InsideMaintenanceWindow"
IDLE_REASON = "NoNodeWaiting"
INVALID_REASON = "InvalidMaintenanceWindow"
RECHECK_SECONDS = 60.0
"""While outside every window, admission looks again at least this often (besides at the
next opening): a clock set forward, or a changed policy, is seen within a minute."""


@dataclass(frozen=True, slots=True)
class WindowVerdict:
    open: bool
    opens_at: float | None = None
    """Outside every window: when the next one opens (Unix seconds)."""
    closes_at: float | None = None
    """Inside a window: when it closes."""
    zone: str = "UTC"
    """The time zone of the window the times belong to (how they are shown)."""
    problem: str = ""
    """A window that cannot be read (an unknown time zone): nothing is admitted."""

    def when(self, seconds: float) -> str:
        """`seconds` as the admin wrote the window (local, with its offset) and the zone."""
        local = datetime.fromtimestamp(seconds, _zone(self.zone) or UTC)
        return f"{local.isoformat(timespec='minutes')} ({self.zone})"

    def seconds_to_open(self, now: float) -> float | None:
        return None if self.opens_at is None else max(self.opens_at - now, 0.0)


ALWAYS = WindowVerdict(open=True)


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def zone_problem(name: str) -> str:
    """Why `name` is no time zone ("" when it is one)."""
    problem = time_zone_problem(name)
    return f"maintenance window timeZone {problem}" if problem else ""


def _minutes(clock: str) -> int:
    hours, _, minutes = clock.partition(":")
    return int(hours) * 60 + int(minutes)


def _at(day: date, minutes: int, zone: ZoneInfo) -> float:
    """The Unix time of local `minutes` past midnight on `day` (24:00 is the next day)."""
    day += timedelta(days=minutes // 1440)
    minutes %= 1440
    local = datetime(day.year, day.month, day.day, minutes // 60, minutes % 60, tzinfo=zone)
    return local.timestamp()


def intervals(
    window: MaintenanceWindowSpec, zone: ZoneInfo, now: float
) -> Iterator[tuple[float, float]]:
    """The window's openings that may matter at `now`: those that open on the day before
    `now` (local) through a week after, as (opens, closes) in Unix seconds."""
    today = datetime.fromtimestamp(now, zone).date()
    days = {WEEKDAYS.index(d) for d in window.days} or set(range(7))
    start, end = _minutes(window.start), _minutes(window.end)
    for offset in range(-1, 9):
        day = today + timedelta(days=offset)
        if day.weekday() not in days:
            continue
        opens = _at(day, start, zone)
        closes = _at(day if end > start else day + timedelta(days=1), end, zone)
        if closes > opens:
            yield opens, closes


def verdict(windows: Sequence[MaintenanceWindowSpec] | None, now: float) -> WindowVerdict:
    """Whether `now` is inside one of `windows` (no windows: always)."""
    if not windows:
        return ALWAYS
    best_open: tuple[float, str] | None = None
    closes: tuple[float, str] | None = None
    for window in windows:
        zone = _zone(window.time_zone)
        if zone is None:
            return WindowVerdict(
                open=False, zone=window.time_zone, problem=zone_problem(window.time_zone)
            )
        for opens, ends in intervals(window, zone, now):
            if opens <= now < ends:
                if closes is None or ends > closes[0]:
                    closes = (ends, window.time_zone)
            elif opens > now and (best_open is None or opens < best_open[0]):
                best_open = (opens, window.time_zone)
    if closes is not None:
        return WindowVerdict(open=True, closes_at=closes[0], zone=closes[1])
    if best_open is None:  # cannot happen with a day a week: every window opens weekly
        return WindowVerdict(open=False, problem="no maintenance window ever opens")
    return WindowVerdict(open=False, opens_at=best_open[0], zone=best_open[1])
