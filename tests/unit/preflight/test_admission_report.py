"""What the admission seam says on the policy: the condition once per change, the Event
once per finding, nothing again after an operator restart, and a clear when it is over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.api import DriverUpgradePolicySpec
from components.preflight import Check, Verdict, gate
from components.upgrade._preflight import AdmissionPreflight
from components.upgrade._reader import Pool

pytestmark = pytest.mark.unit

RHEL = "127.0.0.1:5000/nvidia/driver:590.48.01-rhel9"


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.applied: list[dict[str, Any]] = []

    async def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append(f"{type_} {reason}: {message}")

    async def apply_status(self, body: dict[str, Any], *, field_manager: str) -> None:
        assert field_manager == "gpu-operator-preflight"
        self.applied.append(body["status"]["conditions"][0])


def _pool(conditions: list[dict[str, Any]]) -> Pool:
    obj = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cp", "resourceVersion": "1"},
        "status": {"state": "ready", "conditions": conditions},
    }
    return Pool("ClusterPolicy", "cp", obj, DriverUpgradePolicySpec(), True)


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_condition_and_event_once_per_change_and_none_after_a_restart() -> None:
    rec = Recorder()
    seam = AdmissionPreflight(None, rec, rec)  # type: ignore[arg-type]
    missing = gate({"r1": RHEL}, {RHEL: Check(RHEL, Verdict.MISSING)}, "Warn")
    seam._report(_pool([]), missing)
    await _settle()
    assert [c["reason"] for c in rec.applied] == ["ImageMissing"]
    assert len(rec.events) == 1 and RHEL in rec.events[0] and "r1" in rec.events[0]
    stored = [{k: v for k, v in rec.applied[0].items()}]
    seam._report(_pool(stored), missing)  # the same finding, now stored: nothing new
    await _settle()
    assert (len(rec.applied), len(rec.events)) == (1, 1)

    restarted = Recorder()
    again = AdmissionPreflight(None, restarted, restarted)  # type: ignore[arg-type]
    again._report(_pool(stored), missing)
    await _settle()
    assert (restarted.applied, restarted.events) == ([], [])

    again._report(_pool(stored), gate({"r1": RHEL}, {RHEL: Check(RHEL, Verdict.PRESENT)}, "Warn"))
    await _settle()
    assert [(c["status"], c["reason"]) for c in restarted.applied] == [("False", "ImagesPresent")]
    assert restarted.events == []


async def test_no_condition_while_every_image_was_always_there() -> None:
    rec = Recorder()
    seam = AdmissionPreflight(None, rec, rec)  # type: ignore[arg-type]
    seam._report(_pool([]), gate({"r1": RHEL}, {RHEL: Check(RHEL, Verdict.PRESENT)}, "Warn"))
    await _settle()
    assert (rec.applied, rec.events) == ([], [])
