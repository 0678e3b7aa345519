"""A driver version the simulated node fails to validate (`sim.gpu-operator.io/
failing-driver-versions`): the driver pod runs, its validator pods never turn Ready and
the node agent's GPUValidated stays False; other versions, and the same version on
nodes without the marker, validate as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpusim._admission import ANNOTATION_ADMITTED, STAGE_GATE
from gpusim._failing_drivers import (
    ANNOTATION_FAILING_DRIVERS,
    REASON,
    driver_fails,
    failing_versions,
    marker_patch,
    validator_writes,
)
from gpusim._hardware import PRODUCTS
from gpusim._node_agents import NodeFacts, SimulatedNodeAgents
from gpusim._node_software import Hardware, NodeSoftware, PodInfo, pod_info, trim_pod

pytestmark = pytest.mark.unit

BAD = "600.10.01"
GOOD = "595.91.07"
MARKED = {ANNOTATION_FAILING_DRIVERS: f"{BAD}, 600.10.02,"}


def driver(version: str, *, ready: bool = True) -> PodInfo:
    return PodInfo(
        key="gpu/nvidia-driver-daemonset-x",
        node="n1",
        software=NodeSoftware.DRIVER,
        ready=ready,
        image=f"nvcr.io/nvidia/driver:{version}-ubuntu22.04",
    )


def validator(
    phase: str = "Pending",
    *,
    ready: bool = False,
    reason: str = "",
    admitted: bool = False,
    node: str = "n1",
) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Ready", "status": "True" if ready else "False"}
    if reason:
        condition["reason"] = reason
    return {
        "metadata": {
            "name": "nvidia-operator-validator-abc",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-operator-validator"},
            "annotations": {ANNOTATION_ADMITTED: "true"} if admitted else {},
        },
        "spec": {"nodeName": node, "containers": [{"name": "v", "image": "validator:v1"}]},
        "status": {"phase": phase, "conditions": [condition]},
    }


def test_the_marker_lists_versions() -> None:
    assert failing_versions(MARKED) == {BAD, "600.10.02"}
    assert failing_versions({}) == frozenset()
    assert marker_patch([BAD, BAD, " 600.10.02"]) == {
        "metadata": {"annotations": {ANNOTATION_FAILING_DRIVERS: f"{BAD},600.10.02"}}
    }
    assert marker_patch([]) == {"metadata": {"annotations": {ANNOTATION_FAILING_DRIVERS: None}}}


def test_a_driver_pod_of_a_marked_version_fails_ready_or_starting() -> None:
    assert driver_fails(MARKED, [driver(BAD)]) == BAD
    assert driver_fails(MARKED, [driver(GOOD, ready=False), driver(BAD, ready=False)]) == BAD
    assert driver_fails(MARKED, [driver(GOOD)]) is None
    assert driver_fails({}, [driver(BAD)]) is None  # another node: no marker
    assert driver_fails(MARKED, []) is None  # a host driver: nothing of ours fails


def test_validators_start_only_under_a_driver_that_validates() -> None:
    pending = validator()
    [write] = validator_writes("n1", None, [pending])
    assert write.body == {"metadata": {"annotations": {ANNOTATION_ADMITTED: "true"}}}
    assert not write.status
    assert validator_writes("n1", BAD, [pending]) == []
    # Already let start, or on another node, or not a validator: nothing to write.
    assert validator_writes("n1", None, [validator(admitted=True)]) == []
    assert validator_writes("n2", None, [pending]) == []
    other = {**pending, "metadata": {**pending["metadata"], "labels": {"app": "x"}}}
    assert validator_writes("n1", None, [other]) == []


def test_a_running_validator_turns_unready_under_a_failing_driver_and_back() -> None:
    [write] = validator_writes("n1", BAD, [validator("Running", ready=True)])
    assert write.status
    conditions = {c["type"]: c for c in write.body["status"]["conditions"]}
    # Both: kwok's pod-ready-again stage readies a pod whose containers are ready.
    assert conditions["Ready"]["status"] == conditions["ContainersReady"]["status"] == "False"
    assert conditions["Ready"]["reason"] == REASON
    failed = validator("Running", ready=False, reason=REASON)
    assert validator_writes("n1", BAD, [failed]) == []
    [back] = validator_writes("n1", None, [failed])
    assert {c["status"] for c in back.body["status"]["conditions"]} == {"True"}
    # Not Ready for another reason (the node lifecycle controller's): not ours to undo.
    assert validator_writes("n1", None, [validator("Running", reason="NodeNotReady")]) == []


def test_the_cache_keeps_what_the_rule_reads_of_a_validator() -> None:
    pod = validator("Running", ready=False, reason=REASON, admitted=True)
    trimmed = trim_pod(pod)
    assert trimmed["metadata"]["annotations"] == {ANNOTATION_ADMITTED: "true"}
    assert validator_writes("n1", None, [trimmed]) == validator_writes("n1", None, [pod])
    info = pod_info(trimmed)
    assert info is not None and info.software is NodeSoftware.VALIDATOR


def test_kwoks_gate_waits_for_validators() -> None:
    assert '"nvidia-operator-validator"' in STAGE_GATE
    assert STAGE_GATE.count(ANNOTATION_ADMITTED) == 2


class _Api:
    """The API server as far as one node agent talks to it."""

    def __init__(self) -> None:
        self.node: dict[str, Any] = {
            "metadata": {"name": "n1", "annotations": {}},
            "status": {"allocatable": {"nvidia.com/gpu": "2"}, "conditions": []},
        }

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if method == "GET":
            return self.node if path.startswith("/api/v1/nodes/") else {"items": []}
        body = json.loads(kw["body"])
        if path.endswith("/status"):
            kept = {
                c["type"]: c
                for c in self.node["status"]["conditions"] + body["status"]["conditions"]
            }
            self.node["status"]["conditions"] = list(kept.values())
        return self.node

    def condition(self, kind: str) -> dict[str, Any]:
        return next(c for c in self.node["status"]["conditions"] if c["type"] == kind)


async def test_the_node_agent_does_not_validate_a_failing_driver(tmp_path: Path) -> None:
    api = _Api()
    agents = SimulatedNodeAgents(api, root=tmp_path)  # type: ignore[arg-type]
    hardware = Hardware(gpus=2, product=PRODUCTS["NVIDIA-H100-80GB-HBM3"], mig_capable=True)
    facts = NodeFacts(hardware=hardware, driver=BAD, driver_container=True, toolkit=True)
    await agents.step("n1", facts, failing=BAD)
    validated = api.condition("GPUValidated")
    assert validated["status"] == "False" and validated["reason"] == "DriverUnusable"
    assert BAD in validated["message"]
    # The marker gone (or a good version rolled out): the same node validates.
    await agents.step("n1", facts)
    assert api.condition("GPUValidated")["status"] == "True"
