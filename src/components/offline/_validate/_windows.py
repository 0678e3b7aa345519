"""Maintenance windows whose time zone this machine does not know: the CRD can only check
a zone name's shape, so `validate` asks zoneinfo (the operator would hold every node of the
pool, and say why, until the name is fixed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from components.api import time_zone_problem
from components.offline._validate._problems import Problem


def _policies(document: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return
    if document.get("kind") == "NVIDIADriver":
        yield "spec.upgradePolicy", spec.get("upgradePolicy")
    driver = spec.get("driver")
    if isinstance(driver, dict):
        yield "spec.driver.upgradePolicy", driver.get("upgradePolicy")


def window_problems(document: dict[str, Any]) -> Iterator[Problem]:
    for path, policy in _policies(document):
        windows = policy.get("maintenanceWindows") if isinstance(policy, dict) else None
        for i, window in enumerate(windows if isinstance(windows, list) else []):
            zone = window.get("timeZone") if isinstance(window, dict) else None
            if isinstance(zone, str) and (problem := time_zone_problem(zone)):
                yield Problem(f"{path}.maintenanceWindows[{i}].timeZone", problem)
