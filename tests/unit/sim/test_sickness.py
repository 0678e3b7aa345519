"""A sick simulated GPU: the device plugin stops offering it, the node agent reports it,
a reset (the agent's answer to the operator's request) brings it back, or fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.api import (
    REBOOT_REQUEST_ANNOTATION,
    REBOOT_RESULT_ANNOTATION,
    RESET_REQUEST_ANNOTATION,
    RESET_RESULT_ANNOTATION,
)
from components.nodeagent import (
    ComputeProcess,
    HostRoot,
    NodeAgent,
    ResetFailed,
    SimulatedGpu,
    SimulatedNvml,
)
from gpusim._node_model import plan_node
from gpusim._nodes import ANNOTATION_XIDS
from gpusim._sickness import (
    ANNOTATION_ECC,
    ANNOTATION_RESET_FAILS,
    error_patch,
    reset_fails,
    reset_patch,
    sick_gpus,
)
from tests.unit.sim.test_node_model import STACK, gpu

pytestmark = pytest.mark.unit


def test_a_gpu_with_a_critical_xid_is_no_longer_offered() -> None:
    plan = plan_node(gpu(gpus=4, annotations={ANNOTATION_XIDS: "1:79"}), STACK, now=0)
    assert plan.resources == {"nvidia.com/gpu": "3"}


def test_ecc_errors_make_a_gpu_sick_and_an_application_xid_does_not() -> None:
    assert sick_gpus({ANNOTATION_ECC: "2:5", ANNOTATION_XIDS: "0:13"}) == {2}
    plan = plan_node(gpu(gpus=4, annotations={ANNOTATION_XIDS: "0:13"}), STACK, now=0)
    assert plan.resources == {"nvidia.com/gpu": "4"}


def test_a_reset_clears_only_its_gpu() -> None:
    annotations = {ANNOTATION_XIDS: "1:79,2:48", ANNOTATION_ECC: "1:3"}
    assert reset_patch(annotations, 1) == {ANNOTATION_XIDS: "2:48", ANNOTATION_ECC: None}


def test_injecting_adds_to_what_is_there_and_resets_can_be_made_to_fail() -> None:
    patch = error_patch({ANNOTATION_XIDS: "0:48"}, 3, xid=79, reset_fails=True)
    assert patch == {ANNOTATION_XIDS: "0:48,3:79", ANNOTATION_RESET_FAILS: "3"}
    assert reset_fails({ANNOTATION_RESET_FAILS: "3"}, 3)
    assert not reset_fails({ANNOTATION_RESET_FAILS: "3"}, 1)
    assert reset_fails({ANNOTATION_RESET_FAILS: "all"}, 1)


# -- the node agent answers the operator --------------------------------------------------


class FakeApi:
    def __init__(self, annotations: dict[str, str]) -> None:
        self.annotations = annotations
        self.allocatable = "2"
        self.conditions: dict[str, dict[str, Any]] = {}

    async def read_node(self) -> dict[str, Any]:
        return {
            "metadata": {"name": "gpu-0", "annotations": dict(self.annotations)},
            "status": {
                "allocatable": {"nvidia.com/gpu": self.allocatable},
                "conditions": list(self.conditions.values()),
            },
        }

    async def pods_on_node(self) -> list[Any]:
        return []

    async def patch_status(self, body: dict[str, Any]) -> dict[str, Any]:
        for c in body["status"]["conditions"]:
            self.conditions[c["type"]] = c
        return {}

    async def patch_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                self.annotations.pop(key, None)
            else:
                self.annotations[key] = value
        return {}


class FakeReset:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[int] = []

    async def reset(self, index: int) -> None:
        self.calls.append(index)
        if self.fail:
            raise ResetFailed("Unable to reset this GPU")


def setup(
    tmp_path: Path, annotations: dict[str, str], *, fail: bool = False, busy: bool = False
) -> tuple[NodeAgent, FakeApi, FakeReset, SimulatedNvml]:
    marker = tmp_path / "usr/local/nvidia/toolkit/nvidia-container-runtime"
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    processes = (ComputeProcess(pid=4242),) if busy else ()
    gpus = [
        SimulatedGpu(uuid=f"GPU-{i}", name="H100", memory_mib=1, processes=processes)
        for i in range(2)
    ]
    nvml = SimulatedNvml(gpus, driver="595.91.07")
    api = FakeApi(annotations)
    reset = FakeReset(fail)
    agent = NodeAgent(
        "gpu-0", nvml_opener=lambda: nvml, host=HostRoot(tmp_path), api=api, resetter=reset
    )
    return agent, api, reset, nvml


async def test_a_reset_request_resets_the_gpu_and_it_is_healthy_again(tmp_path: Path) -> None:
    agent, api, reset, nvml = setup(tmp_path, {})
    nvml.raise_xid(1, 79)
    await agent.step()
    assert api.conditions["GPUHealthy"]["status"] == "False"
    api.annotations[RESET_REQUEST_ANNOTATION] = "1/r1"
    await agent.step()
    assert reset.calls == [1]
    assert api.annotations[RESET_RESULT_ANNOTATION] == "r1/succeeded"
    assert api.conditions["GPUHealthy"]["status"] == "True"
    await agent.step()
    assert reset.calls == [1]  # answered once per request


async def test_a_reset_waits_while_a_process_holds_the_gpu(tmp_path: Path) -> None:
    agent, api, reset, _ = setup(tmp_path, {RESET_REQUEST_ANNOTATION: "0/r1"}, busy=True)
    await agent.step()
    assert reset.calls == []
    assert api.annotations[RESET_RESULT_ANNOTATION] == "r1/waiting/process 4242 still holds GPU 0"


async def test_a_failed_reset_is_answered_and_the_gpu_stays_sick(tmp_path: Path) -> None:
    agent, api, _, nvml = setup(tmp_path, {}, fail=True)
    nvml.raise_xid(0, 79)
    api.annotations[RESET_REQUEST_ANNOTATION] = "0/r1"
    await agent.step()
    assert api.annotations[RESET_RESULT_ANNOTATION] == "r1/failed/Unable to reset this GPU"
    assert api.conditions["GPUHealthy"]["status"] == "False"


async def test_a_reboot_request_writes_the_hosts_sentinel(tmp_path: Path) -> None:
    agent, api, _, _ = setup(tmp_path, {REBOOT_REQUEST_ANNOTATION: "b1"})
    await agent.step()
    assert (tmp_path / "var/run/reboot-required").exists()
    assert api.annotations[REBOOT_RESULT_ANNOTATION] == "b1/written"


async def test_a_sick_gpu_the_plugin_withholds_is_no_validation_mismatch(tmp_path: Path) -> None:
    agent, api, _, nvml = setup(tmp_path, {})
    nvml.raise_xid(1, 79)
    api.allocatable = "1"  # the device plugin stopped offering GPU 1
    await agent.step()
    assert api.conditions["GPUHealthy"]["status"] == "False"
    assert api.conditions["GPUValidated"]["status"] == "True"


def test_the_cli_needs_a_running_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from components.cli import main

    monkeypatch.setenv("GPU_OPERATOR_SIM_DIR", str(tmp_path))
    assert main(["sim", "gpu-error", "gpu-node-0000", "--xid", "79"]) != 0
    assert "no simulated cluster is running" in capsys.readouterr().err
