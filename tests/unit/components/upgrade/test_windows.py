"""Maintenance windows as admission decides them: on the injected clock, in the window's
own time zone, across midnight and across daylight saving changes; and the condition
the policy's status carries."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pydantic
import pytest

from components.api import DriverUpgradePolicySpec, MaintenanceWindowSpec
from components.offline import validate_document
from components.upgrade._window_gate import describe, node_wait
from components.upgrade._windows import verdict, zone_problem

pytestmark = pytest.mark.unit

BERLIN = ZoneInfo("Europe/Berlin")


def window(**kw: Any) -> MaintenanceWindowSpec:
    return MaintenanceWindowSpec.from_dict(kw)


def at(text: str, zone: ZoneInfo = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def local(seconds: float | None, zone: ZoneInfo = BERLIN) -> str:
    assert seconds is not None
    return datetime.fromtimestamp(seconds, zone).strftime("%a %Y-%m-%d %H:%M")


WEEKEND = window(days=["Sat", "Sun"], start="02:00", end="06:00", timeZone="Europe/Berlin")


def test_no_windows_admit_at_any_time() -> None:
    assert verdict(None, at("2026-12-09T12:00")).open
    assert verdict([], at("2026-12-09T12:00")).open


def test_inside_a_window_admission_is_open_until_it_closes() -> None:
    v = verdict([WEEKEND], at("2026-12-12T03:00"))  # Saturday
    assert v.open and local(v.closes_at) == "Sat 2026-12-12 06:00"
    assert v.when(v.closes_at or 0) == "2026-12-12T06:00+01:00 (Europe/Berlin)"


def test_outside_every_window_it_says_when_the_next_opens() -> None:
    v = verdict([WEEKEND], at("2026-12-09T12:00"))  # a Wednesday
    assert not v.open and local(v.opens_at) == "Sat 2026-12-12 02:00"
    # The end is not inside: Saturday 06:00 waits for Sunday 02:00.
    v = verdict([WEEKEND], at("2026-12-12T06:00"))
    assert not v.open and local(v.opens_at) == "Sun 2026-12-13 02:00"
    # Sunday after the window: next Saturday.
    v = verdict([WEEKEND], at("2026-12-13T07:00"))
    assert local(v.opens_at) == "Sat 2026-12-19 02:00"


def test_the_time_zone_is_the_windows_own() -> None:
    # 02:30 in Berlin is 01:30 UTC in winter: a UTC clock reading 02:30 is past it.
    assert verdict([WEEKEND], at("2026-12-12T01:30", ZoneInfo("UTC"))).open
    assert not verdict([WEEKEND], at("2026-12-12T05:30", ZoneInfo("UTC"))).open
    utc = window(start="02:00", end="06:00")  # no days: every day; no zone: UTC
    assert verdict([utc], at("2026-12-09T05:59", ZoneInfo("UTC"))).open


def test_a_window_past_midnight_belongs_to_the_day_it_opens() -> None:
    night = window(days=["Fri"], start="22:00", end="04:00", timeZone="Europe/Berlin")
    assert verdict([night], at("2026-12-11T23:00")).open  # Friday night
    v = verdict([night], at("2026-12-12T03:59"))  # Saturday early: still Friday's window
    assert v.open and local(v.closes_at) == "Sat 2026-12-12 04:00"
    assert not verdict([night], at("2026-12-12T22:30")).open  # Saturday night: not a Friday
    assert not verdict([night], at("2026-12-11T03:00")).open  # Friday early: Thursday's
    midnight = window(days=["Sun"], start="20:00", end="24:00", timeZone="Europe/Berlin")
    v = verdict([midnight], at("2026-12-13T23:59"))
    assert v.open and local(v.closes_at) == "Mon 2026-12-14 00:00"


def test_across_daylight_saving_the_window_keeps_its_clock_hours() -> None:
    # Berlin springs forward on Sunday 2026-03-29 at 02:00 (to 03:00), falls back on Sunday
    # 2026-10-25 at 03:00 (to 02:00).
    sunday = window(days=["Sun"], start="01:00", end="05:00", timeZone="Europe/Berlin")
    spring = verdict([sunday], at("2026-03-28T12:00"))
    assert local(spring.opens_at) == "Sun 2026-03-29 01:00"
    inside = verdict([sunday], at("2026-03-29T04:30"))  # CEST now: still before 05:00
    assert inside.open and local(inside.closes_at) == "Sun 2026-03-29 05:00"
    assert (inside.closes_at or 0) - (spring.opens_at or 0) == 3 * 3600  # an hour shorter
    autumn = verdict([sunday], at("2026-10-25T04:30"))
    assert autumn.open and local(autumn.closes_at) == "Sun 2026-10-25 05:00"
    opened = verdict([sunday], at("2026-10-24T12:00")).opens_at or 0
    assert (autumn.closes_at or 0) - opened == 5 * 3600  # an hour longer
    # A start in the skipped hour opens when the clock jumps past it.
    skipped = window(days=["Sun"], start="02:30", end="06:00", timeZone="Europe/Berlin")
    v = verdict([skipped], at("2026-03-28T12:00"))
    assert local(v.opens_at) == "Sun 2026-03-29 03:30"
    assert verdict([skipped], at("2026-03-29T03:45")).open


def test_several_windows_the_earliest_opening_counts() -> None:
    weekday = window(days=["Tue"], start="12:00", end="13:00", timeZone="America/New_York")
    v = verdict([WEEKEND, weekday], at("2026-12-09T12:00"))  # Wednesday
    assert local(v.opens_at) == "Sat 2026-12-12 02:00"
    v = verdict([WEEKEND, weekday], at("2026-12-14T12:00"))  # Monday
    assert local(v.opens_at, ZoneInfo("America/New_York")) == "Tue 2026-12-15 12:00"
    assert v.zone == "America/New_York"


def test_an_unknown_time_zone_holds_every_node_and_says_the_fix() -> None:
    bad = window(start="02:00", end="06:00", timeZone="Europe/Berlinn")
    v = verdict([bad], at("2026-12-09T12:00"))
    assert not v.open and "Europe/Berlinn" in v.problem and "IANA" in v.problem
    assert describe(v, 0)[:2] == ("True", "InvalidMaintenanceWindow")
    assert zone_problem("Europe/Berlin") == ""


def test_the_condition_says_when_nodes_wait_and_when_the_window_opens() -> None:
    v = verdict([WEEKEND], at("2026-12-09T12:00"))
    status, reason, message = describe(v, 3)
    assert (status, reason) == ("True", "OutsideMaintenanceWindows")
    assert "3 nodes wait" in message and "2026-12-12T02:00+01:00 (Europe/Berlin)" in message
    assert describe(v, 0)[:2] == ("False", "NoNodeWaiting")
    assert "2026-12-12T02:00+01:00" in node_wait(v)
    inside = describe(verdict([WEEKEND], at("2026-12-12T03:00")), 3)
    assert inside[:2] == ("False", "InsideMaintenanceWindow")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"start": "2:00", "end": "06:00"}, "start"),
        ({"start": "02:00", "end": "25:00"}, "end"),
        ({"start": "02:00", "end": "02:00"}, "a window needs a length"),
        ({"days": ["Saturday"], "start": "02:00", "end": "06:00"}, "days"),
        ({"start": "02:00", "end": "06:00", "timeZone": "Berlin time"}, "timeZone"),
        ({"end": "06:00"}, "start"),
    ],
)
def test_bad_windows_are_refused_by_field(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        DriverUpgradePolicySpec.from_dict({"maintenanceWindows": [fields]})
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("window", "path", "words"),
    [
        ({"start": "2:00", "end": "06:00"}, "start", 'must be a 24-hour time "HH:MM"'),
        ({"start": "22:00", "end": "22:00"}, "end", 'start: "00:00", end: "24:00"'),
        ({"days": ["sat"], "start": "02:00", "end": "06:00"}, "days[0]", '"Sat"'),
        ({"start": "02:00", "end": "06:00", "timeZone": "Europe/Berlinn"}, "timeZone", "IANA"),
    ],
)
def test_validate_refuses_a_bad_window_by_its_field_with_the_fix(
    window: dict[str, Any], path: str, words: str
) -> None:
    policy = {"maintenanceWindows": [window]}
    documents = [
        ("ClusterPolicy", {"driver": {"upgradePolicy": policy}}, "spec.driver.upgradePolicy"),
        ("NVIDIADriver", {"driverType": "gpu", "upgradePolicy": policy}, "spec.upgradePolicy"),
    ]
    for kind, spec, where in documents:
        document = {
            "apiVersion": "nvidia.com/v1" if kind == "ClusterPolicy" else "nvidia.com/v1alpha1",
            "kind": kind,
            "metadata": {"name": "p"},
            "spec": spec,
        }
        [problem] = validate_document(document)
        assert problem.path == f"{where}.maintenanceWindows[0].{path}", problem
        assert words in problem.message, problem
    good = {"days": ["Sat", "Sun"], "start": "02:00", "end": "06:00", "timeZone": "Europe/Berlin"}
    spec = {"driver": {"upgradePolicy": {"maintenanceWindows": [good]}}}
    ok = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"}}
    assert validate_document({**ok, "spec": spec}) == []
