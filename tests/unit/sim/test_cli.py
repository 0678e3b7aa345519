"""`gpu-operator sim` refuses bad input with one sentence and leaves nothing behind."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.cli import main
from gpusim._state import (
    STATE_FILE,
    RecordedProcess,
    SimState,
    read_state,
    state_dir,
    write_state,
)

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def sim_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "sim"
    monkeypatch.setenv("GPU_OPERATOR_SIM_DIR", str(folder))
    yield folder


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status = main(["sim", *argv])
    captured = capsys.readouterr()
    assert status == 1, captured
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("gpu-operator: ")
    return lines[0]


def _nothing_left(folder: Path) -> None:
    assert not (folder / STATE_FILE).exists()
    assert not (folder / "cluster").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "--nodes must be at least 1 (got 0)"),
        (["--nodes", "-2"], "--nodes must be at least 1 (got -2)"),
        (["--cpu-nodes", "-1"], "--cpu-nodes must not be negative"),
        (["--gpus-per-node", "0"], "--gpus-per-node must be between 1 and 16"),
        (["--os", "windows11"], "unknown OS 'windows11'"),
        (["--os", "ubuntu22.04,plan9"], "unknown OS 'plan9'"),
        (["--kernels", "6.8"], "invalid kernel version '6.8'"),
        (["--product", "RTX-9090"], "unknown GPU product 'RTX-9090'"),
        (["--product", "NVIDIA-L4", "--mig-capable"], "NVIDIA-L4 does not support MIG"),
        (["--port", "70000"], "port 70000 is not a valid TCP port"),
    ],
)
def test_bad_flags(
    capsys: pytest.CaptureFixture[str], sim_dir: Path, argv: list[str], message: str
) -> None:
    assert message in _error(capsys, "up", *argv)
    _nothing_left(sim_dir)


def test_port_in_use(capsys: pytest.CaptureFixture[str], sim_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = _error(capsys, "up", "--port", str(port))
    assert f"port {port} is already in use" in message
    _nothing_left(sim_dir)


def test_missing_binaries(
    capsys: pytest.CaptureFixture[str],
    sim_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GPU_OPERATOR_CACHE", str(tmp_path / "empty-cache"))
    message = _error(capsys, "up")
    assert "is missing at" in message and "hack/build-binaries.sh" in message
    _nothing_left(sim_dir)


def test_second_up_while_one_runs_says_so(
    capsys: pytest.CaptureFixture[str], sim_dir: Path
) -> None:
    # A recorded process that is alive (this test's own) stands for a running cluster.
    kubeconfig = str(sim_dir / "cluster" / "kubeconfig")
    running = SimState(kubeconfig, [RecordedProcess.of("kwok", os.getpid())], status="running")
    write_state(sim_dir, running)
    message = _error(capsys, "up")
    assert "already running" in message and kubeconfig in message and "sim down" in message
    assert read_state(sim_dir) == running  # untouched


def test_status_and_down_with_nothing_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "status"]) == 1
    assert main(["sim", "down"]) == 0
    assert "no simulated cluster is running" in capsys.readouterr().err


def test_down_of_a_dead_cluster_removes_its_files(
    capsys: pytest.CaptureFixture[str], sim_dir: Path
) -> None:
    (sim_dir / "cluster" / "logs").mkdir(parents=True)
    gone = RecordedProcess("kwok", 999_999_999, 12345)  # no such pid
    write_state(sim_dir, SimState(str(sim_dir / "cluster" / "kubeconfig"), [gone]))
    assert main(["sim", "down"]) == 0
    assert not sim_dir.exists()
    assert "stopped the simulated cluster" in capsys.readouterr().err


def test_state_dir_default_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPU_OPERATOR_SIM_DIR")
    monkeypatch.setenv("GPU_OPERATOR_CACHE", str(tmp_path))
    assert state_dir() == tmp_path / "sim"


def test_recorded_process_is_not_confused_with_a_reused_pid() -> None:
    me = RecordedProcess.of("me", os.getpid())
    assert me.alive()
    assert not RecordedProcess("me", os.getpid(), me.started + 1).alive()
