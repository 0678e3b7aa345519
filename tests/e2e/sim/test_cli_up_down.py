"""`gpu-operator sim up` leaves a working cluster behind when it returns; a second `up` is
refused; `sim down` stops every process and removes the files."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from gpusim import KWOK_VERSION
from gpusim._state import read_state
from reconciler.envtest import cache_root, free_port
from tests.e2e.sim._kube import allocatable, call

pytestmark = pytest.mark.e2e


# As the `gpu-operator` console script runs it (`python -m components.cli` would load the
# module twice, as __main__ and as components.cli).
_MAIN = "import sys; from components.cli import main; sys.exit(main(sys.argv[1:]))"


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, "sim", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


async def _nodes(kubeconfig: Path) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        listed = await call(client.CoreV1Api(api).list_node)
    return {item["metadata"]["name"]: item for item in listed["items"]}


def test_sim_up_status_second_up_and_down(tmp_path: Path) -> None:
    folder = tmp_path / "sim"
    env = {**os.environ, "GPU_OPERATOR_SIM_DIR": str(folder)}
    env.pop("KUBECONFIG", None)
    port = free_port()
    up = _cli(
        env,
        "up",
        "--nodes",
        "2",
        "--cpu-nodes",
        "1",
        "--os",
        "ubuntu22.04,rhel9.4",
        "--port",
        str(port),
    )
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = Path(up.stdout.strip().splitlines()[-1])
        assert kubeconfig.is_file()
        assert f"server: https://127.0.0.1:{port}" in kubeconfig.read_text()
        assert "simulated cluster up" in up.stderr

        # `up` has exited; the cluster keeps running without it.
        state = read_state(folder)
        assert state is not None and state.status == "running"
        names = [p.name for p in state.processes]
        assert names == [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
            "gpu-node-behaviour",
        ]
        assert all(p.alive() for p in state.processes)
        found = asyncio.run(_nodes(kubeconfig))
        assert sorted(found) == ["cpu-node-0000", "gpu-node-0000", "gpu-node-0001"]
        for item in found.values():
            ready = {c["type"]: c["status"] for c in item["status"]["conditions"]}["Ready"]
            assert ready == "True"
            assert allocatable(item) == {}

        second = _cli(env, "up", "--nodes", "1")
        assert second.returncode == 1
        assert "already running" in second.stderr and str(kubeconfig) in second.stderr

        status = _cli(env, "status")
        assert status.returncode == 0 and status.stdout.strip() == str(kubeconfig)
    finally:
        down = _cli(env, "down")
    assert down.returncode == 0, down.stderr
    assert not any(p.alive() for p in state.processes)
    assert not folder.exists()
    again = _cli(env, "down")
    assert again.returncode == 0 and "no simulated cluster is running" in again.stderr


def test_a_component_that_fails_leaves_nothing_running(tmp_path: Path) -> None:
    # A cache whose kwok dies at once; every other binary is the real one.
    real = cache_root() / "bin"
    bin_dir = tmp_path / "cache" / "bin"
    bin_dir.mkdir(parents=True)
    for folder in real.iterdir():
        if not folder.name.startswith("kwok-"):
            (bin_dir / folder.name).symlink_to(folder)
    kwok = bin_dir / f"kwok-{KWOK_VERSION}"
    kwok.mkdir()
    (kwok / "stages").symlink_to(real / f"kwok-{KWOK_VERSION}" / "stages")
    (kwok / "kwok").write_text("#!/bin/sh\necho 'kwok: cannot start' >&2\nexit 3\n")
    (kwok / "kwok").chmod(0o755)

    folder = tmp_path / "sim"
    env = {**os.environ, "GPU_OPERATOR_SIM_DIR": str(folder)}
    env["GPU_OPERATOR_CACHE"] = str(tmp_path / "cache")
    up = _cli(env, "up", "--nodes", "1", "--cpu-nodes", "0")
    assert up.returncode == 1, up.stderr
    (error,) = [line for line in up.stderr.splitlines() if line.startswith("gpu-operator:")]
    assert error.startswith("gpu-operator: kwok exited with status 3; last lines of")
    assert "kwok: cannot start" in up.stderr
    assert up.stdout == ""
    # Nothing is left: no state, no files, no process of that cluster.
    assert not folder.exists() or not any(folder.iterdir())
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "sim")], capture_output=True, text=True
    )
    assert leftovers.stdout == ""
