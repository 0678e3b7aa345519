"""The chart's `driver.upgradePolicy.maintenanceWindows` (ours): empty by default, a list of
windows reaches the ClusterPolicy as written, and a bad one is refused by its field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.offline import validate_document
from tests.unit.deploy.test_chart import one, render

pytestmark = pytest.mark.unit


def _policy_with(tmp_path: Path, windows: list[dict[str, Any]]) -> dict[str, Any]:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump({"driver": {"upgradePolicy": {"maintenanceWindows": windows}}})
    )
    return one(render("--values", values), "ClusterPolicy")


def test_windows_reach_the_policy_and_a_bad_one_is_refused_by_name(tmp_path: Path) -> None:
    default = one(render(), "ClusterPolicy")
    assert default["spec"]["driver"]["upgradePolicy"]["maintenanceWindows"] == []
    window = {"days": ["Sat", "Sun"], "start": "02:00", "end": "06:00", "timeZone": "Europe/Berlin"}
    policy = _policy_with(tmp_path, [window])
    assert policy["spec"]["driver"]["upgradePolicy"]["maintenanceWindows"] == [window]
    assert validate_document(policy) == []
    bad = _policy_with(tmp_path, [{**window, "end": "6am"}])
    [problem] = validate_document(bad)
    assert problem.path == "spec.driver.upgradePolicy.maintenanceWindows[0].end"
    assert '"HH:MM"' in problem.message
