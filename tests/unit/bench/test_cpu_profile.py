"""`bench/scale.py --profile` samples the operator's CPU time, not the wall clock: a
profile that counted waits would send whoever reads it after the wrong code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.tools import REPO

SAMPLER = REPO / "bench" / "_cpu_profile.py"

WORKLOAD = """
import sys, time

def busy(cpu_seconds):
    began = time.process_time()
    while time.process_time() - began < cpu_seconds:
        sum(range(1000))

def idle(seconds):
    time.sleep(seconds)

if __name__ == "__main__":
    idle(0.5)
    busy(0.5)
    print("args", sys.argv[1:])
"""


def _run(tmp_path: Path, *sampler_args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "workload.py").write_text(WORKLOAD)
    return subprocess.run(
        [sys.executable, str(SAMPLER), *sampler_args, "-m", "workload", "one", "--two"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_the_samples_fall_where_the_cpu_went_not_where_the_process_waited(
    tmp_path: Path,
) -> None:
    out = tmp_path / "profile.txt"
    result = _run(tmp_path, str(out), "--interval=0.002")
    assert result.returncode == 0, result.stderr
    # The module ran as `python -m` runs it, with its own arguments.
    assert "args ['one', '--two']" in result.stdout

    busy = idle = total = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        total += int(count)
        frames = stack.split(";")
        if any(f.startswith("busy (workload.py:") for f in frames):
            busy += int(count)
        if any(f.startswith("idle (workload.py:") for f in frames):
            idle += int(count)
    # 0.5 CPU s in busy() at one sample per 2 ms of CPU: about 250 samples.
    assert busy >= 100
    assert busy / total >= 0.5
    # The half second asleep costs no CPU, so it gets (almost) no samples.
    assert idle <= 5


def test_a_call_without_a_module_is_refused_with_the_usage(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SAMPLER), str(tmp_path / "profile.txt")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "usage: _cpu_profile.py OUT" in result.stderr
