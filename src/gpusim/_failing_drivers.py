"""A bad driver version, simulated: it installs, but the node fails its validation.

The node annotation `sim.gpu-operator.io/failing-driver-versions` (comma-separated driver
versions, `600.10.01,600.10.02`) marks versions that break on that node. A driver pod of
such a version still starts and turns Ready (the kernel module builds and loads), but
what validates the driver says no, as a real broken driver makes it:

* the validator pods (`app=nvidia-operator-validator`) on the node never start: their
  driver-validation init container fails, so they stay Pending and not Ready. kwok's
  `pod-ready` stage starts a validator pod only once the GPU node behaviour has let it
  (`ANNOTATION_ADMITTED`, the gate `gpusim._admission` already uses for GPU pods), so no
  validator is Ready even for a moment under a failing driver. One that runs already
  when its driver turns out to be failing (the marker set later) is made not Ready, and
  Ready again when the marker no longer names the version;
* the node agent's simulated NVML does not initialise, so its `GPUValidated` condition
  stays False (`DriverUnusable`).

Why a node annotation: like the rest of the simulated hardware it is one patch for any
client (a test, a benchmark, `gpu-operator sim failing-driver`), and it survives every
pod restart, so a rollout back to a good version validates again. Pure rules here; the
GPU node behaviour (`gpusim.gpu_node_behaviour`) does the writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpusim._admission import ANNOTATION_ADMITTED, VALIDATOR_APP
from gpusim._node_model import driver_version
from gpusim._node_software import NodeSoftware, PodInfo
from gpusim._nodes import SIM_PREFIX
from reconciler import Client, annotations_of, is_deleting, labels_of, name_of, namespace_of
from reconciler.kinds import NODE

ANNOTATION_FAILING_DRIVERS = SIM_PREFIX + "failing-driver-versions"
REASON = "SimulatedDriverValidationFailed"
"""The reason on the Ready condition of a running validator made not Ready: what tells
the simulation's own doing from the node lifecycle controller's."""


def failing_versions(annotations: Mapping[str, str]) -> frozenset[str]:
    """The driver versions the node's marker names (blanks skipped)."""
    text = annotations.get(ANNOTATION_FAILING_DRIVERS, "")
    return frozenset(v.strip() for v in text.split(",") if v.strip())


def driver_fails(annotations: Mapping[str, str], drivers: Iterable[PodInfo]) -> str | None:
    """The failing version of a driver pod on the node, None when none fails.

    Any driver pod counts, Ready or still starting: a validator must not start under a
    new driver that is about to fail, and the old pod of a good version terminating
    beside it changes nothing."""
    failing = failing_versions(annotations)
    if not failing:
        return None
    for pod in drivers:
        if pod.software is NodeSoftware.DRIVER:
            version = driver_version(pod.image)
            if version in failing:
                return version
    return None


def failing_message(version: str) -> str:
    """What the simulated NVML answers under a failing driver (the node agent's reason)."""
    return (
        f"NVML did not initialise: RmInitAdapter failed for driver {version} "
        f"(simulated: {ANNOTATION_FAILING_DRIVERS} names it on this node)"
    )


def is_validator(pod: Mapping[str, Any]) -> bool:
    return labels_of(pod).get("app") == VALIDATOR_APP


@dataclass(frozen=True, slots=True)
class PodWrite:
    """One write to a validator pod: a merge patch, on its status or not."""

    key: str
    body: dict[str, Any]
    status: bool = False
    why: str = ""


def _ready(pod: Mapping[str, Any]) -> tuple[bool, str]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True", str(c.get("reason") or "")
    return False, ""


def _readiness(ready: bool, reason: str = "") -> dict[str, Any]:
    value = "True" if ready else "False"
    conditions = [{"type": t, "status": value} for t in ("Ready", "ContainersReady")]
    if reason:
        for c in conditions:
            c["reason"] = reason
            c["message"] = "driver validation failed (simulated)"
    return {"status": {"conditions": conditions}}


def validator_writes(
    node: str, failing: str | None, validators: Sequence[Mapping[str, Any]]
) -> list[PodWrite]:
    """What the node's validator pods need, under a failing driver version or not.

    A pod not yet started is let start (kwok's gate) unless the driver fails; a running
    Ready one is made not Ready (both conditions: kwok's `pod-ready-again` stage turns a
    pod Ready again whose containers are ready) when it fails; one the simulation made
    not Ready turns Ready again when it no longer does."""
    out: list[PodWrite] = []
    for pod in validators:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node or is_deleting(pod) or not is_validator(pod):
            continue
        key = f"{namespace_of(pod)}/{name_of(pod)}"
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        ready, reason = _ready(pod)
        if phase == "Pending":
            if failing is None and annotations_of(pod).get(ANNOTATION_ADMITTED) != "true":
                body = {"metadata": {"annotations": {ANNOTATION_ADMITTED: "true"}}}
                out.append(PodWrite(key, body, why="started"))
        elif phase == "Running":
            if failing is not None and ready:
                out.append(
                    PodWrite(key, _readiness(False, REASON), True, f"driver {failing} fails")
                )
            elif failing is None and not ready and reason == REASON:
                out.append(PodWrite(key, _readiness(True), True, "driver validates again"))
    return out


def marker_patch(versions: Iterable[str]) -> dict[str, Any]:
    """The node patch that marks `versions` failing (none: removes the marker)."""
    text = ",".join(dict.fromkeys(v.strip() for v in versions if v.strip()))
    return {"metadata": {"annotations": {ANNOTATION_FAILING_DRIVERS: text or None}}}


async def mark_failing_drivers(client: Client, node: str, versions: Iterable[str]) -> None:
    """Make `versions` fail validation on `node` from now on (replacing its list)."""
    await client.patch(NODE, node, marker_patch(versions), quiet=True)
