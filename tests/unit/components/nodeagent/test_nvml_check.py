"""`hack/nvml-check.sh` on this machine: with an NVIDIA GPU, the real NVML backend reads
it, read-only, into one JSON object; without one, the script says why and the test is
skipped with that reason (CI has no GPU: this is the suite's one expected skip)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[4]
SKIPPED = 77


def run_check() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "hack/nvml-check.sh"), "--xid-wait", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_real_backend_reads_this_machines_gpus_without_changing_them() -> None:
    first = run_check()
    if first.returncode == SKIPPED:
        assert first.stderr.startswith("nvml-check: skipped: "), first.stderr
        assert first.stdout == ""
        pytest.skip(first.stderr.strip())
    assert first.returncode == 0, first.stderr
    found = json.loads(first.stdout)
    assert found["gpuCount"] == len(found["gpus"]) > 0
    for gpu in found["gpus"]:
        assert gpu["uuid"].startswith("GPU-")
        assert gpu["memory_total_mib"] > 0
    assert {c["type"] for c in found["conditions"]} == {"GPUDriverReady", "GPUHealthy"}
    # Read-only: a second run finds the same GPUs in the same MIG modes.
    again = json.loads(run_check().stdout)
    assert [(g["uuid"], g["mig_current"], g["mig_pending"]) for g in again["gpus"]] == [
        (g["uuid"], g["mig_current"], g["mig_pending"]) for g in found["gpus"]
    ]
