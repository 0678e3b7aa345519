"""`gpu-operator demo`, the README's main command, as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _read_until(proc: subprocess.Popen[str], marker: str, seconds: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    raise AssertionError(f"no {marker!r} in the demo's output:\n" + "\n".join(lines[-40:]))


def test_demo_reaches_ready_runs_a_gpu_pod_and_cleans_up_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.cli", "demo", "--nodes", "2", "--cpu-nodes", "1"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        lines = _read_until(proc, "press Ctrl-C", 600)
        output = "\n".join(lines)
        assert "ClusterPolicy cluster-policy is ready" in output
        assert re.search(r"pod default/gpu-demo is (Running|Succeeded) on GPU node gpu-", output)
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", output)
        assert kubeconfig is not None
        workdir = Path(kubeconfig.group(1)).parent
        assert workdir.exists()
        proc.send_signal(signal.SIGINT)
        try:
            status = proc.wait(60)
        except subprocess.TimeoutExpired:
            left = subprocess.run(
                ["ps", "-o", "pid,stat,etime,args", "--ppid", str(proc.pid)],
                capture_output=True, text=True, check=False,
            ).stdout  # fmt: skip
            message = f"the demo still runs 60 s after Ctrl-C; its children:\n{left}"
            raise AssertionError(message) from None
        assert status == 0
        assert not workdir.exists(), "Ctrl-C left the cluster's files behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_demo_on_the_dra_stack_runs_a_claim_based_pod() -> None:
    """`demo --dra`: a GPUCluster instead of the ClusterPolicy, and a pod whose GPU comes
    from a ResourceClaim allocated on its node."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "components.cli",
            "demo",
            "--dra",
            "--nodes",
            "2",
            "--cpu-nodes",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        output = "\n".join(_read_until(proc, "press Ctrl-C", 600))
        assert "GPUCluster gpu-cluster is ready" in output
        published = re.findall(
            r"node (gpu-\S+) publishes (\d+) device\(s\) of gpu.nvidia.com", output
        )
        assert len(published) == 2, output
        running = re.search(
            r"pod default/gpu-demo is Running on GPU node (\S+); "
            r"its claim default/\S+ is allocated (\S+)/gpu-\d+",
            output,
        )
        assert running is not None, output
        assert running.group(1) == running.group(2), "the claim's device is on another node"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
