"""The render snapshot (`render_snapshot`) is what the next operand refactor proves itself
with: it must reach every operand's objects and name what changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.operands import OPERANDS

from .render_snapshot import canonical, check, differences, snapshot

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def taken() -> dict[str, Any]:
    return snapshot()


def test_every_operand_renders_its_workload_in_some_case(taken: dict[str, Any]) -> None:
    kinds: dict[str, set[str]] = {op.name: set() for op in OPERANDS}
    for case in taken.values():
        for name, rendered in case.items():
            kinds[name] |= {o["kind"] for o in rendered["objects"]}
    without_pods = {"pre-requisites": "RuntimeClass", "state-operator-metrics": "ServiceMonitor"}
    for name, found in kinds.items():
        assert without_pods.get(name, "DaemonSet") in found, name


def test_a_changed_object_is_named_by_case_and_operand(taken: dict[str, Any]) -> None:
    case = next(iter(taken))
    before = {case: taken[case]}
    changed = copy.deepcopy(before)
    ds = next(
        o for o in changed[case]["state-device-plugin"]["objects"] if o["kind"] == "DaemonSet"
    )
    ds["spec"]["template"]["metadata"]["labels"]["extra"] = "x"
    assert differences(before, changed) == [f"{case} state-device-plugin: objects differ"]
    assert differences(before, before) == []


def test_check_passes_on_its_own_file_and_fails_on_another(
    tmp_path: Any, taken: dict[str, Any]
) -> None:
    few = {case: taken[case] for case in list(taken)[:2]}
    path = tmp_path / "snapshot.json"
    path.write_text(canonical(few))
    assert check(path, few) == []
    stale = copy.deepcopy(few)
    case = next(iter(stale))
    stale[case]["state-driver"]["conditions"].append(["Made", "up"])
    path.write_text(canonical(stale))
    assert check(path, few) == [f"{case} state-driver: conditions differ"]
