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


async def test_nodes_joining_a_finding_are_not_news() -> None:
    """An autoscaler adding nodes that need an image already found missing (or unchecked)
    gets no Event, log line or status write per node: the finding is the same."""
    rec = Recorder()
    seam = AdmissionPreflight(None, rec, rec)  # type: ignore[arg-type]
    missing = {RHEL: Check(RHEL, Verdict.MISSING)}
    seam._report(_pool([]), gate({"r1": RHEL}, missing, "Warn"))
    await _settle()
    seam._report(_pool(list(rec.applied)), gate({"r1": RHEL, "r2": RHEL}, missing, "Warn"))
    await _settle()
    # The held nodes are named, so the condition follows them; the Event was said once.
    assert [c["message"].count("r2") for c in rec.applied] == [0, 1]
    assert len(rec.events) == 1

    unchecked = {RHEL: Check(RHEL, Verdict.UNREACHABLE, "no route")}
    quiet = Recorder()
    seam = AdmissionPreflight(None, quiet, quiet)  # type: ignore[arg-type]
    for nodes in (["r1"], ["r1", "r2"], ["r1", "r2", "r3"]):
        stored = list(quiet.applied[-1:])
        seam._report(_pool(stored), gate(dict.fromkeys(nodes, RHEL), unchecked, "Warn"))
        await _settle()
    assert [c["reason"] for c in quiet.applied] == ["RegistryUnreachable"]
    assert len(quiet.events) == 1 and "goes on unchecked" in quiet.events[0]
